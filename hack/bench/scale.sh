#!/usr/bin/env bash
# The scale ladder (docs/benchmarks.md, "Scale ladder"): how time, CPU and memory grow with the
# number of Databases, and what a relist costs in memory. For each N of LADDER,
# database-operator on a fresh plane; at PEER_N also the peers, each on a fresh plane.
#
# usage: hack/bench/scale.sh
#
#   LADDER="1000 5000 10000 20000"   the Database counts
#   PEERS="kube-runtime controller-runtime"  PEER_N=10000   the peers, at one N
#   PACE=""                         Databases per second: with a pace, none is seeded; the N
#                                   Databases are created one at a time at this pace while the
#                                   implementation runs (the fixed-pace ladder: how CPU per
#                                   Database grows with N alone, not with the plane's speed at N;
#                                   a pace the plane and the implementation keep at every N of
#                                   the ladder, which the arrivals' p99 latency tells)
#   WORKERS=2 QPS=500 BURST=1000    as hack/bench/e2e.sh
#   OPERATOR=target/release/database-operator   the operator binary measured (as in e2e.sh: to
#                                   compare two builds in one sitting; any other path is
#                                   measured as it is, unbuilt)
#   TOOLS_PROFILE=release           the probe's and the kube-runtime peer's cargo profile
#                                   (hack/bench/tools.sh: dev only proves the harness)
#   PLANE=bench OUT=target/bench/scale SVG=docs/scale.svg ("" draws no plot)
#
# Each run, on a fresh plane with room for every pod (a Database is settled only once its pod
# is Ready; pods left Pending make the Deployments miss their progress deadline and the fleet
# never goes quiet):
#   1. converge: N Databases seeded, the implementation started (with PACE: the implementation
#      started, the N Databases created at that pace from then on); time until every one has
#      converged, then kept running until its CPU is idle (10 s) so the Ready status updates
#      are written: the time it last moved (idle_s), and its CPU-s and peak RSS until then
#      (the probe, as hack/bench/e2e.sh measures);
#   2. restart: started again with everything converged; the time until its CPU has been idle
#      for 3 s (its initial sync: the lists, and a look at every key), its peak RSS then, and
#      its RSS once idle: the steady state;
#   3. relist: etcd compacted to its current revision and the apiserver restarted, so every
#      watch resumes from a resourceVersion that is gone and lists again (hack/faults.sh,
#      scenario 3); the peak RSS from then until its CPU is idle for 5 s (VmHWM, reset through
#      /proc/PID/clear_refs just before), against the steady state; idle counts only once a
#      Database watch is open again (a client waiting out its backoff is idle too). Ours counts
#      its relists (informer_relists_total, scraped); for the peers, the apiserver's count of
#      Database lists and watches since its restart tells a relist from a resumed watch.
# results.tsv holds one row per run; the report (hack/bench/scale_report.py) the table and plot.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" scale

LADDER=${LADDER:-1000 5000 10000 20000}
PEERS=${PEERS-kube-runtime controller-runtime}
PEER_N=${PEER_N:-10000}
PACE=${PACE:-}
WORKERS=${WORKERS:-2}
QPS=${QPS:-500}
BURST=${BURST:-1000}
OPERATOR=${OPERATOR:-target/release/database-operator}
export PLANE=${PLANE:-bench}
export SERVICE_CIDR=${SERVICE_CIDR:-10.0.0.0/16}
export KWOK_NODE_PODS=${KWOK_NODE_PODS:-10000}
OUT=${OUT:-target/bench/scale}
SVG=${SVG-docs/scale.svg}
if [ -n "$PACE" ]; then
  # The probe creates one Database per interval, in whole milliseconds.
  interval_ms=$(awk -v p="$PACE" 'BEGIN {if (p + 0 > 0 && p <= 1000) printf "%d", 1000 / p}')
  [ -n "$interval_ms" ] || die "PACE=$PACE: a number of Databases per second, above 0 and at most 1000"
fi

mkdir -p "$OUT/logs"
results=$OUT/results.tsv
stop_plane_on_exit

# shellcheck source=hack/bench/tools.sh
. hack/bench/tools.sh
log "building: control plane (cached in ~/.cache), operator, probe ($TOOLS_PROFILE profile)${PEERS:+, peers}"
hack/control-plane/build.sh >/dev/null
build_tools "$OPERATOR" e2e-probe
[ -z "$PEERS" ] || hack/bench/build-peers.sh
log "built: operator $OPERATOR; $TOOLS_PROFILE profile: $probe${PEERS:+, $kube_runtime_peer}"
# shellcheck source=hack/bench/plane.sh
. hack/bench/plane.sh

