#!/usr/bin/env bash
# The fault suite (docs/reliability.md): the operator binary against a real control plane of its
# own while the faults operators meet in production happen to it, one scenario after another.
# Each scenario says what is promised, checks it, and prints the figure measured; every wait
# is bounded. About five minutes; the README test command (hack/test.sh) runs it at the end.
#
# usage: hack/faults.sh
#
#   N=200          Databases converging while the apiserver is restarted
#   FREEZE=60      seconds the apiserver is frozen (SIGSTOP)
#   QUIET=60       seconds of the quiet minute
#   PLANE=faults   the control plane this script starts and stops
#   OUT=target/faults   results.md (the table of docs/reliability.md) and the logs
#   BIN=...        the operator binary (default: target/release/database-operator, built here;
#                  hack/test.sh passes the image's binary, target/image/context/database-operator)
#
# Every figure is read from the operator's own /metrics, never from its log: writes are its
# POST, PUT, PATCH and DELETE requests by resource (rest_client_writes_total, retries
# included), reconciles controller_runtime_reconcile_total, the backlog workqueue_depth. Every
# wait is for a condition (converged, a count reached, a queue empty), bounded by TIMEOUT;
# the fixed times are the faults' own (how long the apiserver is frozen) and the windows in
# which nothing may be written.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" faults

N=${N:-200}
FREEZE=${FREEZE:-60}
QUIET=${QUIET:-60}
export PLANE=${PLANE:-faults}
OUT=${OUT:-target/faults}
TIMEOUT=${TIMEOUT:-300}


mkdir -p "$OUT/logs"
results=$OUT/results.md
: >"$results"
row() { printf '| %s | %s | %s | %s |\n' "$@" | tee -a "$results" >&2; }

operators=()
cleanup() {
  for pid in "${operators[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -9 "$pid" 2>/dev/null || true; done
  hack/control-plane.sh down >/dev/null 2>&1 || true
}
on_exit cleanup

log "building the control plane (cached), the operator and the seeding probe"
hack/control-plane/build.sh >/dev/null
bin=${BIN:-target/release/database-operator}
[ -n "${BIN:-}" ] || cargo build --release -q --bin database-operator
# The probe only creates objects here: a debug build is enough (and shares the tests' build).
cargo build -q --example e2e-probe
probe=target/debug/examples/e2e-probe

hack/control-plane.sh down >/dev/null 2>&1 || true
hack/control-plane.sh up >"$OUT/logs/control-plane.log" 2>&1 || die "the control plane did not start"
eval "$(hack/control-plane.sh env)"
plane_dir=$(dirname "$KUBECONFIG")
"$bin" crd | kubectl apply -f - >/dev/null
kubectl wait --for=condition=Established crd/databases.example.com --timeout=60s >/dev/null

# start_operator NAME METRICS_PORT: the binary as a user runs it, plain-HTTP metrics on
# loopback; its pid in OP.
start_operator() {
  "$bin" --kubeconfig "$KUBECONFIG" --workers 4 --metrics-bind-address "127.0.0.1:$2" --metrics-secure=false \
    --health-probe-bind-address 0 >>"$OUT/logs/$1.log" 2>&1 &
  OP=$!
  operators+=("$OP")
}

# scrape PORT [RESOURCES]: "WRITES RECONCILES DEPTH" from the operator's /metrics: its writes
# (to the resources matching the regular expression RESOURCES, default all), the Database
# controller's reconciles, and the keys waiting in its queue.
scrape() {
  curl -fsS "http://127.0.0.1:$1/metrics" | python3 -c '
import re, sys
only = re.compile(sys.argv[1])
writes = reconciles = depth = 0.0
for line in sys.stdin:
    if line.startswith("rest_client_writes_total{"):
        resource = re.search(r"resource=\"([^\"]*)\"", line).group(1)
        if only.fullmatch(resource):
            writes += float(line.rsplit(" ", 1)[1])
    elif line.startswith("controller_runtime_reconcile_total{") and "controller=\"database\"" in line:
        reconciles += float(line.rsplit(" ", 1)[1])
    elif line.startswith("workqueue_depth{") and "name=\"database\"" in line:
        depth += float(line.rsplit(" ", 1)[1])
print(int(writes), int(reconciles), int(depth))' "${2:-.*}"
}

# writes_by_resource PORT: what the operator on PORT wrote, by method and resource (a failure's
# evidence).
writes_by_resource() {
  curl -fsS "http://127.0.0.1:$1/metrics" | sed -n 's/^rest_client_writes_total{\(.*\)} \(.*\)/  \2 \1/p' | sort -rn >&2 || true
}

