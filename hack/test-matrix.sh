#!/usr/bin/env bash
# The whole suite (hack/test.sh) on every Kubernetes version the project supports, one after
# another, each on a control plane of its own built from the Go module proxy; plus the newest
# version with the WatchList feature gate off, where the informer must fall back from
# streaming lists to paginated ones. Not in CI: each version's first build takes 5-25 minutes.
# The fault suite (hack/faults.sh) and the tiny benchmark run are left out here (FAULTS=0
# BENCH=0): they run in the test command, on the default version.
#
# usage: hack/test-matrix.sh
#
#   VERSIONS   default "v1.34.4 v1.35.4 v1.36.3 v1.37.2"
#   VARIANTS   extra runs as VERSION:FEATURE_GATES (default "v1.37.2:WatchList=false")
#   OUT        default target/test-matrix: results.md (the README's table rows) and each log
#
# Goes on after a failing version, and exits non-zero if any failed.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" matrix
# lib.sh stops at the first failure; the matrix goes on after a failing version.
set +e
VERSIONS=${VERSIONS:-v1.34.4 v1.35.4 v1.36.3 v1.37.2}
VARIANTS=${VARIANTS-v1.37.2:WatchList=false}
OUT=${OUT:-target/test-matrix}
mkdir -p "$OUT"

runs=()
for version in $VERSIONS; do runs+=("$version:"); done
for variant in $VARIANTS; do runs+=("$variant"); done

failed=0
rows=()
for run in "${runs[@]}"; do
  version=${run%%:*}
  gates=${run#*:}
  label=$version${gates:+ ($gates)}
  logfile=$OUT/$version${gates:+-${gates//[=,]/-}}.log
  log "$label: building the control plane (cached after the first time), then hack/test.sh; log $logfile"
  t0=$(date +%s)
  if FAULTS=0 BENCH=0 KUBE_VERSION=$version APISERVER_FEATURE_GATES=$gates PLANE="matrix-$$" hack/test.sh >"$logfile" 2>&1; then
    result=pass
  else
    result=FAIL
    failed=1
  fi
  seconds=$(($(date +%s) - t0))
  # The test binaries' summaries: passed and failed tests over the whole run.
  read -r passed failures < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' "$logfile" |
    awk '{p += $1; f += $2} END {print p + 0, f + 0}')
  log "$label: $result in ${seconds}s ($passed tests passed, $failures failed)"
  rows+=("| $version | ${gates:-defaults} | $(date -u +%Y-%m-%d) | $result: $passed passed, $failures failed | $((seconds / 60)) min $((seconds % 60)) s |")
done

{
  echo "| Kubernetes | apiserver feature gates | date | hack/test.sh | wall time |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$OUT/results.md"
exit $failed