printf 'implementation\tn\tconverge_s\tconverge_cpu_s\tconverge_rss_mib\tsync_s\tsync_cpu_s\tsync_rss_mib\tsteady_rss_mib\trelist_s\trelist_rss_mib\tlists\twatches\trelists\tidle_s\tpace\tarrival_p99_s\n' >"$results"
failed=()

# command_of IMPL [METRICS_ADDRESS]: sets `command` to the implementation's command line (ours
# serves plain-HTTP metrics on METRICS_ADDRESS when given).
command_of() {
  implementation_command "$1" "$WORKERS" "$KUBECONFIG" "$OPERATOR"
  [ "$1" != database-operator ] || [ -z "${2:-}" ] || command+=(--metrics-bind-address "$2" --metrics-secure=false)
}

# cpu_ticks PID: utime + stime. status_mib PID FIELD: VmRSS or VmHWM in MiB.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
status_mib() { awk -v f="$2:" '$1 == f {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b - a) / 1000}'; }

# wait_idle PID IDLE_SECONDS TIMEOUT: waits until PID's CPU time has not moved for IDLE_SECONDS;
# prints the time it last moved (now_ms). Fails after TIMEOUT seconds or if PID exits.
wait_idle() {
  local pid=$1 idle_ms=$(($2 * 1000)) deadline=$(($(now_ms) + $3 * 1000)) ticks last moved
  last=$(cpu_ticks "$pid") moved=$(now_ms)
  while [ $(($(now_ms) - moved)) -lt "$idle_ms" ]; do
    sleep 0.25
    kill -0 "$pid" 2>/dev/null && [ "$(now_ms)" -lt "$deadline" ] || return 1
    ticks=$(cpu_ticks "$pid")
    if [ "$ticks" != "$last" ]; then last=$ticks moved=$(now_ms); fi
  done
  echo "$moved"
}

# database_requests: "LISTS WATCHES OPEN", the Database lists and watches the apiserver has
# finished since it started, and the watches open now. A watch that resumes is one watch; a
# relist is a list and a watch, or a second watch with a streaming list (ours; client-go's
# WatchListClient). The lines themselves go to the run's log.
database_requests() {
  kubectl get --raw /metrics | grep -E '^apiserver_(request_total|longrunning_requests)\{.*resource="databases"' |
    tee -a "$OUT/logs/$label-relist.requests" |
    awk '/^apiserver_request_total/ && /verb="LIST"/ {l += $NF} /^apiserver_request_total/ && /verb="WATCH"/ {w += $NF}
         /^apiserver_longrunning_requests/ && /verb="WATCH"/ {o += $NF} END {print l + 0, w + 0, o + 0}'
}

# relisted LABEL PID [METRICS_PORT]: waits (up to 5 minutes) until a Database watch is open
# again (a client in its backoff looks idle too) and, with ours' metrics port, until it has
# counted its relist; then until PID is idle for 5 s. Prints when it last moved.
relisted() {
  local lists watches open relists
  for _ in $(seq 1 300); do
    read -r lists watches open < <(database_requests 2>/dev/null || echo 0 0 0)
    relists=$([ -z "${3:-}" ] && echo 1 || relists_metric "$3" 2>/dev/null || echo 0)
    [ "$open" -ge 1 ] && [ "$relists" -ge 1 ] && break
    sleep 1
  done
  [ "$open" -ge 1 ] && [ "$relists" -ge 1 ] || { log "[$1] no relist 5 minutes after the restart"; return 1; }
  wait_idle "$2" 5 900
}

# relists_metric PORT: ours' informer_relists_total for Databases ("-" for the peers).
relists_metric() {
  curl -fsS "http://127.0.0.1:$1/metrics" | awk '/^informer_relists_total\{.*resource="databases\.example\.com"/ {s += $NF} END {print s + 0}'
}

