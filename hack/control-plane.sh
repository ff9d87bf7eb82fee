#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for tests, benchmarks and local runs:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and nodes of two kinds: kwok
# (simulated nodes on which pods are scheduled and become Running and Ready without running),
# and a real node (containerd, the kubelet, kube-proxy, CoreDNS: hack/control-plane/node.sh)
# on which they really run. Built from the Go module proxy by hack/control-plane/build.sh.
#
# usage: hack/control-plane.sh up|down|status|env|restart COMPONENT|node ACTION NODE
#
#   restart COMPONENT  kills one component with SIGKILL and starts it again with the same
#                      arguments (the fault suite, hack/faults.sh, restarts the apiserver)
#   node freeze NODE   a real node stops answering: every process of it (kubelet,
#                      containerd, kube-proxy, CoreDNS, its pods) is frozen where it is
#   node thaw NODE     ... and goes on
#   node kill NODE     a real node loses its power: every process of it is killed (SIGKILL);
#                      its volumes keep what was written
#   node start NODE    a killed node starts again (containerd, then the kubelet restarts its
#                      pods) and is waited for until Ready
#   node partition NODE ADDRESS PORT
#                      the node drops what its pod at ADDRESS sends to TCP PORT elsewhere (a
#                      replica cut off from its primary, say); everything else still flows
#   node heal NODE ADDRESS PORT  ... and lets it through again
#
#   PLANE=NAME        run several planes side by side (default: default)
#   NODES             kwok (default), real, or kwok,real: which nodes the plane has. With both,
#                     pods go to the real node unless their namespace has the annotation
#                     scheduler.alpha.kubernetes.io/node-selector=type=kwok (the apiserver's
#                     PodNodeSelector admission; the end-to-end tests' namespaces have it unless
#                     a test needs its pods to run). A real node needs Linux, root, and Debian's
#                     containerd, runc, containernetworking-plugins, iptables and conntrack
#                     (installed with apt-get when missing)
#   REAL_NODES        how many real nodes (default 1): real-node, then real-node-1, ... With
#                     more than one, NODES=real (kwok's heartbeats, every 20 to 45 s, are too
#                     slow for what then runs): kube-controller-manager runs the node
#                     lifecycle and taint eviction controllers and notices a node that stops
#                     answering within about ten seconds (node.sh)
#   KUBE_VERSION      see hack/control-plane/build.sh (default v1.37.2)
#   KWOK_NODES        number of simulated nodes (default 3)
#   KWOK_NODE_PODS    pods each node holds (default 10000: room for every pod the tests and
#                     the benchmarks make; hack/bench/e2e.sh sets 110, a real node's default,
#                     to keep its rounds comparable)
#   SERVICE_CIDR      the Services' ClusterIP range (default 10.0.0.0/16: room for the
#                     thousands of Services of the end-to-end benchmark)
#   APISERVER_FEATURE_GATES  passed to kube-apiserver's --feature-gates (e.g. WatchList=false)
#
# Claims bind: a default StorageClass "standard", whose volumes kube-controller-manager's
# host-path provisioner creates on kwok-only planes (see add_storage_class), and the plane's
# own local-volume provisioner where there is a real node (node.sh). Jobs run (the job
# controller; kwok completes their pods, the real node runs them).
#
# Beside the default admission plugins (PodSecurity among them), the apiserver enforces
# OwnerReferencesPermissionEnforcement, as hardened clusters (OpenShift, among others) do: a
# child whose ownerReference blocks its owner's deletion needs `update` on the owner's
# finalizers, which every e2e run so proves the operator's RBAC grants.
#
# State (certificates, data, logs, pids, kubeconfig) lives in
# ${XDG_CACHE_HOME:-~/.cache}/database-operator/planes/$PLANE; `down` removes it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
plane=${PLANE:-default}
dir=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/planes/$plane
kubeconfig=$dir/kubeconfig
# What `up` started, in order (`down` stops them in reverse); written by `up`.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
[ -f "$dir/components" ] && mapfile -t components <"$dir/components"
# shellcheck source=control-plane/node.sh
. "$here/control-plane/node.sh"
start=$(date +%s)
log() { printf '[control-plane %s %3ss] %s\n' "$plane" "$(($(date +%s) - start))" "$*" >&2; }
die() { log "error: $*"; exit 1; }

