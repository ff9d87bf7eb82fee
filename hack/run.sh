#!/usr/bin/env bash
# The README's run command: the operator against a cluster, with a sample Database.
#
# With KUBECONFIG set, or --kubeconfig among the arguments, it uses that cluster (and
# --context, if given); kubectl and the operator get the same ones. Without, it starts a local
# control plane (hack/control-plane.sh, plane "dev") and leaves it running after the operator
# exits; stop it with `PLANE=dev hack/control-plane.sh down`.
#
# usage: hack/run.sh [operator flags...]     e.g. hack/run.sh --workers 4
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[run] %s\n' "$*" >&2; }

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

if [ -z "$kubeconfig" ]; then
  export PLANE=${PLANE:-dev}
  log "no cluster given: starting local control plane '$PLANE' (the first build takes a while)"
  hack/control-plane.sh up >/dev/null
  eval "$(hack/control-plane.sh env)"
  kubeconfig=$KUBECONFIG
fi
export KUBECONFIG=$kubeconfig
kubectl=(kubectl ${context:+--context "$context"})

log "building the operator"
cargo build --bin database-operator
log "installing the CRD and the sample Database (manifests/samples/example.com_v1_database_postgres.yaml)"
"${kubectl[@]}" apply --server-side -k manifests/crd/
"${kubectl[@]}" wait --for=condition=Established crd/databases.example.com --timeout=60s >/dev/null
"${kubectl[@]}" apply --server-side -f manifests/samples/example.com_v1_database_postgres.yaml
log "running the operator; in another shell: export KUBECONFIG=$KUBECONFIG; kubectl get db -w"
# Local: plain-HTTP metrics on loopback (no ServiceAccount tokens to authenticate scrapes with).
exec target/debug/database-operator run --metrics-bind-address 127.0.0.1:8080 --metrics-secure=false \
  --health-probe-bind-address 127.0.0.1:8081 "$@"
