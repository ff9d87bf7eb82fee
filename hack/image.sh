#!/usr/bin/env bash
# Builds the operator's OCI image offline: a statically linked release binary (glibc with
# crt-static) on an empty base (Dockerfile), with buildah, into podman's local store.
#
# usage: hack/image.sh
#
#   IMAGE           the tag (default localhost/database-operator:<crate version>, the tag that
#                   manifests/kustomization.yaml and the Helm chart name)
#   IMAGE_ARCHIVE   also write the image as an OCI archive to this path (hack/release.sh does)
#   IMAGE_SOURCE    the org.opencontainers.image.source label (default: the git remote
#                   "origin", else "unknown")
#   CONTAINER_TOOL  buildah (default) or docker: the same Dockerfile and context either way
#   CONTAINERD_ADDRESS  also import the image into the containerd at this socket (namespace
#                   k8s.io), where a kubelet finds it: `hack/control-plane.sh env` sets it for a
#                   plane with a real node
#
# Installs buildah, podman and runc from the distribution's packages when they are missing
# (Debian/Ubuntu, as root), and points CONTAINERS_CONF at hack/image/containers.conf unless it
# is set. Prints the image's tag on its last line.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" image

version=$(crate_version)
IMAGE=${IMAGE:-localhost/database-operator:$version}
tool=${CONTAINER_TOOL:-buildah}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/hack/image/containers.conf}

# The tools, installed as the control plane's build installs nothing it can do without.
if [ "$tool" = buildah ]; then
  missing=()
  for t in buildah podman runc; do command -v "$t" >/dev/null || missing+=("$t"); done
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null ||
      die "${missing[*]} missing: install them (Debian/Ubuntu: apt-get install buildah podman runc) and run again"
    log "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq buildah podman runc >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq buildah podman runc >/dev/null; } ||
      die "apt-get install buildah podman runc failed"
  fi
fi

revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
source_url=${IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}
# The commit's time, not the build's: the same commit gives the same labels and timestamps,
# so the same binary gives the same image digest.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

# The binary: static, so the empty base needs no libc. The target is named explicitly so that
# crt-static applies to the binary only (not to build scripts and proc macros), and the build
# has a directory of its own beside target/release.
triple=x86_64-unknown-linux-gnu
log "building the static release binary ($triple, crt-static, revision $revision)"
t0=$(date +%s)
CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" GIT_REVISION=$revision \
  cargo build --release --locked --bin database-operator --target "$triple"
binary=target/$triple/release/database-operator
log "built in $(($(date +%s) - t0))s: $(du -h "$binary" | cut -f1) $binary"
# Static: no program interpreter and no shared libraries needed.
if readelf --program-headers --dynamic "$binary" | grep -Eq 'INTERP|\(NEEDED\)'; then
  die "$binary is dynamically linked: $(readelf --dynamic "$binary" | grep NEEDED | tr '\n' ' ')"
fi
printed=$("$binary" --version)
[[ $printed == "database-operator $version ($revision)" ]] || die "--version printed '$printed'"

context=target/image/context
rm -rf "$context" && mkdir -p "$context"
# Without the line tables (kept in target/ for profiling): a third of the size; panics still
# name their functions.
objcopy --strip-debug "$binary" "$context/database-operator"
args=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "SOURCE=$source_url"
  --build-arg "CREATED=$created" -f Dockerfile -t "$IMAGE")
log "building $IMAGE with $tool"
t0=$(date +%s)
case $tool in
  buildah) buildah build --quiet --timestamp "$epoch" "${args[@]}" "$context" >/dev/null ;;
  docker) docker build "${args[@]}" "$context" >/dev/null ;;
  *) die "CONTAINER_TOOL=$tool: use buildah or docker" ;;
esac
if [ "$tool" = buildah ]; then
  size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
  log "built $IMAGE in $(($(date +%s) - t0))s: $((size / 1024 / 1024)) MiB, id $(podman image inspect --format '{{.Id}}' "$IMAGE" | cut -c1-12)"
  if [ -n "${IMAGE_ARCHIVE:-}" ]; then
    mkdir -p "$(dirname "$IMAGE_ARCHIVE")"
    rm -f "$IMAGE_ARCHIVE"
    podman save --quiet --format oci-archive -o "$IMAGE_ARCHIVE" "$IMAGE"
    log "wrote $IMAGE_ARCHIVE ($(du -h "$IMAGE_ARCHIVE" | cut -f1))"
  fi
else
  log "built $IMAGE in $(($(date +%s) - t0))s"
  [ -z "${IMAGE_ARCHIVE:-}" ] || docker save -o "$IMAGE_ARCHIVE" "$IMAGE"
fi
if [ -n "${CONTAINERD_ADDRESS:-}" ]; then
  [ "$tool" = buildah ] || die "CONTAINERD_ADDRESS needs CONTAINER_TOOL=buildah (podman's store)"
  t0=$(date +%s)
  # podman's archive names the image in its index (org.opencontainers.image.ref.name), which
  # ctr takes as the image's name.
  podman save --quiet --format oci-archive "$IMAGE" |
    ctr --address "$CONTAINERD_ADDRESS" -n k8s.io images import - >/dev/null
  log "imported $IMAGE into the containerd at $CONTAINERD_ADDRESS in $(($(date +%s) - t0))s"
fi
echo "$IMAGE"