pid_of() { cat "$dir/$1.pid" 2>/dev/null || true; }
running() { local pid; pid=$(pid_of "$1"); [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

# wait_for DESCRIPTION SECONDS COMPONENT COMMAND...: polls COMMAND until it succeeds; fails
# early, with the component's log tail, if the component died.
wait_for() {
  local what=$1 seconds=$2 component=$3
  shift 3
  local deadline=$(($(date +%s) + seconds))
  until "$@" >/dev/null 2>&1; do
    if ! running "$component"; then
      tail -n 30 "$dir/logs/$component.log" >&2 || true
      die "$component exited while waiting for $what (log: $dir/logs/$component.log)"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "timed out after ${seconds}s waiting for $what (log: $dir/logs/$component.log)"
    sleep 0.5
  done
}

launch() { # name binary args...
  local name=$1
  shift
  # setsid: the component gets its own process group, so a Ctrl-C in the caller's terminal
  # does not kill it; `down` stops it by pid.
  setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
  # The command line, NUL-separated, for `restart`.
  printf '%s\0' "$@" >"$dir/$name.args"
  log "started $name (pid $!, log $dir/logs/$name.log)"
}

# client_cert NAME SUBJECT: NAME.key and NAME.crt, a client certificate signed by the plane's
# CA (run in the pki directory).
client_cert() {
  echo "extendedKeyUsage=clientAuth" >client.ext
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 \
    -extfile client.ext 2>/dev/null
}

make_certs() { # extra subjectAltName entries for the apiserver's certificate
  local pki=$dir/pki extra=${1:-}
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=database-operator-test-ca" 2>/dev/null
    cat >serving.ext <<EXT
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local$extra
extendedKeyUsage=serverAuth
EXT
    openssl req -newkey rsa:2048 -nodes -keyout serving.key -out serving.csr -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out serving.crt -days 3650 \
      -extfile serving.ext 2>/dev/null
    # The admin identity: group system:masters passes every RBAC check.
    client_cert admin "/O=system:masters/CN=admin"
    # Service-account token signing keys.
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

write_kubeconfig() { # file server certificate key
  local user
  user=$(basename "$3" .crt)
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $plane
  cluster:
    server: $2
    certificate-authority: $dir/pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $3
    client-key: $4
contexts:
- name: $plane
  context: {cluster: $plane, user: $user}
current-context: $plane
EOF
}

# The nodes have room for every pod the tests and benchmarks make (the benchmark's ladder
# goes to 20,000 small Databases: 5,000 CPUs of requests): a pod left Pending for want of
# room would become Ready whenever another goes, a wave of status changes at a random moment.
add_nodes() {
  local n=${KWOK_NODES:-3} i
  for ((i = 0; i < n; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: kwok-node-$i
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
status:
  allocatable: {cpu: "10000", memory: 40Ti, pods: "${KWOK_NODE_PODS:-10000}"}
  capacity: {cpu: "10000", memory: 40Ti, pods: "${KWOK_NODE_PODS:-10000}"}
EOF
  done | kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null
}

# The plane's default StorageClass. Its provisioner is kube-controller-manager's built-in
# host-path provisioner (--enable-hostpath-provisioner): it creates a real PersistentVolume
# for each claim (a directory under /tmp on this machine) and deletes it with the claim, and
# kube-controller-manager's binder binds the two, as a cloud provider's would. Binding is
# immediate: the kwok nodes have no local topology to wait for. Expansion is allowed, so a
# claim's request can grow (the host-path volume itself does not resize).
add_storage_class() {
  kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
allowVolumeExpansion: true
EOF
}

# The nodes the plane has (NODES, REAL_NODES): sets has_kwok, has_real and real_nodes.
parse_nodes() {
  has_kwok=0 has_real=0
  local kind
  for kind in ${NODES//,/ }; do
    case $kind in
      kwok) has_kwok=1 ;;
      real) has_real=1 ;;
      *) die "NODES=$NODES: use kwok, real or kwok,real" ;;
    esac
  done
  [ $((has_kwok + has_real)) -gt 0 ] || die "NODES is empty: use kwok, real or kwok,real"
  real_nodes=0
  [ "$has_real" = 0 ] || real_nodes=$(node_names | wc -l)
  [ "$real_nodes" -le 1 ] || [ "$has_kwok" = 0 ] ||
    die "REAL_NODES=$REAL_NODES needs NODES=real: kwok's nodes renew their heartbeat every 20 to 45 s, too seldom for the short node monitor periods of a plane of several real nodes"
}

# With both kinds of node, PodNodeSelector sends pods to the real node unless their namespace
# names another selector (scheduler.alpha.kubernetes.io/node-selector=type=kwok): what a user
# or the tutorial creates runs for real, and a test opts into kwok's pretend pods.
admission_config() {
  cat >"$dir/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodNodeSelector
  configuration:
    podNodeSelectorPluginConfig:
      clusterDefaultNodeSelector: type=real
EOF
}

cmd_up() {
  if running kube-apiserver; then
    log "already up"
    cmd_env
    return
  fi
  local has_kwok has_real real_nodes
  NODES=${NODES:-kwok}
  parse_nodes
  [ "$has_real" = 0 ] || node_requirements
  local bin
  bin=$("$here/control-plane/build.sh" | tail -n 1)
  [ -x "$bin/kube-apiserver" ] || die "build did not produce $bin/kube-apiserver"
  rm -rf "$dir" && mkdir -p "$dir/logs" "$dir/etcd"
  components=(etcd kube-apiserver kube-controller-manager kube-scheduler)
  [ "$has_kwok" = 0 ] || components+=(kwok)
  [ "$has_real" = 0 ] || mapfile -t -O "${#components[@]}" components < <(node_components)
  printf '%s\n' "${components[@]}" >"$dir/components"

  local etcd_port etcd_peer_port api_port kcm_port sched_port kwok_port
  read -r -d '' etcd_port etcd_peer_port api_port kcm_port sched_port kwok_port < <("$here/free-port.py" 6) || true
  [ -n "$kwok_port" ] || die "no free ports (hack/free-port.py)"
  echo "$api_port" >"$dir/apiserver.port"

  # A real node reaches the apiserver through its veth (node.sh), so then the apiserver
  # listens on every address and advertises the veth's host end: pods reach it through the
  # `kubernetes` Service. Otherwise it listens on loopback only. Without a default route it
  # cannot pick an address to advertise, so it is given loopback, which the endpoint
  # reconciler refuses: turn the reconciler off (nothing then talks to the apiserver through
  # the kubernetes Service).
  local address=(--bind-address 127.0.0.1) extra_sans="" node_flags=()
  if [ "$has_real" = 1 ]; then
    node_plan
    address=(--bind-address 0.0.0.0 --advertise-address "$node_host_ip")
    # Each node reaches the apiserver at its own veth's host end.
    local name
    while read -r name; do extra_sans+=",IP:$(. "$(node_dir_of "$name")/node.env" && echo "$node_host_ip")"; done <"$dir/real-nodes"
    node_flags=(--kubelet-client-certificate "$dir/pki/apiserver-kubelet-client.crt"
      --kubelet-client-key "$dir/pki/apiserver-kubelet-client.key"
      --kubelet-preferred-address-types InternalIP)
  elif [ -z "$(ip route show default 2>/dev/null)" ] || [ -n "${CONTROL_PLANE_NO_ROUTE:-}" ]; then
    address+=(--advertise-address 127.0.0.1 --endpoint-reconciler-type none)
  fi
  local admission=(--enable-admission-plugins OwnerReferencesPermissionEnforcement,NodeRestriction)
  if [ "$has_kwok" = 1 ] && [ "$has_real" = 1 ]; then
    admission_config
    admission=(--enable-admission-plugins OwnerReferencesPermissionEnforcement,NodeRestriction,PodNodeSelector
      --admission-control-config-file "$dir/admission.yaml")
  fi
  make_certs "$extra_sans"
  [ "$has_real" = 0 ] || node_certs

  launch etcd "$bin/etcd" --name "$plane" --data-dir "$dir/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "$plane=http://127.0.0.1:$etcd_peer_port" \
    --quota-backend-bytes 4294967296
  wait_for "etcd to be healthy" 60 etcd curl -fsS "http://127.0.0.1:$etcd_port/health"

  # TaintNodesByCondition taints every new node not-ready until the node lifecycle controller
  # clears it; kwok's nodes are Ready from the start and that controller does not run here.
  # The Node authorizer and NodeRestriction confine a real node's kubelet to its own node.
  launch kube-apiserver "$bin/kube-apiserver" "${address[@]}" "${node_flags[@]}" \
    --etcd-servers "http://127.0.0.1:$etcd_port" --secure-port "$api_port" \
    --tls-cert-file "$dir/pki/serving.crt" --tls-private-key-file "$dir/pki/serving.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --service-cluster-ip-range "${SERVICE_CIDR:-10.0.0.0/16}" --allow-privileged \
    --disable-admission-plugins TaintNodesByCondition "${admission[@]}" \
    ${APISERVER_FEATURE_GATES:+--feature-gates "$APISERVER_FEATURE_GATES"} \
    --cert-dir "$dir/pki" --profiling=false
  write_kubeconfig "$kubeconfig" "https://127.0.0.1:$api_port" "$dir/pki/admin.crt" "$dir/pki/admin.key"
  wait_for "kube-apiserver /readyz" 120 kube-apiserver kubectl --kubeconfig "$kubeconfig" get --raw /readyz

  # root-ca-cert-publisher: the kube-root-ca.crt ConfigMap in every namespace, which every
  # projected service account token volume reads (a real pod without it never starts).
  local common=(--kubeconfig "$kubeconfig" --leader-elect=false --bind-address 127.0.0.1)
  local controllers=garbagecollector,deployment,replicaset,serviceaccount,serviceaccount-token,namespace,endpointslice,podgc,resourcequota,persistentvolume-binder,persistentvolume-expander,pvc-protection,pv-protection,job,root-ca-cert-publisher
  local lifecycle=()
  if [ "$real_nodes" -gt 1 ]; then
    # A node that stops answering: Ready Unknown after the grace period (the kubelets renew
    # their leases every 2 s, node.sh), its pods not Ready at once (their Services stop
    # sending to them), the unreachable NoExecute taint, and its pods evicted once their
    # toleration of it ends (300 s unless a pod says otherwise). Kubernetes' defaults are
    # 5 s and 50 s: a test of a lost node would wait a minute for each.
    # disruption: the PodDisruptionBudgets' status, which the Eviction API a drain calls
    # reads (a Database of several instances has one).
    controllers+=,node-lifecycle-controller,taint-eviction-controller,disruption
    lifecycle=(--node-monitor-period 1s --node-monitor-grace-period 10s)
  fi
  launch kube-controller-manager "$bin/kube-controller-manager" "${common[@]}" --secure-port "$kcm_port" \
    --controllers "$controllers" "${lifecycle[@]}" \
    --enable-hostpath-provisioner \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10 --concurrent-gc-syncs 40 \
    --kube-api-qps 200 --kube-api-burst 400
  launch kube-scheduler "$bin/kube-scheduler" "${common[@]}" --secure-port "$sched_port" \
    --kube-api-qps 200 --kube-api-burst 400
  if [ "$has_kwok" = 1 ]; then
    # kwok's stages: how its nodes and pods move (built with kwok, from its module).
    launch kwok "$bin/kwok" --kubeconfig "$kubeconfig" -c "$bin/kwok-stages.yaml" \
      --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
      --cidr 10.244.0.0/16 --node-ip 10.255.0.1 --server-address "127.0.0.1:$kwok_port"
  fi

  wait_for "the default namespace" 60 kube-apiserver kubectl --kubeconfig "$kubeconfig" get namespace default
  if [ "$has_kwok" = 1 ]; then
    add_nodes
    wait_for "kwok nodes to be Ready" 60 kwok kubectl --kubeconfig "$kubeconfig" wait --for=condition=Ready nodes -l type=kwok --timeout=1s
  fi
  if [ "$has_real" = 1 ]; then
    node_up
  else
    add_storage_class
  fi
  wait_for "the default service account" 60 kube-controller-manager kubectl --kubeconfig "$kubeconfig" get serviceaccount default
  log "up: Kubernetes $(kubectl --kubeconfig "$kubeconfig" version -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') at https://127.0.0.1:$api_port, nodes: $NODES${REAL_NODES:+ (REAL_NODES=$REAL_NODES)}"
  cmd_env
}

cmd_down() {
  # Every component at once (SIGTERM, SIGKILL after 5 s): the plane is going, so no order
  # matters, and one after another cost a benchmark's ten planes three minutes.
  local c pid stopping=()
  for c in "${components[@]}"; do
    pid=$(pid_of "$c")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      stopping+=("$c:$pid")
    fi
  done
  for _ in $(seq 50); do
    local alive=0
    for c in "${stopping[@]}"; do kill -0 "${c#*:}" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.1
  done
  for c in "${stopping[@]}"; do
    kill -9 "${c#*:}" 2>/dev/null || true
    log "stopped ${c%%:*} (pid ${c#*:})"
  done
  node_down
  rm -rf "$dir"
  log "down; removed $dir"
}

cmd_status() {
  local c pid state=0
  for c in "${components[@]}"; do
    pid=$(pid_of "$c")
    if running "$c"; then
      printf '%-24s running (pid %s)\n' "$c" "$pid"
    else
      printf '%-24s stopped\n' "$c"
      state=1
    fi
  done
  [ -f "$kubeconfig" ] && echo "kubeconfig: $kubeconfig"
  return $state
}

# relaunch NAME: starts component NAME again with the arguments `launch` gave it.
relaunch() {
  local args=()
  mapfile -d '' args <"$dir/$1.args"
  launch "$1" "${args[@]}"
}

cmd_restart() { # component
  local name=${1:-} pid
  [ -n "$name" ] && [ -f "$dir/$name.args" ] || die "usage: restart COMPONENT (one of: ${components[*]})"
  pid=$(pid_of "$name")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    log "killed $name (pid $pid)"
  fi
  local attempt deadline
  for attempt in 1 2 3; do
    relaunch "$name"
    [ "$name" = kube-apiserver ] || return 0
    # A restarted apiserver may give up on a post-start hook under load (the Service IP
    # repair's initial check) and exit; a kubelet would start it again, and so does this.
    deadline=$(($(date +%s) + 120))
    until kubectl --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; do
      if ! running "$name"; then
        log "$name exited while starting (attempt $attempt of 3): $(tail -n 1 "$dir/logs/$name.log" | cut -c1-200)"
        continue 2
      fi
      [ "$(date +%s)" -lt "$deadline" ] || die "timed out after 120s waiting for kube-apiserver /readyz"
      sleep 0.5
    done
    return 0
  done
  die "$name did not start in 3 attempts (log: $dir/logs/$name.log)"
}

cmd_node() { # freeze|thaw|kill|start NODE, partition|heal NODE ADDRESS PORT
  local action=${1:-} name=${2:-} usage="usage: $0 node freeze|thaw|kill|start NODE, or node partition|heal NODE ADDRESS PORT"
  [ -n "$name" ] || die "$usage"
  running kube-apiserver || die "plane '$plane' is not running: start it with hack/control-plane.sh up"
  node_select "$name"
  case $action in
    freeze) node_freeze ;;
    thaw) node_thaw ;;
    kill) node_kill ;;
    start) node_start ;;
    partition) node_partition "${3:-}" "${4:-}" ;;
    heal) node_heal "${3:-}" "${4:-}" ;;
    *) die "$usage" ;;
  esac
}

