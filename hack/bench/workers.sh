#!/usr/bin/env bash
# The worker sweep over a network (docs/benchmarks.md, "Workers and latency"): on loopback one
# worker already saturates the apiserver, so the sweep says nothing about a real cluster, where
# every request costs a round trip. Here the implementations reach the apiserver through
# hack/bench/delay-proxy.rs, which delays every byte by RTT/2 each way, under a pod's CPU limit
# (the manifests' 500m, hack/bench/cpu-limit.sh), and the worker count is swept.
#
# usage: hack/bench/workers.sh
#
#   N=300                 Databases per run
#   RTTS="0 5 20 50"      round trips added, in milliseconds
#   WORKER_COUNTS="1 2 4 8 16 32"
#   IMPLS="database-operator kube-runtime"
#   CPU_LIMIT=500m        "" runs unlimited
#   QPS=500 BURST=1000    as hack/bench/e2e.sh
#   TOOLS_PROFILE=release     as hack/bench/e2e.sh (hack/bench/tools.sh)
#   PLANE=bench OUT=target/bench/workers SVG=docs/workers-latency.svg ("" draws no plot)
#
# Every run gets a fresh plane (as hack/bench/e2e.sh). results.tsv, results.md (a table per
# implementation: workers down, round trips across) and the plot.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" workers

N=${N:-300}
RTTS=${RTTS:-0 5 20 50}
WORKER_COUNTS=${WORKER_COUNTS:-1 2 4 8 16 32}
IMPLS=${IMPLS:-database-operator kube-runtime}
CPU_LIMIT=${CPU_LIMIT-500m}
QPS=${QPS:-500}
BURST=${BURST:-1000}
export PLANE=${PLANE:-bench}
export SERVICE_CIDR=${SERVICE_CIDR:-10.0.0.0/16}
export KWOK_NODE_PODS=${KWOK_NODE_PODS:-110}
OUT=${OUT:-target/bench/workers}
SVG=${SVG-docs/workers-latency.svg}

mkdir -p "$OUT/logs"
results=$OUT/results.tsv
proxy_pid=
stop_plane_on_exit
on_exit '[ -z "$proxy_pid" ] || kill "$proxy_pid" 2>/dev/null'

# shellcheck source=hack/bench/tools.sh
. hack/bench/tools.sh
log "building: control plane (cached in ~/.cache), operator, probe, proxy, peers"
hack/control-plane/build.sh >/dev/null
build_tools target/release/database-operator e2e-probe delay-proxy
hack/bench/build-peers.sh
# shellcheck source=hack/bench/plane.sh
. hack/bench/plane.sh

printf 'implementation\trtt_ms\tworkers\tn\tseconds\tper_second\tcpu_seconds\trss_mib\tcpu_limit\n' >"$results"
failed=()
run=0
for rtt in $RTTS; do
  for impl in $IMPLS; do
    for workers in $WORKER_COUNTS; do
      run=$((run + 1))
      label=$impl-rtt$rtt-w$workers
      plane_up
      # The implementation's kubeconfig points at the proxy, which forwards to the apiserver.
      server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
      upstream=${server#https://}
      "$delay_proxy" --upstream "$upstream" --rtt-ms "$rtt" >"$OUT/logs/proxy.out" 2>"$OUT/logs/$label.proxy.log" &
      proxy_pid=$!
      for _ in $(seq 50); do grep -q listening "$OUT/logs/proxy.out" && break; sleep 0.1; done
      proxied=$(sed -n 's/^listening on //p' "$OUT/logs/proxy.out")
      [ -n "$proxied" ] || die "the delay proxy did not start"
      sed "s#$server#https://$proxied#" "$KUBECONFIG" >"$OUT/kubeconfig"
      ns_list=w$run-0,w$run-1
      "$probe" seed --kind database --n "$N" --namespaces "$ns_list"
      implementation_command "$impl" "$workers" "$OUT/kubeconfig"
      limited=()
      [ -z "$CPU_LIMIT" ] || limited=(hack/bench/cpu-limit.sh "$CPU_LIMIT" "$label")
      log "[$label] measuring"
      if line=$("$probe" run --kind database --n "$N" --namespaces "$ns_list" --log "$OUT/logs/$label.log" -- "${limited[@]}" "${command[@]}"); then
        log "[$label] $line"
        python3 -c 'import json,sys; r=json.loads(sys.argv[4]); print("\t".join(map(str,[sys.argv[1],sys.argv[2],sys.argv[3],r["n"],r["seconds"],r["per_second"],r["cpu_seconds"],r["rss_mib"],sys.argv[5]])))' \
          "$impl" "$rtt" "$workers" "$line" "$CPU_LIMIT" >>"$results"
      else
        log "[$label] FAILED (log: $OUT/logs/$label.log)"; failed+=("$label")
      fi
      [ -z "$CPU_LIMIT" ] || hack/bench/cpu-limit.sh --remove "$label"
      kill "$proxy_pid" 2>/dev/null || true
      wait "$proxy_pid" 2>/dev/null || true
      proxy_pid=
      hack/control-plane.sh down >/dev/null 2>&1
    done
  done
done

python3 hack/bench/workers_report.py "$results" --svg "$SVG" | tee "$OUT/results.md"
[ ${#failed[@]} -eq 0 ] || die "these runs failed: ${failed[*]} (logs in $OUT/logs)"
