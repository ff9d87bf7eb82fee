#!/usr/bin/env bash
# Runs the work queue micro-benchmarks on our queue (benches/workqueue.rs, criterion) and on
# client-go's (benches/peers/client-go-workqueue, go test -bench), one after the other, and prints
# one table: scenario, ours keys/s, client-go keys/s, ratio. Both do the same work: see the doc
# comments at the top of the two benchmark files.
#
#   hack/bench/workqueue-vs-client-go.sh            # every scenario, ~2.5 s per point per side
#   QUICK=1 hack/bench/workqueue-vs-client-go.sh    # ~0.5 s per point, for a smoke test
#
# The figures are only as good as the machine is quiet: it prints the load average before each
# side runs. Needs cargo and go; builds both before measuring either. The raw outputs of both
# sides are kept in target/bench/workqueue-vs-client-go/.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
peer="$root/benches/peers/client-go-workqueue"
work="$root/target/bench/workqueue-vs-client-go"
mkdir -p "$work"

if [[ -n "${QUICK:-}" ]]; then
  criterion_args=(--warm-up-time 0.3 --measurement-time 0.5)
  go_benchtime=500ms
else
  criterion_args=()
  go_benchtime=2500ms
fi

load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "building both sides..."
(cd "$root" && cargo bench --bench workqueue --no-run >/dev/null 2>"$work/cargo-build.log") ||
  { cat "$work/cargo-build.log" >&2; exit 1; }
(cd "$peer" && go test -c -o "$work/client-go-workqueue.test" .)

ours_cmd=(cargo bench --bench workqueue -- "${criterion_args[@]}")
echo "ours (load $(load)): ${ours_cmd[*]}"
(cd "$root" && "${ours_cmd[@]}") >"$work/ours.txt" 2>"$work/ours.err" || { cat "$work/ours.err" >&2; exit 1; }

go_cmd=("$work/client-go-workqueue.test" -test.run '^$' -test.bench . -test.benchtime "$go_benchtime")
echo "client-go (load $(load)): (cd benches/peers/client-go-workqueue && go test -run '^\$' -bench . -benchtime $go_benchtime)"
(cd "$peer" && "${go_cmd[@]}") >"$work/client-go.txt"
echo "done (load $(load))"
echo

# Ours: the table benches/support prints, `| add_get_done/workers=1/keys=100 | time | keys/s | ...`.
awk -F'|' '$2 ~ /^ (add_get_done|single_thread|rate_limited)/ { gsub(/ /, "", $2); gsub(/ /, "", $4); print $2, $4 }' \
  "$work/ours.txt" >"$work/ours.tsv"
# client-go: `BenchmarkAddGetDone/workers=1/keys=100-2  N  T ns/op  R keys/s`.
awk '$1 ~ /^Benchmark/ {
       name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
       sub(/^AddGetDone/, "add_get_done", name); sub(/^RateLimited/, "rate_limited", name)
       sub(/^SingleThread/, "single_thread", name)
       for (i = 2; i < NF; i++) if ($(i + 1) == "keys/s") print name, $i
     }' "$work/client-go.txt" >"$work/client-go.tsv"

printf '| scenario | ours keys/s | client-go keys/s | ours / client-go |\n|---|---:|---:|---:|\n'
# Our variants (Arc<str> keys, a thread as producer) are compared with client-go's add_get_done.
awk 'NR == FNR { theirs[$1] = $2; next }
     { peer = $1; sub(/^add_get_done_(arc_str|from_thread)\//, "add_get_done/", peer)
       sub(/^single_thread_arc_str\//, "single_thread/", peer)
       t = (peer in theirs) ? theirs[peer] : 0
       printf "| %s | %.0f | %s | %s |\n", $1, $2, (t ? sprintf("%.0f", t) : "-"), (t ? sprintf("%.2f", $2 / t) : "-") }' \
  "$work/client-go.tsv" "$work/ours.tsv"
