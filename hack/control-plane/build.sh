#!/usr/bin/env bash
# Builds the local control plane from the Go module proxy into a cache outside the checkout:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (plus kwok's stages);
# and for a real node (node.sh): kubelet, kube-proxy, CoreDNS, the plane's volume provisioner
# (cmd/local-provisioner) and the pause image, from Kubernetes' own build/pause source.
#
#   KUBE_VERSION   v1.37.2 (default), v1.36.3, v1.35.4 or v1.34.4
#   XDG_CACHE_HOME the cache root (default ~/.cache)
#
# Prints the directory holding the binaries on its last line. The directory is keyed by the
# Kubernetes version and a hash of the wrapper modules (go.mod, go.sum, sources), so every
# clone on the machine shares one build, and a second build is a no-op.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
default_version=v1.37.2
version=${KUBE_VERSION:-$default_version}
case "$version" in
  v1.34.4 | v1.35.4 | v1.36.3 | v1.37.2) ;;
  *) echo "build: KUBE_VERSION=$version is not supported; use v1.34.4, v1.35.4, v1.36.3 or v1.37.2" >&2; exit 2 ;;
esac
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/control-plane
start=$(date +%s)
log() { printf '[control-plane build %4ss] %s\n' "$(($(date +%s) - start))" "$*" >&2; }

# The module to build from: the committed one for the default version; for the others, one
# generated the same way (gen-gomod.sh) in the cache, since go.sum depends on the version.
if [ "$version" = "$default_version" ]; then
  src=$here
else
  src=$cache_root/src/$version
  if [ ! -f "$src/go.sum" ]; then
    log "generating the wrapper module for $version in $src"
    rm -rf "$src" && mkdir -p "$src"
    cp -r "$here/tools.go" "$here/cmd" "$here/kwok" "$here/coredns" "$src/"
    "$here/gen-gomod.sh" "$version" "$src" >&2
    (cd "$src" && go mod tidy)
  fi
fi

key=$(cat "$src/go.mod" "$src/go.sum" "$src"/cmd/*/main.go "$src/kwok/go.mod" "$src/kwok/go.sum" \
  "$src/coredns/go.mod" "$src/coredns/go.sum" "$src/coredns/main.go" "$here/oci-archive.py" "$here/build.sh" |
  sha256sum | cut -c1-12)
out=$cache_root/$version-$key
if [ -f "$out/.complete" ]; then
  log "up to date: $out"
  echo "$out"
  exit 0
fi

log "building Kubernetes $version into $out"
log "a cold build compiles ~6,000 Go packages: about 25-35 minutes on 2 cores and 3-4 GiB of memory;"
log "later builds reuse Go's build cache ($(go env GOCACHE)) and take about a minute"
mkdir -p "$out.tmp"
version_ldflags="-X k8s.io/component-base/version.gitVersion=$version"
version_ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
version_ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
version_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

# One `go build` per binary so progress can be shown; they share Go's build cache, so the
# total work is the same as one invocation.
build() { # dir name package
  local dir=$1 name=$2 pkg=$3 t0 pid
  t0=$(date +%s)
  log "building $name ..."
  (cd "$dir" && go build -trimpath -ldflags "-s -w $version_ldflags" -o "$out.tmp/$name" "$pkg") &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    if kill -0 "$pid" 2>/dev/null && [ $((($(date +%s) - t0) % 60)) -lt 5 ]; then
      log "  still building $name ($(($(date +%s) - t0))s)"
    fi
  done
  wait "$pid"
  log "built $name in $(($(date +%s) - t0))s"
}
build "$src" etcd ./cmd/etcd
build "$src" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build "$src" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build "$src" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build "$src" kubelet k8s.io/kubernetes/cmd/kubelet
build "$src" kube-proxy k8s.io/kubernetes/cmd/kube-proxy
build "$src/kwok" kwok sigs.k8s.io/kwok/cmd/kwok
build "$src" local-provisioner ./cmd/local-provisioner
build "$src/coredns" coredns .

# The pod sandbox's image, as Kubernetes builds it (build/pause/Makefile): a static C program,
# at the version the kubelet of this release expects (build/dependencies.yaml).
kube_dir=$(cd "$src" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
pause_version=$(awk '/name: "registry.k8s.io\/pause: dependents"/ { getline; print $2; exit }' "$kube_dir/build/dependencies.yaml")
[ -n "$pause_version" ] || { log "no pause version in $kube_dir/build/dependencies.yaml"; exit 1; }
log "building the pause image $pause_version ..."
gcc -Os -Wall -Werror -static -DVERSION="v$pause_version-local" -o "$out.tmp/pause" "$kube_dir/build/pause/linux/pause.c"
strip "$out.tmp/pause"
echo "registry.k8s.io/pause:$pause_version" >"$out.tmp/pause-image"
"$here/oci-archive.py" "$out.tmp/pause.oci.tar" "registry.k8s.io/pause:$pause_version" 65535:65535 /pause "$out.tmp/pause:/pause"

# kwok moves nodes and pods through "stages"; its module ships the standard ones as data.
kwok_dir=$(cd "$src/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for stage in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
  echo "---"
  cat "$kwok_dir/kustomize/stage/$stage.yaml"
done > "$out.tmp/kwok-stages.yaml"

touch "$out.tmp/.complete"
rm -rf "$out" && mv "$out.tmp" "$out"
log "done: $(du -sh "$out" | cut -f1) in $out"
echo "$out"
