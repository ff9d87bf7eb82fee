#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (Apache-2.0), the S3-compatible object store the tests back up to
# (tests/e2e/object_store.rs, hack/object-store.sh), from the Go module proxy (there is no
# download site to fetch a release from) into a cache outside the checkout.
#
#   XDG_CACHE_HOME the cache root (default ~/.cache)
#
# The module is built in its own directory of Go's module cache, so its go.mod (its replace
# line included) and go.sum decide every dependency: nothing is resolved anew. Prints the path of
# the binary on its last line: `WEED=$(hack/seaweedfs.sh | tail -n1)`. A second run is a no-op; a
# new version or new build flags rebuild.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" seaweedfs

# The newest the Go module proxy served on 2026-12-01 (a pseudo-version: the project tags its
# releases without the module path's major version).
module=github.com/seaweedfs/seaweedfs
version=${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
out=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools/seaweedfs-$version
ldflags="-s -w"
key=$(echo "$module@$version CGO_ENABLED=0 -trimpath $ldflags" | sha256sum | cut -c1-12)
if [ -x "$out/weed" ] && [ "$(cat "$out/.complete" 2>/dev/null)" = "$key" ]; then
  log "up to date: $out/weed"
  echo "$out/weed"
  exit 0
fi

command -v go >/dev/null || die "building SeaweedFS needs Go (go.dev/dl), which is not on PATH"
log "building SeaweedFS $version into $out"
log "a cold build downloads and compiles ~2,000 Go packages (several minutes on 2 cores, more"
log "while other builds share them); later builds reuse Go's build cache ($(go env GOCACHE))"
dir=$(cd "$(mktemp -d)" && go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || die "go mod download $module@$version gave no directory"

rm -rf "$out.tmp" && mkdir -p "$out.tmp"
(cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp/weed" ./weed) &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 5
  if kill -0 "$pid" 2>/dev/null && [ $((($(date +%s) - lib_start) % 60)) -lt 5 ]; then
    log "  still building"
  fi
done
wait "$pid"
log "built: $("$out.tmp/weed" version 2>&1 | head -n 1)"

echo "$key" > "$out.tmp/.complete"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out/weed"