# CHILDREN: the resources of a Database's children.
CHILDREN='deployments\.apps|services'

# check: every Database has observed its generation and has exactly one Deployment and one
# Service, named after it and controlled by it; no child is controlled by a Database that does
# not exist. Prints what is wrong, or nothing.
check() {
  kubectl get databases,deployments,services -A -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
dbs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items if o["kind"] == "Database"}
uids = {o["metadata"]["uid"]: k for k, o in dbs.items()}
children = {}
problems = []
for o in items:
    if o["kind"] == "Database":
        continue
    owner = [r for r in o["metadata"].get("ownerReferences", []) if r.get("controller") and r["kind"] == "Database"]
    if not owner:
        continue
    if owner[0]["uid"] not in uids:
        if not o["metadata"].get("deletionTimestamp"):
            meta = o["metadata"]
            problems.append("orphan %s %s/%s" % (o["kind"], meta["namespace"], meta["name"]))
        continue
    children.setdefault((owner[0]["uid"], o["kind"]), []).append(o["metadata"]["name"])
for key, db in dbs.items():
    uid = db["metadata"]["uid"]
    for kind in ("Deployment", "Service"):
        names = children.get((uid, kind), [])
        if names != [key[1]]:
            problems.append(f"{key[0]}/{key[1]}: {kind}s {names}")
    status = db.get("status") or {}
    if status.get("observedGeneration") != db["metadata"]["generation"]:
        problems.append("%s/%s: generation %s not observed" % (key[0], key[1], db["metadata"]["generation"]))
print("\n".join(problems[:5] + ([f"... {len(problems)} problems"] if len(problems) > 5 else [])))'
}

# wait_converged WHAT: until check finds nothing; prints the seconds it took.
wait_converged() {
  local t0 problems
  t0=$(date +%s.%N)
  while true; do
    problems=$(check 2>&1 || true)
    [ -z "$problems" ] && break
    if (($(date +%s) - ${t0%.*} > TIMEOUT)); then
      printf '%s\n' "$problems" >&2
      die "$1: not converged after ${TIMEOUT}s"
    fi
    sleep 0.5
  done
  python3 -c "import time; print(f'{time.time() - $t0:.1f}')"
}

# wait_idle PORT WHAT: until the operator on PORT has no key waiting in its queue.
wait_idle() {
  local t0 depth
  t0=$(date +%s)
  until read -r _ _ depth < <(scrape "$1") && [ "$depth" -eq 0 ]; do
    (($(date +%s) - t0 < TIMEOUT)) || die "$2: the queue still holds $depth keys after ${TIMEOUT}s"
    sleep 0.2
  done
}

seed() { # NAMESPACE COUNT
  "$probe" seed --kind database --n "$2" --namespaces "$1" >/dev/null
}

alive() { kill -0 "$1" 2>/dev/null || die "the operator (pid $1) is gone; its log: $OUT/logs"; }

printf '| scenario | promise | result | figure |\n|---|---|---|---|\n' | tee -a "$results" >&2

# 1. The apiserver killed and restarted three times while N Databases converge.
log "1: $N Databases; the apiserver is killed (SIGKILL) and restarted three times while they converge"
seed faults-1 "$N"
start_operator operator-1 18091; op=$OP
t0=$(date +%s)
for i in 1 2 3; do
  sleep 3
  hack/control-plane.sh restart kube-apiserver >>"$OUT/logs/control-plane.log" 2>&1
  log "1: apiserver restarted ($i/3)"
done
seconds=$(wait_converged "1")
alive "$op"
row "apiserver killed and restarted 3 times during the convergence of $N Databases" \
  "everything converges, the operator is not restarted" pass \
  "converged ${seconds}s after the third restart ($(($(date +%s) - t0))s from the operator's start)"

# 2. The apiserver frozen, then thawed; then new Databases.
log "2: the apiserver is frozen (SIGSTOP) for ${FREEZE}s, then thawed; 20 new Databases"
api_pid=$(cat "$plane_dir/kube-apiserver.pid")
kill -STOP "$api_pid"
sleep "$FREEZE"
kill -CONT "$api_pid"
t0=$(date +%s.%N)
seed faults-2 20
seconds=$(wait_converged "2")
alive "$op"
row "apiserver frozen ${FREEZE}s (SIGSTOP, SIGCONT), then 20 new Databases" \
  "the operator resumes on its own and converges" pass "converged ${seconds}s after the new Databases were created"

