#!/usr/bin/env bash
# The end-to-end reconcile benchmark (docs/benchmarks-e2e.md): how fast database-operator
# brings N Databases, created before it starts, to "children exist and status is current"
# (converged) and then to idle (none of its writes seen for QUIET seconds: all its work done),
# on a real control plane, next to its peers and the bare writer, under the same client
# limits, log level and runtime threads (hack/bench/tools.sh), uncompressed responses for all
# (hack/bench/plane.sh), RUNS interleaved runs each.
#
# usage: hack/bench/e2e.sh
#
#   N=2000            parents per run (Databases, or Foos for sample-controller)
#   WORKERS=2         concurrent reconciles of every implementation
#   SWEEP="1 2 4 8 16"  worker counts for database-operator alone ("" skips the sweep)
#   QPS=500 BURST=1000  client-side limits passed to every implementation
#   NAMESPACES=4      the parents are spread over this many fresh namespaces per run
#   PEERS="database-operator-image sample-controller controller-runtime kube-runtime bare-writer bare-writer-events"
#                     database-operator-image is the binary the image ships (hack/image.sh: static,
#                     glibc crt-static, debug info stripped), run as a process like the others;
#                     database-operator-fifo is the operator with --priority-queue=false (one FIFO)
#   PLANE=bench       the control plane this script starts and stops
#   OUT=target/bench/e2e   results.tsv, results.md, and each run's log
#   SVG=docs/reconcile-throughput.svg   ("" draws no plot)
#   OPERATOR=target/release/database-operator
#                     the operator binary measured (another build's, to compare two builds in
#                     one sitting; the default is built from this tree, any other path is
#                     measured as it is, and its `crd` is what the plane gets)
#   OPERATOR_IMAGE=   the binary measured as database-operator-image (default: hack/image.sh
#                     builds the image, and its target/image/context/database-operator is
#                     measured; a path given here is measured as it is, hack/image.sh unrun)
#   TOOLS_PROFILE=release  the cargo profile of the probe, the bare writer and the kube-runtime
#                     peer (hack/bench/tools.sh): dev only proves the harness (hack/test.sh)
#   RUNS=3            runs per implementation at WORKERS, interleaved (every implementation
#                     once, then again), so that a slow stretch of the machine falls on all;
#                     the table gives each one's median and range
#   QUIET=10          after convergence, seconds without a write of the implementation's that
#                     make it idle (the probe's --quiet-secs; below sample-controller's 30 s
#                     resync, which writes again); "" stops the clock at convergence
#   REPEAT=0          measure database-operator at WORKERS this many more times at the end
#   UNRELATED=0       also seed this many Deployments of nobody's (0 replicas, in a namespace of
#                     their own) before each measurement: the rest of a cluster, which an
#                     operator's memory should not grow with
#   CPU_LIMIT=        run every implementation under this CPU limit, as a pod's
#                     resources.limits.cpu would (25m, 100m, 500m: a CFS quota on a cgroup of
#                     its own, hack/bench/cpu-limit.sh; needs root); the plane is not limited
#
# It builds what is missing (the control plane, the operator, the probe and the bare writer,
# the peers, the image; docs/benchmarks-e2e.md, "Builds and profiles"), then for every run
# starts a fresh control plane PLANE (so every run starts from the same state: an empty etcd,
# no leftover garbage collection or pods), seeds N parents, measures, and stops the plane (also
# on failure). It prints the table, writes the plot, and keeps each run's log and the
# apiserver's request counts in OUT/logs. It exits non-zero when any run failed (after the
# table of the others), so a broken harness is a red test command.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" e2e

N=${N:-2000}
WORKERS=${WORKERS:-2}
SWEEP=${SWEEP-1 2 4 8 16}
QPS=${QPS:-500}
BURST=${BURST:-1000}
NAMESPACES=${NAMESPACES:-4}
PEERS=${PEERS-database-operator-image sample-controller controller-runtime kube-runtime bare-writer bare-writer-events}
export PLANE=${PLANE:-bench}
# Every Database has a Service: the plane's Service range must hold N ClusterIPs (a /24 holds
# 253); hack/control-plane.sh's default /16 does.
export SERVICE_CIDR=${SERVICE_CIDR:-10.0.0.0/16}
# The kwok nodes hold 110 pods each, as in every round so far (docs/benchmarks-e2e.md): the
# criterion does not need pods, and the same background load keeps the rounds comparable.
export KWOK_NODE_PODS=${KWOK_NODE_PODS:-110}
OUT=${OUT:-target/bench/e2e}
SVG=${SVG-docs/reconcile-throughput.svg}
RUNS=${RUNS:-3}
QUIET=${QUIET-10}
REPEAT=${REPEAT:-0}
OPERATOR=${OPERATOR:-target/release/database-operator}
OPERATOR_IMAGE=${OPERATOR_IMAGE:-}


mkdir -p "$OUT/logs"
results=$OUT/results.tsv

stop_plane_on_exit
if [ -n "${CPU_LIMIT:-}" ]; then
  log "every implementation runs under a CPU limit of $CPU_LIMIT (the plane does not)"
fi

# shellcheck source=hack/bench/tools.sh
. hack/bench/tools.sh
log "building: control plane (cached in ~/.cache), operator, probe, bare writer ($TOOLS_PROFILE profile), peers"
hack/control-plane/build.sh >/dev/null
build_tools "$OPERATOR" e2e-probe bare-writer
hack/bench/build-peers.sh
if [[ " $PEERS " == *" database-operator-image "* ]]; then
  if [ -z "$OPERATOR_IMAGE" ]; then
    hack/image.sh >/dev/null
    OPERATOR_IMAGE=target/image/context/database-operator
  fi
  [ -x "$OPERATOR_IMAGE" ] || die "OPERATOR_IMAGE=$OPERATOR_IMAGE: no such executable"
