#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy (there is no download site to fetch a release
# from) into a cache outside the checkout, for the chart in charts/ and its test (tests/chart.rs).
#
#   XDG_CACHE_HOME the cache root (default ~/.cache)
#
# The version and every dependency are pinned by the wrapper module hack/tools/helm/ (go.mod and
# go.sum, so the build needs no checksum database). Prints the path of the binary on its last
# line: `HELM=$(hack/helm.sh | tail -n1)`. A second run is a no-op; a change to the wrapper
# module or to this script rebuilds.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/tools/helm
start=$(date +%s)
log() { printf '[helm build %4ss] %s\n' "$(($(date +%s) - start))" "$*" >&2; }

version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" { print $3 }' "$src/go.mod")
if [ -z "$version" ]; then
  echo "helm: no 'require helm.sh/helm/v3 VERSION' line in $src/go.mod" >&2
  exit 1
fi
out=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools/helm-$version
key=$(cat "$src/go.mod" "$src/go.sum" "$src/tools.go" "$here/helm.sh" | sha256sum | cut -c1-12)
if [ -x "$out/helm" ] && [ "$(cat "$out/.complete" 2>/dev/null)" = "$key" ]; then
  log "up to date: $out/helm"
  echo "$out/helm"
  exit 0
fi

command -v go >/dev/null || { echo "helm: building helm needs Go (go.dev/dl), which is not on PATH" >&2; exit 1; }
log "building helm $version into $out"
log "a cold build downloads and compiles ~1,000 Go packages (a minute or two on 2 cores, more"
log "while other builds share them); later builds reuse Go's build cache ($(go env GOCACHE))"

# The ldflags of helm's own Makefile for a release: the version (the source only says "v3.22"),
# and the Kubernetes version `helm template` and `helm lint` assume without a cluster, which the
# Makefile derives from client-go (v0.37.x -> 1.37) rather than the source's default of 1.20.
client_go=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$src/go.mod")
kube_minor=$(echo "$client_go" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kube_minor"
done

rm -rf "$out.tmp" && mkdir -p "$out.tmp"
# -mod=readonly: a go.sum that does not cover the build is an error, never silently extended.
(cd "$src" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp/helm" helm.sh/helm/v3/cmd/helm) &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 5
  if kill -0 "$pid" 2>/dev/null && [ $((($(date +%s) - start) % 60)) -lt 5 ]; then
    log "  still building"
  fi
done
wait "$pid"
log "built: $("$out.tmp/helm" version --short)"

echo "$key" > "$out.tmp/.complete"
rm -rf "$out" && mv "$out.tmp" "$out"
log "done in $(($(date +%s) - start))s: $out/helm"
echo "$out/helm"
