#!/usr/bin/env bash
# The rollout benchmark (docs/benchmarks.md, "Rollout storm"): N Databases converged, then the
# implementation is restarted as a new version that changes every Deployment's pod template
# (the benchmark-only switch DATABASE_OPERATOR_BENCH_ROLLOUT, honoured by database-operator and
# the controller-runtime peer). While the fleet rolls, ARRIVALS new Databases are created, one
# every INTERVAL_MS: a user who creates a Database during an operator upgrade. It reports the
# time to roll the fleet and each arrival's latency from create to converged (p50, p99, max).
#
# usage: hack/bench/rollout.sh
#
#   N=2000            Databases in the fleet
#   ARRIVALS=40       Databases created during the rollout
#   INTERVAL_MS=1000  between two arrivals
#   WORKERS=2 QPS=500 BURST=1000   as hack/bench/e2e.sh
#   IMPLS="priority fifo controller-runtime"
#                     priority: database-operator (its default); fifo: database-operator with
#                     --priority-queue=false (client-go's one FIFO); controller-runtime: the peer
#                     (its priority queue is on by default since v0.23)
#   PLANE=bench OUT=target/bench/rollout
#   TOOLS_PROFILE=release   as hack/bench/e2e.sh (hack/bench/tools.sh)
#   TIMEOUT=1800      seconds each phase may take before the probe gives up (a stopped rollout
#                     still logs the latencies of the arrivals that converged)
#
# Each implementation gets a fresh plane: seed, converge (measured as hack/bench/e2e.sh does);
# a plain restart with everything converged (how long until it has looked at every Database and
# its CPU stays idle for 3 s, and what it wrote to the Databases, their children and Events:
# nothing is expected); then the restart with the switch and the arrivals. results.tsv holds
# the three rows.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" rollout

N=${N:-2000}
ARRIVALS=${ARRIVALS:-40}
INTERVAL_MS=${INTERVAL_MS:-1000}
WORKERS=${WORKERS:-2}
QPS=${QPS:-500}
BURST=${BURST:-1000}
IMPLS=${IMPLS-priority fifo controller-runtime}
export PLANE=${PLANE:-bench}
export SERVICE_CIDR=${SERVICE_CIDR:-10.0.0.0/16}
# Room for every pod (the control plane's default, 10,000 per kwok node): a Database is settled
# only once Ready, and pods left Pending would keep most of the fleet unsettled, Degraded after
# the Deployments' progress deadline, and never quiet.
export KWOK_NODE_PODS=${KWOK_NODE_PODS:-10000}
OUT=${OUT:-target/bench/rollout}
TIMEOUT=${TIMEOUT:-1800}


mkdir -p "$OUT/logs"
results=$OUT/results.tsv
stop_plane_on_exit

# shellcheck source=hack/bench/tools.sh
. hack/bench/tools.sh
log "building: control plane (cached in ~/.cache), operator, probe, peers"
hack/control-plane/build.sh >/dev/null
build_tools target/release/database-operator e2e-probe
hack/bench/build-peers.sh
# shellcheck source=hack/bench/plane.sh
. hack/bench/plane.sh

printf 'implementation\tphase\tn\tseconds\tper_second\tcpu_seconds\trss_mib\tarrivals\tarrival_p50_s\tarrival_p99_s\tarrival_max_s\tbusy_seconds\twrites\n' >"$results"
failed=()


# record IMPL PHASE LINE [REQUESTS]: one row of results.tsv from the probe's JSON line; with
# the apiserver's request counts, the writes to Databases, Deployments, Services and Events
# (not their status written by the plane's controllers, which an idle fleet does not cause).
record() {
  python3 - "$@" >>"$results" <<'PY'
import json, sys
impl, phase, line = sys.argv[1:4]
r = json.loads(line)
keys = ["n", "seconds", "per_second", "cpu_seconds", "rss_mib", "arrivals", "arrival_p50_s", "arrival_p99_s", "arrival_max_s", "busy_seconds"]
writes = ""
if len(sys.argv) > 4:
    writes = 0
    for row in open(sys.argv[4]):
        count, verb, what = row.rstrip("\n").split("\t")
        ours = what in ("example.com/databases", "example.com/databases/status", "apps/deployments", "services",
                        "events", "events.k8s.io/events")
        if ours and verb in ("POST", "PUT", "PATCH", "APPLY", "DELETE"):
            writes += float(count)
    writes = int(writes)
print("\t".join([impl, phase] + [str(r.get(k, "")) for k in keys] + [str(writes)]))
PY
}

for impl in $IMPLS; do
  case $impl in
    priority) implementation_command database-operator "$WORKERS" "$KUBECONFIG" ;;
    fifo) implementation_command database-operator-fifo "$WORKERS" "$KUBECONFIG" ;;
    *) implementation_command "$impl" "$WORKERS" "$KUBECONFIG" ;;
  esac
  namespaces=fleet-0,fleet-1,fleet-2,fleet-3
  probe_run=("$probe" run --kind database --n "$N" --namespaces "$namespaces" --timeout "$TIMEOUT")
  log "[$impl] fresh control plane; seeding $N Databases"
  plane_up
  "$probe" seed --kind database --n "$N" --namespaces "$namespaces"
  log "[$impl] converging the fleet: ${command[*]}"
  # Until idle: the status updates that follow convergence (Ready) are written before the stop.
  if ! line=$("${probe_run[@]}" --log "$OUT/logs/$impl-converge.log" --idle-secs 10 -- "${command[@]}"); then
    failed+=("$impl"); log "[$impl] FAILED to converge (log: $OUT/logs/$impl-converge.log)"; continue
  fi
  log "[$impl] converged: $line"
  record "$impl" converge "$line"
  log "[$impl] restarting with everything converged"
  if ! line=$("${probe_run[@]}" --log "$OUT/logs/$impl-restart.log" --idle-secs 3 \
      --requests "$OUT/logs/$impl-restart.requests.tsv" -- "${command[@]}"); then
    failed+=("$impl"); log "[$impl] FAILED to restart (log: $OUT/logs/$impl-restart.log)"; continue
  fi
  log "[$impl] restarted: $line"
  record "$impl" restart "$line" "$OUT/logs/$impl-restart.requests.tsv"
  log "[$impl] restarting as a new version; $ARRIVALS arrivals, one every ${INTERVAL_MS}ms"
  if ! line=$(DATABASE_OPERATOR_BENCH_ROLLOUT="v2" "${probe_run[@]}" --log "$OUT/logs/$impl-rollout.log" \
      --rollout v2 --arrivals "$ARRIVALS" --arrival-interval-ms "$INTERVAL_MS" -- "${command[@]}"); then
    failed+=("$impl"); log "[$impl] FAILED to roll (log: $OUT/logs/$impl-rollout.log)"; continue
  fi
  log "[$impl] rolled: $line"
  record "$impl" rollout "$line"
done
hack/control-plane.sh down >/dev/null 2>&1 || true

log "results ($results)"
column -t -s $'\t' "$results" | tee "$OUT/results.txt"
[ ${#failed[@]} -eq 0 ] || die "these runs failed: ${failed[*]} (logs in $OUT/logs)"
