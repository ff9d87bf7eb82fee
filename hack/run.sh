#!/usr/bin/env bash
# The README's run command: the operator against a cluster, with a sample Database.
#
# With KUBECONFIG set (or --kubeconfig among the arguments), it uses that cluster. Without,
# it starts a local control plane (hack/control-plane.sh, plane "dev") and leaves it running
# after the operator exits; stop it with `PLANE=dev hack/control-plane.sh down`.
#
# usage: hack/run.sh [operator flags...]     e.g. hack/run.sh --workers 4
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[run] %s\n' "$*" >&2; }

if [ -z "${KUBECONFIG:-}" ] && [[ " $* " != *" --kubeconfig"* ]]; then
  export PLANE=${PLANE:-dev}
  log "no cluster given: starting local control plane '$PLANE' (the first build takes a while)"
  hack/control-plane.sh up >/dev/null
  eval "$(hack/control-plane.sh env)"
fi
log "building the operator"
cargo build --bin database-operator
log "installing the CRD and the sample Database (manifests/samples/example.com_v1_database_small.yaml)"
kubectl apply -k manifests/crd/
kubectl wait --for=condition=Established crd/databases.example.com --timeout=60s >/dev/null
kubectl apply -f manifests/samples/example.com_v1_database_small.yaml
log "running the operator; in another shell: export KUBECONFIG=$KUBECONFIG; kubectl get db -w"
exec target/debug/database-operator run --metrics-bind-address 127.0.0.1:8080 --health-probe-bind-address 127.0.0.1:8081 "$@"
