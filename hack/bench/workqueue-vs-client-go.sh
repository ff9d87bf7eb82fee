#!/usr/bin/env bash
# Runs the work queue micro-benchmarks on our queue (benches/workqueue.rs, criterion) and on
# client-go's (benches/peers/client-go-workqueue, go test -bench), one after the other, and prints
# one table: scenario, ours keys/s, client-go keys/s and the ratio, then client-go's keys/s and the
# ratio again with GOMAXPROCS=1 (its goroutines on one thread: the like-for-like peer of our
# current-thread rows). Both do the same work: see the doc comments at the top of the two
# benchmark files.
#
#   hack/bench/workqueue-vs-client-go.sh            # every scenario, ~2.5 s per point per side
#   QUICK=1 hack/bench/workqueue-vs-client-go.sh    # ~0.5 s per point, for a smoke test
#   FILTER=current_thread GO_FILTER=AddGetDone hack/bench/workqueue-vs-client-go.sh
#                                                   # the operator's configuration and its peer
#
# FILTER is criterion's filter (a regex on our benchmark ids), GO_FILTER go's -bench pattern; both
# default to every benchmark.
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

filter=${FILTER:-}
go_filter=${GO_FILTER:-.}
ours_cmd=(cargo bench --bench workqueue -- "${criterion_args[@]}" ${filter:+"$filter"})
echo "ours (load $(load)): ${ours_cmd[*]}"
(cd "$root" && "${ours_cmd[@]}") >"$work/ours.txt" 2>"$work/ours.err" || { cat "$work/ours.err" >&2; exit 1; }

go_cmd=("$work/client-go-workqueue.test" -test.run '^$' -test.bench "$go_filter" -test.benchtime "$go_benchtime")
go_shown="go test -run '^\$' -bench '$go_filter' -benchtime $go_benchtime"
echo "client-go (load $(load)): (cd benches/peers/client-go-workqueue && $go_shown)"
(cd "$peer" && "${go_cmd[@]}") >"$work/client-go.txt"
echo "client-go, one thread (load $(load)): (cd benches/peers/client-go-workqueue && GOMAXPROCS=1 $go_shown)"
(cd "$peer" && GOMAXPROCS=1 "${go_cmd[@]}") >"$work/client-go-1.txt"
echo "done (load $(load))"
echo

# Ours: the table benches/support prints, `| add_get_done/workers=1/keys=100 | time | keys/s | ...`.
awk -F'|' '$2 ~ /^ (add_get_done|current_thread|single_thread|rate_limited)/ { gsub(/ /, "", $2); gsub(/ /, "", $4); print $2, $4 }' \
  "$work/ours.txt" >"$work/ours.tsv"
# client-go: `BenchmarkAddGetDone/workers=1/keys=100-2  N  T ns/op  R keys/s` (no `-2` suffix
# with GOMAXPROCS=1).
for side in client-go client-go-1; do
  awk '$1 ~ /^Benchmark/ {
         name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
         sub(/^AddGetDone/, "add_get_done", name); sub(/^RateLimited/, "rate_limited", name)
         sub(/^SingleThread/, "single_thread", name)
         for (i = 2; i < NF; i++) if ($(i + 1) == "keys/s") print name, $i
       }' "$work/$side.txt" >"$work/$side.tsv"
done

printf '| scenario | ours keys/s | client-go keys/s | ours / client-go | client-go 1 thread keys/s | ours / client-go 1 thread |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
# Our variants (Arc<str> keys, a thread as producer, one current-thread runtime) are compared with
# client-go's add_get_done.
awk 'FILENAME == ARGV[1] { theirs[$1] = $2; next }
     FILENAME == ARGV[2] { one[$1] = $2; next }
     { peer = $1; sub(/^(add_get_done_(arc_str|from_thread)|current_thread)\//, "add_get_done/", peer)
       sub(/^single_thread_arc_str\//, "single_thread/", peer)
       t = (peer in theirs) ? theirs[peer] : 0
       o = (peer in one) ? one[peer] : 0
       printf "| %s | %.0f | %s | %s | %s | %s |\n", $1, $2,
         (t ? sprintf("%.0f", t) : "-"), (t ? sprintf("%.2f", $2 / t) : "-"),
         (o ? sprintf("%.0f", o) : "-"), (o ? sprintf("%.2f", $2 / o) : "-") }' \
  "$work/client-go.tsv" "$work/client-go-1.tsv" "$work/ours.tsv"
