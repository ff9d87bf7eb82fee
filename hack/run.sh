#!/usr/bin/env bash
# The README's run command: the operator against a cluster, with a sample Database (postgres)
# that answers a query.
#
# With KUBECONFIG set, or --kubeconfig among the arguments, it uses that cluster (and
# --context, if given); kubectl and the operator get the same ones. Without, it starts a local
# control plane (hack/control-plane.sh, plane "dev") with a real node where this machine
# allows one (Linux, as root), so the sample's postgres really runs: it builds the postgres
# image from Debian's packages (hack/engine-images.sh) and imports it into the node. Elsewhere
# it falls back to kwok nodes, which only pretend to run pods, and says so. The plane keeps
# running after the operator exits; stop it with `PLANE=dev hack/control-plane.sh down`.
#
# The operator runs in the foreground (Ctrl-C stops it); once the sample is Ready, a
# `select 1` in it shows that postgres answers, and the command for a psql session is printed.
#
# usage: hack/run.sh [operator flags...]     e.g. hack/run.sh --workers 4
#
#   NODES   the local plane's nodes: real (the default where the machine allows) or kwok
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" run

# The cluster the operator is pointed at, so that kubectl talks to the same one. A flag given
# twice takes its last value, as the operator's own parsing does.
kubeconfig=${KUBECONFIG:-}
context=
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --kubeconfig=*) kubeconfig=${args[i]#*=} ;;
    --kubeconfig) kubeconfig=${args[i + 1]:-} ;;
    --context=*) context=${args[i]#*=} ;;
    --context) context=${args[i + 1]:-} ;;
  esac
done

sample=manifests/samples/example.com_v1_database_postgres.yaml
if [ -z "$kubeconfig" ]; then
  export PLANE=${PLANE:-dev}
  if [ -z "${NODES:-}" ]; then
    if [ "$(uname -s)" = Linux ] && [ "$(id -u)" = 0 ]; then
      NODES=real
    else
      NODES=kwok
      log "a real node needs Linux and root: this plane gets kwok nodes, which schedule pods and report them"
      log "Running and Ready without running them (the sample will say Ready; no postgres will answer)"
    fi
  fi
  export NODES
  log "no cluster given: starting local control plane '$PLANE' with $NODES nodes (the first build takes a while)"
  hack/control-plane.sh up >/dev/null
  eval "$(hack/control-plane.sh env)"
  kubeconfig=$KUBECONFIG
  if [ -n "${CONTAINERD_ADDRESS:-}" ]; then
    image=$(awk '$1 == "image:" { print $2 }' "$sample")
    log "building $image from Debian's packages (once) and importing it into the real node"
    hack/engine-images.sh import "$CONTAINERD_ADDRESS" >/dev/null
  fi
fi
export KUBECONFIG=$kubeconfig
kubectl=(kubectl ${context:+--context "$context"})

log "building the operator"
cargo build --bin database-operator
log "installing the CRD and the sample Database ($sample)"
"${kubectl[@]}" apply --server-side -k manifests/crd/
"${kubectl[@]}" wait --for=condition=Established crd/databases.example.com --timeout=60s >/dev/null
"${kubectl[@]}" apply --server-side -f "$sample"
# Once the sample is Ready, ask its server for an answer: on a node that runs containers,
# postgres says 1; on kwok nothing runs, and the answer says that instead. The check runs
# beside the operator, which this shell becomes (so that signals and the exit status are the
# operator's own), and gives up when the operator is gone.
operator=$$
(
  for _ in $(seq 150); do
    kill -0 "$operator" 2>/dev/null || exit 0
    "${kubectl[@]}" wait --for=condition=Ready db/orders --timeout=2s >/dev/null 2>&1 && break
  done
  if answer=$("${kubectl[@]}" exec deploy/orders -c database -- psql -U app -d app -tAc 'select 1' 2>&1); then
    log "the sample 'orders' is Ready and its postgres answers 'select 1' with: $answer"
    log "a psql session in it: kubectl exec -it deploy/orders -c database -- psql -U app app"
  else
    log "the sample 'orders' did not answer 'select 1' (a node that runs no containers?): $answer"
  fi
) &
log "running the operator; in another shell: export KUBECONFIG=$KUBECONFIG; kubectl get db -w"
# Local: plain-HTTP metrics on loopback (no ServiceAccount tokens to authenticate scrapes with).
exec target/debug/database-operator run --metrics-bind-address 127.0.0.1:8080 --metrics-secure=false \
  --health-probe-bind-address 127.0.0.1:8081 "$@"
