#!/usr/bin/env bash
# What the watch path and the reconciles cost per Database, counted rather than timed: for each
# operator binary given, a fresh namespace, the operator as a process (plain-HTTP metrics)
# watching it, N generic Databases (kwok nodes) created at once, and, once all are Ready and
# the reconcile count has not moved for QUIET seconds (idle), its own counters divided by N:
# watch events by resource and type, bytes received by resource, reconciles, queue adds and
# API requests by method and code. Counts do not depend on the machine's speed the way times
# do, so two builds compare in a few minutes; docs/benchmarks.md quotes them.
#
# usage: KUBECONFIG=... hack/bench/counts.sh [BINARY...]   (a plane with kwok nodes and the CRDs)
#
#   N=200 QUIET=10
#   BINARY defaults to target/release/database-operator; give two builds' binaries to
#   compare them (run them interleaved: A B A B)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" counts

N=${N:-200}
QUIET=${QUIET:-10}
[ -n "${KUBECONFIG:-}" ] || die "set KUBECONFIG to a running plane's (eval \"\$(hack/control-plane.sh env)\")"
[ $# -gt 0 ] || set -- target/release/database-operator
for bin in "$@"; do [ -x "$bin" ] || die "$bin: build it first (cargo build --release)"; done

# A sum of the samples of one series (every label set that starts with SELECTOR) in a scrape.
sum() { awk -v s="$2" 'index($0, s) == 1 { t += $NF } END { print t + 0 }' "$1"; }

# count BINARY: prints the per-Database table of one run.
count() {
  local bin=$1 ns="counts-$$-$RANDOM" port operator scrape last=-1 now ready
  port=$(python3 hack/free-port.py)
  scrape=$(mktemp)
  kubectl create namespace "$ns" >/dev/null
  # Its pods to the kwok nodes (the apiserver's PodNodeSelector admission), not a real node.
  kubectl annotate namespace "$ns" scheduler.alpha.kubernetes.io/node-selector=type=kwok >/dev/null
  "$bin" run --namespace "$ns" --metrics-bind-address "127.0.0.1:$port" --metrics-secure=false \
    --health-probe-bind-address 0 --log-level error >/dev/null 2>&1 &
  operator=$!
  sleep 2
  for ((i = 0; i < N; i++)); do
    printf 'apiVersion: example.com/v1\nkind: Database\nmetadata: {name: db-%d}\nspec: {size: small, image: "postgres:17"}\n---\n' "$i"
  done | kubectl apply -n "$ns" -f - >/dev/null
  while :; do
    sleep "$QUIET"
    curl -fsS "http://127.0.0.1:$port/metrics" >"$scrape" || die "$bin stopped serving its metrics"
    ready=$(kubectl get databases -n "$ns" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Ready$' || true)
    now=$(sum "$scrape" 'controller_runtime_reconcile_total{controller="database"')
    log "$bin: $ready of $N Ready, $now reconciles"
    [ "$ready" -eq "$N" ] && [ "$now" = "$last" ] && break
    last=$now
  done
  kill "$operator"
  wait "$operator" 2>/dev/null || true
  kubectl delete namespace "$ns" --wait=false >/dev/null
  python3 - "$scrape" "$N" "$bin" <<'EOF'
import re, sys
path, n, binary = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kept = ("informer_events_total", "informer_received_bytes_total", "controller_runtime_reconcile_total",
        "workqueue_adds_total", "rest_client_requests_total")
rows = []
for line in open(path):
    m = re.match(r'(\w+)(\{[^}]*\})? (\S+)$', line.strip())
    if not m or m.group(1) not in kept or float(m.group(3)) == 0:
        continue
    labels = re.sub(r',?host="[^"]*"', "", m.group(2) or "").replace("{,", "{")
    rows.append((m.group(1) + labels, float(m.group(3))))
print(f"\n{binary}, N = {n}: per Database")
for series, value in sorted(rows):
    print(f"  {series:<95} {value / n:>9.2f}")
EOF
  rm -f "$scrape"
}

log "N=$N Databases per run; builds: $*"
for bin in "$@"; do
  count "$bin"
done