# measure IMPL N: the three phases on a fresh plane; one row of results.tsv.
measure() {
  local impl=$1 n=$2 label="$1-$2" line
  command_of "$impl"
  local namespaces=scale-0,scale-1,scale-2,scale-3
  local load=(--n "$n")
  if [ -n "$PACE" ]; then
    log "[$label] fresh control plane; $n Databases to arrive at $PACE per second"
    plane_up
    load=(--n 0 --arrivals "$n" --arrival-interval-ms "$interval_ms")
  else
    log "[$label] fresh control plane; seeding $n Databases"
    plane_up
    "$probe" seed --kind database --n "$n" --namespaces "$namespaces"
  fi
  log "[$label] converging: ${command[*]}"
  line=$("$probe" run --kind database "${load[@]}" --namespaces "$namespaces" --log "$OUT/logs/$label-converge.log" \
    --idle-secs 10 --timeout 3600 -- "${command[@]}") || { log "[$label] FAILED to converge"; return 1; }
  log "[$label] converged: $line"

  log "[$label] restarting with everything converged"
  # Ours serves its metrics in this phase: its count of relists confirms the forced one.
  local metrics_port=""
  if [ "$impl" = database-operator ]; then
    metrics_port=$(hack/free-port.py)
    command_of "$impl" "127.0.0.1:$metrics_port"
  fi
  "${command[@]}" >"$OUT/logs/$label-restart.log" 2>&1 &
  local pid=$! t0 moved
  t0=$(now_ms)
  moved=$(wait_idle "$pid" 3 900) || { log "[$label] FAILED: not idle after a restart"; kill "$pid"; return 1; }
  local sync_s sync_cpu sync_rss steady
  sync_s=$(seconds_between "$t0" "$moved")
  sync_cpu=$(awk -v t="$(cpu_ticks "$pid")" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}')
  sync_rss=$(status_mib "$pid" VmHWM)
  steady=$(status_mib "$pid" VmRSS)
  log "[$label] restart: idle ${sync_s}s after the start, ${sync_cpu} CPU-s, peak ${sync_rss} MiB, steady ${steady} MiB"

  log "[$label] forcing a relist: etcd compacted, the apiserver restarted"
  local etcd_url revision t1
  etcd_url=$(tr '\0' '\n' <"$plane_dir/etcd.args" | grep -A1 -- '--advertise-client-urls' | tail -n 1)
  # The apiserver frozen first, so no bookmark can move a watch forward; then two writes to etcd
  # directly (a key outside the apiserver's prefix) put etcd two revisions past every
  # resourceVersion a client holds (a watch from R needs R + 1, which a compaction at R + 1
  # would keep), and the compaction at the newest removes them.
  kill -STOP "$(cat "$plane_dir/kube-apiserver.pid")"
  local key
  key=$(printf 'bench/relist' | base64)
  curl -fsS -X POST "$etcd_url/v3/kv/put" -d "{\"key\":\"$key\",\"value\":\"MQ==\"}" >/dev/null
  curl -fsS -X POST "$etcd_url/v3/kv/put" -d "{\"key\":\"$key\",\"value\":\"Mg==\"}" >/dev/null
  revision=$(curl -fsS -X POST "$etcd_url/v3/kv/range" -d '{"key":"AA=="}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
  curl -fsS -X POST "$etcd_url/v3/kv/compaction" -d "{\"revision\":\"$revision\",\"physical\":true}" >/dev/null
  echo 5 >"/proc/$pid/clear_refs" # VmHWM := VmRSS
  t1=$(now_ms)
  hack/control-plane.sh restart kube-apiserver >>"$OUT/control-plane.log" 2>&1
  moved=$(relisted "$label" "$pid" "$metrics_port") || { log "[$label] FAILED: no relist"; kill "$pid"; return 1; }
  local relist_s relist_rss lists watches open relists=-
  relist_s=$(seconds_between "$t1" "$moved")
  relist_rss=$(status_mib "$pid" VmHWM)
  read -r lists watches open < <(database_requests)
  [ -z "$metrics_port" ] || relists=$(relists_metric "$metrics_port")
  log "[$label] relist: idle ${relist_s}s after the restart, peak ${relist_rss} MiB; Database lists $lists, watches $watches finished and $open open; relists counted by the operator: $relists"
  kill -TERM "$pid"; wait "$pid" || true

  python3 - "$impl" "$n" "$line" "$sync_s" "$sync_cpu" "$sync_rss" "$steady" "$relist_s" "$relist_rss" "$lists" "$watches" "$relists" "${PACE:--}" >>"$results" <<'PY'
import json, sys
impl, n, line, *rest, pace = sys.argv[1:]
r = json.loads(line)
# busy_seconds: when its CPU last moved before the idle window, from its start; the arrivals'
# p99 from create to converged, with a pace.
p99 = r.get("arrival_p99_s")
print("\t".join([impl, n, str(r["seconds"]), str(r["cpu_seconds"]), str(r["rss_mib"])] + rest
                + [str(r["busy_seconds"]), pace, "-" if p99 is None else str(p99)]))
PY
}

for n in $LADDER; do
  measure database-operator "$n" || failed+=("database-operator-$n")
  if [ "$n" = "$PEER_N" ]; then
    for peer in $PEERS; do
      measure "$peer" "$n" || failed+=("$peer-$n")
    done
  fi
  hack/control-plane.sh down >/dev/null 2>&1 || true
done

log "results ($results)"
python3 hack/bench/scale_report.py "$results" ${SVG:+--svg "$SVG"} | tee "$OUT/results.md"
[ ${#failed[@]} -eq 0 ] || die "these runs failed: ${failed[*]} (logs in $OUT/logs)"
