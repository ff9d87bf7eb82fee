#!/usr/bin/env bash
# Reconciles under a flood of /metrics scrapes with made-up tokens: does authenticating them
# take from the reconciles? For RUNS interleaved pairs (quiet, then flooded), a fresh
# namespace, the operator as a process (secure metrics, its own review client) watching it,
# N generic Databases (kwok nodes) created at once, and the seconds until all are Ready; the
# flood is FLOOD concurrent curl loops, each scraping with a new made-up token (which misses
# the review cache) for the whole run. Prints one line per run, then the medians.
# docs/benchmarks.md quotes them.
#
# usage: KUBECONFIG=... hack/bench/metrics-flood.sh   (a plane with kwok nodes and the CRDs)
#
#   N=100 RUNS=3 FLOOD=16
#   BIN=target/debug/database-operator   the operator binary
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" metrics-flood

N=${N:-100}
RUNS=${RUNS:-3}
FLOOD=${FLOOD:-16}
BIN=${BIN:-target/debug/database-operator}
[ -n "${KUBECONFIG:-}" ] || die "set KUBECONFIG to a running plane's (eval \"\$(hack/control-plane.sh env)\")"
[ -x "$BIN" ] || die "$BIN: build it first (cargo build)"
port=$(python3 hack/free-port.py)

# run LABEL FLOODED: prints "LABEL seconds scrapes refused served".
run() {
  local label=$1 flooded=$2 ns="flood-$$-$1" operator flooders=() start ready=0 i
  kubectl create namespace "$ns" >/dev/null
  # Its pods to the kwok nodes (the apiserver's PodNodeSelector admission), not a real node.
  kubectl annotate namespace "$ns" scheduler.alpha.kubernetes.io/node-selector=type=kwok >/dev/null
  "$BIN" run --namespace "$ns" --metrics-bind-address "127.0.0.1:$port" --health-probe-bind-address 0 \
    >/dev/null 2>&1 &
  operator=$!
  sleep 2
  local tally
  tally=$(mktemp -d)
  if [ "$flooded" = 1 ]; then
    for ((i = 0; i < FLOOD; i++)); do
      (
        n=0
        while :; do
          n=$((n + 1))
          curl -sk -o /dev/null -w '%{http_code}\n' --max-time 20 \
            -H "Authorization: Bearer made-up-$i-$n-$RANDOM" "https://127.0.0.1:$port/metrics" >>"$tally/$i"
        done
      ) &
      flooders+=($!)
    done
  fi
  start=$(date +%s.%N)
  for ((i = 0; i < N; i++)); do
    printf 'apiVersion: example.com/v1\nkind: Database\nmetadata: {name: db-%d}\nspec: {size: small, image: "postgres:17"}\n---\n' "$i"
  done | kubectl apply -n "$ns" -f - >/dev/null
  while [ "$ready" -lt "$N" ]; do
    sleep 0.5
    ready=$(kubectl get databases -n "$ns" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Ready$' || true)
  done
  local seconds
  seconds=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  if [ "${#flooders[@]}" -gt 0 ]; then
    kill "${flooders[@]}" 2>/dev/null
    wait "${flooders[@]}" 2>/dev/null || true
  fi
  kill "$operator"
  wait "$operator" 2>/dev/null || true
  local answers scrapes refused served
  answers=$(cat "$tally"/* 2>/dev/null || true)
  scrapes=$(grep -c . <<<"$answers" || true)
  refused=$(grep -c '^401$' <<<"$answers" || true)
  served=$(grep -c '^200$' <<<"$answers" || true)
  rm -rf "$tally"
  kubectl delete namespace "$ns" --wait=false >/dev/null
  echo "$label $seconds $scrapes $refused $served"
}

log "N=$N Databases, $RUNS interleaved pairs, a flood of $FLOOD loops ($BIN)"
results=$(mktemp)
for ((r = 1; r <= RUNS; r++)); do
  run "quiet-$r" 0 | tee -a "$results"
  run "flooded-$r" 1 | tee -a "$results"
done
python3 - "$results" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for kind in ("quiet", "flooded"):
    runs = [r for r in rows if r[0].startswith(kind)]
    secs = sorted(float(r[1]) for r in runs)
    scrapes = sum(int(r[2]) for r in runs)
    refused = sum(int(r[3]) for r in runs)
    served = sum(int(r[4]) for r in runs)
    print(f"{kind}: median {statistics.median(secs):.1f} s to {len(runs) and 'all Ready'} "
          f"(range {secs[0]:.1f}-{secs[-1]:.1f}); scrapes {scrapes}, refused 401 {refused}, served {served}")
EOF
rm -f "$results"