# 3. A forced etcd compaction under the watching operator, then an apiserver restart so every
# watch must resume from a resourceVersion that is gone (410) and relist.
log "3: etcd compacted to its current revision, apiserver restarted (watches resume into 410 Gone); 20 new Databases"
etcd_url=$(tr '\0' '\n' <"$plane_dir/etcd.args" | grep -A1 -- '--advertise-client-urls' | tail -n 1)
revision=$(curl -fsS -X POST "$etcd_url/v3/kv/range" -d '{"key":"AA=="}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
curl -fsS -X POST "$etcd_url/v3/kv/compaction" -d "{\"revision\":\"$revision\",\"physical\":true}" >/dev/null
hack/control-plane.sh restart kube-apiserver >>"$OUT/logs/control-plane.log" 2>&1
relists_before=$(curl -fsS http://127.0.0.1:18091/metrics | awk '/^informer_relists_total/ {s += $2} END {print s + 0}')
t0=$(date +%s.%N)
seed faults-3 20
seconds=$(wait_converged "3")
alive "$op"
relists=$(curl -fsS http://127.0.0.1:18091/metrics | awk '/^informer_relists_total/ {s += $2} END {print s + 0}')
row "etcd compacted at revision $revision, then the apiserver restarted" "watches that cannot resume relist; new Databases converge" \
  pass "converged ${seconds}s after the new Databases; informer relists ${relists} in total (${relists_before} before the new Databases)"

# 4. The operator frozen while Databases are deleted and created and the apiserver restarts.
log "4: the operator frozen; 20 Databases deleted, 20 created, the apiserver restarted; then the operator resumed"
kill -STOP "$op"
deleted_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kubectl delete databases --all -n faults-2 --wait=false >/dev/null
seed faults-4 20
hack/control-plane.sh restart kube-apiserver >>"$OUT/logs/control-plane.log" 2>&1
# Every Deployment and Service that appears in faults-2 from now on, with its creation time.
kubectl get deployments,services -n faults-2 --watch-only -o jsonpath='{.kind} {.metadata.name} {.metadata.creationTimestamp}{"\n"}' \
  >"$OUT/logs/faults-2-children.txt" 2>/dev/null &
watcher=$!
sleep 1
kill -CONT "$op"
t0=$(date +%s.%N)
seconds=$(wait_converged "4")
alive "$op"
kill "$watcher" 2>/dev/null || true
created=$(awk -v since="$deleted_at" '$3 >= since' "$OUT/logs/faults-2-children.txt" | sort -u)
[ -z "$created" ] || die "4: children created for Databases that were gone: $created"
row "operator frozen (SIGSTOP) while 20 Databases are deleted, 20 created and the apiserver restarts" \
  "no child for a Database that is gone; the new ones converge" pass "converged ${seconds}s after SIGCONT"

# 5. Fifty image changes to one Database within a second or so.
log "5: fifty image changes to one Database, eight at a time"
read -r writes0 _ < <(scrape 18091 'deployments\.apps')
read -r status0 _ < <(scrape 18091 'databases\.example\.com/status')
seq 1 50 | xargs -P 8 -I{} kubectl patch database -n faults-1 db-00000 --type merge -p '{"spec":{"image":"nginx:1.{}"}}' >/dev/null
t0=$(date +%s.%N)
seconds=$(wait_converged "5")
want=$(kubectl get database -n faults-1 db-00000 -o jsonpath='{.spec.image}')
got=$(kubectl get deployment -n faults-1 db-00000 -o jsonpath='{.spec.template.spec.containers[0].image}')
[ "$want" = "$got" ] || die "5: the Deployment runs $got, the Database asks for $want"
read -r writes1 _ < <(scrape 18091 'deployments\.apps')
read -r status1 _ < <(scrape 18091 'databases\.example\.com/status')
row "50 image changes to one Database (8 concurrent kubectl patch)" "the final state is the last spec; writes stay bounded" \
  pass "the Deployment runs $got; $((writes1 - writes0)) Deployment and $((status1 - status0)) status writes for 50 changes; converged ${seconds}s after the last"

# 6. SIGKILL at random moments, ten times, while Databases come and go.
log "6: the operator killed with SIGKILL at random moments, ten times, while Databases are created and deleted"
kill -TERM "$op"; wait "$op" || true
for i in $(seq 1 10); do
  start_operator "operator-6-$i" 18091; op=$OP
  seed "faults-6-$i" 5 &
  seeding=$!
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.3, 3.0), 2))')"
  kubectl delete database -n "faults-6-$((i > 1 ? i - 1 : 1))" db-00000 --wait=false >/dev/null 2>&1 || true
  kill -9 "$op"; wait "$op" 2>/dev/null || true
  wait "$seeding"
