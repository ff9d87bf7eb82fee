#!/usr/bin/env bash
# Builds Prometheus's `promtool` (Apache-2.0) from the Go module proxy (there is no download
# site to fetch a release from) into a cache outside the checkout, for the chart's alerting
# rules and their unit tests (tests/monitoring.rs: `promtool check rules`, `promtool test rules`).
#
#   XDG_CACHE_HOME     the cache root (default ~/.cache)
#   PROMTOOL_VERSION   the github.com/prometheus/prometheus module version (default below)
#
# The module is built in its own directory of Go's module cache, so its go.mod and go.sum
# decide every dependency: nothing is resolved anew. Prints the path of the binary on its last
# line: `PROMTOOL=$(hack/promtool.sh | tail -n1)`. A second run is a no-op; a new version or
# new build flags rebuild.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" promtool

# The newest the Go module proxy served on 2026-12-05. Prometheus tags its Go module v0.3XX.Y
# for its release v3.XX.Y (a module path without /v3), so this is promtool 3.16.0.
module=github.com/prometheus/prometheus
version=${PROMTOOL_VERSION:-v0.316.0}
out=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools/promtool-$version
# promtool's own `--version` says the release (3.16.0), as a release's build does.
release=$(echo "$version" | awk -F. '{ printf "%d.%d.%s", $2 / 100, $2 % 100, $3 }')
ldflags="-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.Branch=HEAD"
key=$(echo "$module@$version CGO_ENABLED=0 -trimpath $ldflags" | sha256sum | cut -c1-12)
if [ -x "$out/promtool" ] && [ "$(cat "$out/.complete" 2>/dev/null)" = "$key" ]; then
  log "up to date: $out/promtool"
  echo "$out/promtool"
  exit 0
fi

command -v go >/dev/null || die "building promtool needs Go (go.dev/dl), which is not on PATH"
log "building promtool $version into $out"
log "a cold build downloads and compiles ~1,000 Go packages (minutes on 2 cores, more while"
log "other builds share them); later builds reuse Go's build cache ($(go env GOCACHE))"
dir=$(cd "$(mktemp -d)" && go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || die "go mod download $module@$version gave no directory"

rm -rf "$out.tmp" && mkdir -p "$out.tmp"
# GOWORK=off: the module ships a go.work naming modules its zip does not hold.
(cd "$dir" && GOWORK=off CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp/promtool" ./cmd/promtool) &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 5
  if kill -0 "$pid" 2>/dev/null && [ $((($(date +%s) - lib_start) % 60)) -lt 5 ]; then
    log "  still building"
  fi
done
wait "$pid"
log "built: $("$out.tmp/promtool" --version 2>&1 | head -n 1)"

echo "$key" > "$out.tmp/.complete"
rm -rf "$out" && mv "$out.tmp" "$out"
log "done in $(($(date +%s) - lib_start))s: $out/promtool"
echo "$out/promtool"
