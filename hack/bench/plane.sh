# Sourced by the benchmark scripts (hack/bench/e2e.sh, hack/bench/rollout.sh,
# hack/bench/scale.sh): a fresh control plane per measurement. Expects PLANE, OUT and peers set,
# and die defined; the Database CRD is the one OPERATOR prints (the binary measured, by default
# target/release/database-operator).

plane_dir=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/planes/$PLANE
export KUBECONFIG=$plane_dir/kubeconfig

# plane_up: a fresh control plane with the Database CRD, and sample-controller's when the peers
# are built (hack/bench/scale.sh builds them only for PEERS). Every run gets its own, so none
# inherits the previous run's etcd history, caches, garbage collection or pods. Sets `also`:
# the probe's arguments that report the plane's CPU during the measurement.
plane_up() {
  hack/control-plane.sh down >/dev/null 2>&1 || true
  hack/control-plane.sh up >"$OUT/control-plane.log" 2>&1 || { cat "$OUT/control-plane.log" >&2; die "the control plane did not start"; }
  eval "$(hack/control-plane.sh env)"
  # Every implementation is sent uncompressed responses: client-go asks for gzip unless the
  # kubeconfig says disable-compression; kube-client without its gzip feature (the operator,
  # the kube-runtime peer, the bare writer, the probe) never asks.
  kubectl config set "clusters.$(kubectl config view -o jsonpath='{.clusters[0].name}').disable-compression" true >/dev/null
  local crds=(crd/databases.example.com)
  "${OPERATOR:-target/release/database-operator}" crd | kubectl apply -f - >/dev/null
  if [ -f "$peers/sample-controller-crd.yaml" ]; then
    kubectl apply -f "$peers/sample-controller-crd.yaml" >/dev/null
    crds+=(crd/foos.samplecontroller.k8s.io)
  fi
  kubectl wait --for=condition=Established "${crds[@]}" --timeout=60s >/dev/null
  # The control plane's CPU during each measurement shows where the time goes.
  also=()
  for component in kube-apiserver etcd kube-controller-manager; do
    also+=(--also "$component=$(cat "$plane_dir/$component.pid")")
  done
}