done
start_operator operator-6 18091; op=$OP
t0=$(date +%s.%N)
seconds=$(wait_converged "6")
row "operator killed (SIGKILL) at 10 random moments while 50 Databases are created and 10 deleted" \
  "no duplicate or orphaned child; everything converges" pass "converged ${seconds}s after the last start"

# 7. Two operators without leader election on the same Databases.
log "7: a second operator without leader election beside the first"
start_operator operator-7 18092; op2=$OP
seed faults-7 20
seconds=$(wait_converged "7")
# Converged is not quiet: a status follows its pods, and on this plane pods may become Ready
# (or not Ready) in a wave long after their Database converged (kwok's nodes marked NotReady
# while the apiserver was frozen, say); with two operators each such change is written by
# both. What tells an apply war from that: a war never stops, and writes the same objects
# again and again. So: 30-second windows until one in which neither operator writes
# (bounded), and no object written more than 10 times by the two together until then.
read -r a0 _ < <(scrape 18091)
read -r b0 _ < <(scrape 18092)
read -r ca0 _ < <(scrape 18091 "$CHILDREN")
read -r cb0 _ < <(scrape 18092 "$CHILDREN")
t0=$(date +%s)
while true; do
  read -r pa _ < <(scrape 18091)
  read -r pb _ < <(scrape 18092)
  sleep 30
  read -r qa _ < <(scrape 18091)
  read -r qb _ < <(scrape 18092)
  [ $((qa - pa + qb - pb)) -eq 0 ] && break
  if (($(date +%s) - t0 > TIMEOUT)); then
    writes_by_resource 18091
    writes_by_resource 18092
    die "7: still $((qa - pa)) and $((qb - pb)) writes in 30 s, ${TIMEOUT}s after converging: an apply war"
  fi
done
# An apply war rewrites the children; the status following its pods does not. The two
# operators agree on every child, so after converging they write children at most while one
# catches up with a write of the other: no more than one per Database of this scenario.
read -r ca1 _ < <(scrape 18091 "$CHILDREN")
read -r cb1 _ < <(scrape 18092 "$CHILDREN")
children=$((ca1 - ca0 + cb1 - cb0))
if [ "$children" -gt 20 ]; then
  writes_by_resource 18091
  writes_by_resource 18092
  die "7: $children writes of Deployments and Services by the two operators after converging: an apply war"
fi
kill -TERM "$op2"; wait "$op2" || true
row "two operators without leader election on the same Databases" \
  "both converge to the same objects; the writes stop, no object is written again and again (no apply war)" \
  pass "converged ${seconds}s; then $((qa - a0)) and $((qb - b0)) writes ($children of children) until 30 s in which neither wrote"

# 8. A namespace deleted while its Databases are being reconciled.
log "8: a namespace deleted while its 50 new Databases are being reconciled"
seed faults-8 50
kubectl delete namespace faults-8 --wait=false >/dev/null
t0=$(date +%s.%N)
until ! kubectl get namespace faults-8 >/dev/null 2>&1; do
  (($(date +%s) - ${t0%.*} < TIMEOUT)) || die "8: namespace faults-8 still there after ${TIMEOUT}s"
  sleep 0.5
done
gone=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
alive "$op"
wait_idle 18091 "8"
read -r w0 r0 _ < <(scrape 18091)
sleep 10
read -r w1 r1 _ < <(scrape 18091)
# A retry queued while the namespace was terminating may still come due and find nothing to
# do (a reconcile, no write); more than one per Database would be a loop.
[ $((w1 - w0)) -eq 0 ] && [ $((r1 - r0)) -le 50 ] || die "8: $((w1 - w0)) writes and $((r1 - r0)) reconciles in the 10 s after the namespace was gone"
seconds=$(wait_converged "8")
row "a namespace deleted while its 50 Databases reconcile" "no crash, no hot loop; the namespace goes; the rest stays converged" \
  pass "the namespace was gone ${gone}s after the delete; then 0 writes and $((r1 - r0)) reconciles in 10 s"

# 9. What only the cluster can refuse: a LimitRange and a ResourceQuota that forbid the
# database pod. The ReplicaSet cannot create it; the Database must say so in their words.
log "9: a LimitRange and a ResourceQuota that forbid the database pod"
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: faults-9-limits}
---
apiVersion: v1
kind: LimitRange
metadata: {name: tiny, namespace: faults-9-limits}
spec:
  limits:
  - type: Container
    max: {cpu: 100m}
