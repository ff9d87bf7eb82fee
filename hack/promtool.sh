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
# promtool's own `--version` says the release (3.16.0), as a release's build does.
release=$(echo "$version" | awk -F. '{ printf "%d.%d.%s", $2 / 100, $2 % 100, $3 }')
ldflags="-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.Branch=HEAD"
# GOWORK=off: the module ships a go.work naming modules its zip does not hold.
go_tool promtool promtool "$module" "$version" ./cmd/promtool "$ldflags" GOWORK=off