cmd_env() {
  running kube-apiserver || die "plane '$plane' is not running: start it with hack/control-plane.sh up"
  echo "export KUBECONFIG=$kubeconfig"
  # The real node's containerd, where hack/engine-images.sh imports images; with several real
  # nodes, real-node's, and every node's in CONTAINERD_ADDRESSES.
  if [ -f "$dir/real-nodes" ]; then
    local name addresses=()
    while read -r name; do addresses+=("$(. "$(node_dir_of "$name")/node.env" && echo "$node_socket")"); done <"$dir/real-nodes"
    echo "export CONTAINERD_ADDRESS=${addresses[0]}"
    echo "export CONTAINERD_ADDRESSES='${addresses[*]}'"
  fi
  # The host's end of the real node's link: a server the tests start on this address (the
  # object store of tests/e2e/buckets.rs) is reached by the real node's pods.
  [ ! -f "$dir/node.env" ] || echo "export NODE_HOST_ADDRESS=$(. "$dir/node.env" && echo "$node_host_ip")"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  restart) cmd_restart "${2:-}" ;;
  node) cmd_node "${2:-}" "${3:-}" "${4:-}" "${5:-}" ;;
  *) echo "usage: $0 up|down|status|env|restart COMPONENT|node freeze|thaw|kill|start|partition|heal NODE ..." >&2; exit 2 ;;
esac