---
apiVersion: v1
kind: Namespace
metadata: {name: faults-9-quota}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: no-pods, namespace: faults-9-quota}
spec:
  hard: {pods: "0"}
YAML
t0=$(date +%s.%N)
until [ -n "$(kubectl get resourcequota -n faults-9-quota no-pods -o jsonpath='{.status.hard.pods}')" ]; do
  (($(date +%s) - ${t0%.*} < TIMEOUT)) || die "9: the quota controller did not count faults-9-quota in ${TIMEOUT}s"
  sleep 0.2
done
t0=$(date +%s.%N)
for ns in faults-9-limits faults-9-quota; do
  printf 'apiVersion: example.com/v1\nkind: Database\nmetadata: {name: orders, namespace: %s}\nspec: {size: small, image: "postgres:17"}\n' "$ns" |
    kubectl apply -f - >/dev/null
done
# degraded NAMESPACE: "REASON: MESSAGE" of the Database's Degraded=True condition, if any.
degraded() {
  kubectl get database -n "$1" orders -o jsonpath='{range .status.conditions[?(@.type=="Degraded")]}{.status} {.reason}: {.message}{end}' |
    sed -n 's/^True //p'
}
for ns in faults-9-limits faults-9-quota; do
  until [ -n "$(degraded "$ns")" ]; do
    (($(date +%s) - ${t0%.*} < TIMEOUT)) || die "9: the Database in $ns is not Degraded after ${TIMEOUT}s"
    sleep 0.5
  done
done
seconds=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
limits=$(degraded faults-9-limits) quota=$(degraded faults-9-quota)
log "9: the Database in faults-9-limits says \"$limits\""
log "9: the Database in faults-9-quota says \"$quota\""
[[ $limits == *"maximum cpu usage per Container is 100m"* ]] || die "9: the LimitRange's words are missing"
[[ $quota == *"exceeded quota: no-pods"* ]] || die "9: the quota's words are missing"
for ns in faults-9-limits faults-9-quota; do
  warnings=$(kubectl get events -n "$ns" --field-selector type=Warning,involvedObject.kind=Database -o jsonpath='{.items[*].message}')
  [[ $warnings == *forbidden* ]] || die "9: no Warning event with the refusal for the Database in $ns: $warnings"
done
read -r w0 r0 _ < <(scrape 18091)
sleep 10
read -r w1 r1 _ < <(scrape 18091)
[ $((w1 - w0)) -eq 0 ] || die "9: $((w1 - w0)) writes in the 10 s after both Databases reported the refusal"
row "a LimitRange and a ResourceQuota that forbid the database pod" \
  "the Database says so in their own words (Degraded, a Warning event); no hot loop" \
  pass "both reported ${seconds}s after creation; then 0 writes and $((r1 - r0)) reconciles in 10 s"

# 10. The quiet minute, and a restart with everything converged.
log "10: a quiet ${QUIET}s, then a restart with everything converged"
total=$(kubectl get databases -A --no-headers | wc -l)
read -r w0 r0 _ < <(scrape 18091)
sleep "$QUIET"
read -r w1 r1 _ < <(scrape 18091)
[ $((w1 - w0)) -eq 0 ] || die "10: $((w1 - w0)) writes in a quiet ${QUIET}s"
kill -TERM "$op"; wait "$op" || true
start_operator operator-8 18091; op=$OP
t0=$(date +%s.%N)
until curl -fsS http://127.0.0.1:18091/metrics >/dev/null 2>&1; do
  (($(date +%s) - ${t0%.*} < TIMEOUT)) || die "10: the restarted operator serves no /metrics after ${TIMEOUT}s"
  sleep 0.2
done
# Until it has reconciled every Database and its queue is empty.
until read -r w2 r2 d2 < <(scrape 18091) && [ "$r2" -ge "$total" ] && [ "$d2" -eq 0 ]; do
  (($(date +%s) - ${t0%.*} < TIMEOUT)) || die "10: the restarted operator reconciled $r2 of $total Databases in ${TIMEOUT}s"
  sleep 0.2
done
seconds=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
[ "$w2" -eq 0 ] || { writes_by_resource 18091; die "10: the restarted operator wrote $w2 times"; }
row "a quiet ${QUIET}s after convergence ($total Databases), then a restart" "zero writes; a bounded number of reconciles" \
  pass "0 writes and $((r1 - r0)) reconciles in ${QUIET}s; after the restart $r2 reconciles (every Database) in ${seconds}s and 0 writes"
kill -TERM "$op"; wait "$op" || true

log "all scenarios passed; the table is $results"