fi
log "built: operator $OPERATOR${OPERATOR_IMAGE:+ and $OPERATOR_IMAGE}; $TOOLS_PROFILE profile: $probe, $bare_writer, $kube_runtime_peer"

printf 'label\timplementation\tworkers\tn\tseconds\tper_second\tcpu_seconds\trss_mib\tload\tapiserver_cpu_seconds\tetcd_cpu_seconds\tkcm_cpu_seconds\tcpu_limit\tunrelated\tidle_seconds\tconverged_cpu_seconds\twrites\twrites_after_convergence\tcommand\n' >"$results"
# shellcheck source=hack/bench/plane.sh
. hack/bench/plane.sh

run=0
failed=()
# measure LABEL IMPLEMENTATION KIND WORKERS COMMAND...: one measurement from a clean state.
measure() {
  local label=$1 impl=$2 kind=$3 workers=$4
  shift 4
  run=$((run + 1))
  local namespaces=() i
  for ((i = 0; i < NAMESPACES; i++)); do namespaces+=("e2e-$run-$i"); done
  local ns_list
  ns_list=$(IFS=,; echo "${namespaces[*]}")
  log "[$label] starting a fresh control plane $PLANE"
  plane_up
  log "[$label] seeding $N ${kind}s in ${namespaces[*]}"
  "$probe" seed --kind "$kind" --n "$N" --namespaces "$ns_list"
  if [ "${UNRELATED:-0}" -gt 0 ]; then
    log "[$label] seeding $UNRELATED unrelated Deployments in e2e-$run-unrelated"
    "$probe" seed --kind unrelated-deployment --n "$UNRELATED" --namespaces "e2e-$run-unrelated"
  fi
  local load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  log "[$label] measuring (load average $load): $*"
  local line limited=()
  if [ -n "${CPU_LIMIT:-}" ]; then
    limited=(hack/bench/cpu-limit.sh "$CPU_LIMIT" "$label")
  fi
  local quiet=()
  [ -z "$QUIET" ] || quiet=(--quiet-secs "$QUIET")
  if line=$("$probe" run --kind "$kind" --n "$N" --namespaces "$ns_list" --log "$OUT/logs/$label.log" "${also[@]}" "${quiet[@]}" --requests "$OUT/logs/$label.requests.tsv" -- "${limited[@]}" "$@"); then
    log "[$label] $line"
    python3 - "$label" "$impl" "$workers" "$load" "${CPU_LIMIT:-}" "${UNRELATED:-0}" "$*" "$line" >>"$results" <<'PY'
import json, sys
label, impl, workers, load, cpu_limit, unrelated, command, line = sys.argv[1:]
r = json.loads(line)
plane = [r.get(f"{c}_cpu_seconds") for c in ("kube-apiserver", "etcd", "kube-controller-manager")]
idle = [r.get(k, "") for k in ("idle_seconds", "converged_cpu_seconds", "writes", "writes_after_convergence")]
print("\t".join(map(str, [label, impl, workers, r["n"], r["seconds"], r["per_second"], r["cpu_seconds"], r["rss_mib"], load] + plane + [cpu_limit, unrelated] + idle + [command])))
PY
  else
    log "[$label] FAILED (log: $OUT/logs/$label.log); going on with the others"
    failed+=("$label")
  fi
  [ -z "${CPU_LIMIT:-}" ] || hack/bench/cpu-limit.sh --remove "$label"
  hack/control-plane.sh down >/dev/null 2>&1
}

# ours LABEL WORKERS: database-operator with WORKERS workers.
ours() {
  implementation_command database-operator "$2" "$KUBECONFIG" "$OPERATOR"
  measure "$1" database-operator database "$2" "${command[@]}"
}

# The comparison at WORKERS first, RUNS rounds of every implementation, then the sweep (its
# WORKERS point is not measured again).
for ((round = 1; round <= RUNS; round++)); do
  suffix=
  [ "$RUNS" -eq 1 ] || suffix=-r$round
  ours "database-operator$suffix" "$WORKERS"
  for peer in $PEERS; do
    case $peer in
      database-operator-image) implementation_command database-operator "$WORKERS" "$KUBECONFIG" "$OPERATOR_IMAGE" ;;
      database-operator-fifo) implementation_command "$peer" "$WORKERS" "$KUBECONFIG" "$OPERATOR" ;;
      *) implementation_command "$peer" "$WORKERS" "$KUBECONFIG" ;;
    esac
    kind=database
    [ "$peer" != sample-controller ] || kind=foo
    measure "$peer$suffix" "$peer" "$kind" "$WORKERS" "${command[@]}"
  done
done
for workers in $SWEEP; do
  [ "$workers" = "$WORKERS" ] && continue
  ours "database-operator-w$workers" "$workers"
done

for ((i = 1; i <= REPEAT; i++)); do
  ours "database-operator-again$i" "$WORKERS"
done

log "results ($results)"
python3 hack/bench/report.py "$results" --workers "$WORKERS" --svg "$SVG" | tee "$OUT/results.md"
# A run that failed is a failed benchmark: the table above has a hole where its row would be.
[ ${#failed[@]} -eq 0 ] || die "these runs failed: ${failed[*]} (logs in $OUT/logs)"
log "done${SVG:+; the plot is $SVG}"
