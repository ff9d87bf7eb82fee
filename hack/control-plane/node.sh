# shellcheck shell=bash
# Real nodes for the local control plane, sourced by hack/control-plane.sh (NODES=real):
# containerd, the kubelet, kube-proxy and CoreDNS on each, so that pods really run; and the
# plane's volume provisioner, so that their claims are volumes a non-root database can write.
#
# REAL_NODES (default 1) says how many: `real-node`, then `real-node-1`, `real-node-2`, ...
# Each node is whole on its own, so that losing one (`hack/control-plane.sh node freeze|kill`)
# takes only its own parts with it: its network namespace, cgroup, containerd, kubelet,
# kube-proxy and CoreDNS (one per node, as NodeLocal DNSCache runs one: the node's pods ask
# their own node). Everything of a node lives in places of the plane's own, so planes run
# side by side and `down` leaves nothing behind:
# - a network namespace (dbop-<plane>, dbop-<plane>-<i> for real-node-<i>) joined to the host
#   by a veth pair on 10.201.N.0/30, N free on this host: the host end (.1) is where the node
#   reaches the apiserver (which then listens on every address), the node end (.2) is the
#   node's IP, where the apiserver reaches the kubelet (logs, exec, port-forward) and where
#   the node's pods find their DNS. The node's pods get 10.88.N.0/24 on a bridge inside it,
#   and kube-proxy's iptables rules stay inside it. The host routes each node's pod range
#   to its veth, so pods reach pods on other nodes by their own addresses (with more than one
#   node the host forwards: net.ipv4.ip_forward=1, left on by `down`, as another plane may
#   use it). Only the network is a namespace of its own: the kubelet and containerd share the
#   host's mounts, as on a real node;
# - a cgroup (named as the namespace) in every v1 hierarchy: the kubelet's cgroup root, with
#   the node's own processes in <cgroup>/system, so a node is frozen or killed whole (its
#   pods, containerd and its shims, the kubelet) and `down` kills whatever is left by cgroup;
# - containerd's root and state, runc's state, the kubelet's root and the pods' logs under the
#   node's directory: the plane's directory for real-node (as a plane of one node always had
#   it), <plane>/nodes/<name> for the others. containerd's socket is /run/dbop/<namespace>/
#   containerd.sock (node_socket): a unix socket's path holds at most 104 bytes with the
#   ".ttrpc" containerd adds, which a node's directory under ~/.cache can pass. The volumes
#   (local directories, each with its node as its only topology) are the plane's.
#
# With more than one node, kube-controller-manager runs the node lifecycle and taint eviction
# controllers with short periods (control-plane.sh), and each kubelet renews its lease every
# two seconds: a node that stops answering reads Ready Unknown within about ten seconds.
#
# What this machine needed, and why:
# - containerd: `restrict_oom_score_adj = true` and the kubelet's `oomScoreAdj: 0`: without
#   CAP_SYS_RESOURCE an oom_score_adj below the caller's is refused, and runc then fails with
#   "can't get final child's PID from pipe: EOF";
# - cgroup v1: the kubelet's `failCgroupV1: false` and the cgroupfs driver (no systemd);
# - kube-controller-manager's root-ca-cert-publisher (control-plane.sh runs it): without the
#   kube-root-ca.crt ConfigMap no pod with a service account token starts;
# - the host-path provisioner's root-owned 0750 directories, to which the kubelet applies no
#   fsGroup: replaced by cmd/local-provisioner's local volumes, which get the pod's fsGroup.

node_cluster_cidr=10.88.0.0/16
node_provisioner=example.com/local-path
# The kubelet's lease: renewed every quarter of its duration. With the node lifecycle
# controller's grace period (control-plane.sh) it decides how soon a lost node is noticed.
node_lease_seconds=8
node_controllers=(blkio cpu cpuacct cpuset devices freezer memory pids systemd)

# node_names: the names of the plane's real nodes (REAL_NODES of them), one a line.
node_names() {
  local count=${REAL_NODES:-1} i
  [[ $count =~ ^[1-9][0-9]*$ ]] || die "REAL_NODES=$count: use a number of nodes, 1 or more"
  echo real-node
  for ((i = 1; i < count; i++)); do echo "real-node-$i"; done
}

# node_dir_of NAME: where node NAME keeps its state.
node_dir_of() {
  if [ "$1" = real-node ]; then echo "$dir"; else echo "$dir/nodes/$1"; fi
}

# node_suffix_of NAME: what node NAME's components' names end with ("" for real-node).
node_suffix_of() {
  [ "$1" = real-node ] || echo "-$1"
}

# node_select NAME: sets node NAME's variables from what node_plan recorded: node_name,
# node_dir, node_netns, node_veth, node_host_ip, node_ip, node_pod_cidr, node_cgroup,
# node_socket (containerd's), and
# node_suffix (its components' names end with it: "" for real-node, "-NAME" for the others).
node_select() {
  node_name=$1
  node_dir=$(node_dir_of "$1")
  [ -f "$node_dir/node.env" ] || die "no real node $1 on plane '$plane' (nodes: $(tr '\n' ' ' <"$dir/real-nodes" 2>/dev/null))"
  node_socket=
  # shellcheck source=/dev/null
  . "$node_dir/node.env"
  node_suffix=$(node_suffix_of "$1")
}

# node_requirements: Linux, root, and the node's packages, installed from the distribution
# when missing (Debian and Ubuntu), as hack/image.sh installs its tools.
node_requirements() {
  [ "$(uname -s)" = Linux ] || die "a real node (NODES=real) needs Linux; use NODES=kwok"
  [ "$(id -u)" = 0 ] || die "a real node (NODES=real) needs root (network namespaces, cgroups, mounts); use NODES=kwok"
  local missing=() need
  for need in containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
    iptables:iptables conntrack:conntrack nsenter:util-linux ip:iproute2 gcc:gcc; do
    if [[ ${need%%:*} == /* ]]; then [ -e "${need%%:*}" ]; else command -v "${need%%:*}" >/dev/null; fi ||
      missing+=("${need#*:}")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  command -v apt-get >/dev/null || die "a real node needs ${missing[*]}: install them and run again"
  log "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
    die "apt-get install ${missing[*]} failed"
}

# node_plan: plans every real node (node_plan_one) and records their names in
# $dir/real-nodes; with more than one, the host forwards between them. Sets node_host_ip
# (real-node's host end: where the apiserver is advertised).
node_plan() {
  local name names=() i=0
  mapfile -t names < <(node_names)
  printf '%s\n' "${names[@]}" >"$dir/real-nodes"
  for name in "${names[@]}"; do
    node_plan_one "$name" "$i"
    i=$((i + 1))
  done
  [ ${#names[@]} = 1 ] || sysctl -qw net.ipv4.ip_forward=1
  node_select real-node
}

# node_plan_one NAME INDEX: picks node NAME's subnet (10.201.N.0/30, N free on this host) and
# names, and creates its namespace and veth pair while holding a lock, so two planes starting
# at once never pick the same N; then the route to its pods and its cgroups.
node_plan_one() {
  local name=$1 index=$2 n addresses lock=$dir/../.node-network.lock
  local node_dir node_netns node_veth node_host_ip node_ip node_pod_cidr node_cgroup node_socket
  node_dir=$(node_dir_of "$name")
  mkdir -p "$node_dir"
  node_netns=dbop-$plane
  [ "$index" = 0 ] || node_netns=dbop-$plane-$index
  node_cgroup=$node_netns
  node_socket=/run/dbop/$node_netns/containerd.sock
  [ ${#node_socket} -le 98 ] || die "plane name '$plane' too long: $node_socket.ttrpc would pass a unix socket's 104 bytes"
  mkdir -p "$(dirname "$node_socket")"
  exec 9>"$lock"
  flock 9
  # Read once, then searched: `ip | grep -q` under pipefail fails when grep stops early and ip
  # dies of SIGPIPE, which would take a subnet in use for a free one.
  addresses=$(ip -o -4 addr show)
  for ((n = 0; n < 255; n++)); do
    [[ $addresses == *" 10.201.$n.1/"* ]] || break
  done
  [ "$n" -lt 255 ] || die "no free 10.201.N.0/30 subnet for the node's veth"
  node_veth=dbop$n
  node_host_ip=10.201.$n.1
  node_ip=10.201.$n.2
  # N is free on this host, so the pod range is too: the host's route to it is the node's.
  node_pod_cidr=10.88.$n.0/24
  ip netns add "$node_netns"
  ip link add "$node_veth" type veth peer name eth0 netns "$node_netns"
  ip addr add "$node_host_ip/30" dev "$node_veth"
  ip link set "$node_veth" up
  exec 9>&-
  printf 'node_netns=%s\nnode_veth=%s\nnode_host_ip=%s\nnode_ip=%s\nnode_pod_cidr=%s\nnode_cgroup=%s\nnode_socket=%s\n' \
    "$node_netns" "$node_veth" "$node_host_ip" "$node_ip" "$node_pod_cidr" "$node_cgroup" "$node_socket" >"$node_dir/node.env"
  in_netns() { ip netns exec "$node_netns" "$@"; }
  in_netns ip addr add "$node_ip/30" dev eth0
  in_netns ip link set eth0 up
  in_netns ip link set lo up
  in_netns ip route add default via "$node_host_ip"
  ip route add "$node_pod_cidr" via "$node_ip" dev "$node_veth"
  # Pods reach the apiserver (the `kubernetes` Service) and the host through the veth, as
  # the node; pods on other nodes see their own addresses (the host routes to them).
  in_netns sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  in_netns iptables -t nat -A POSTROUTING -o eth0 ! -d "$node_cluster_cidr" -j MASQUERADE

  local controller
  for controller in "${node_controllers[@]}"; do
    mkdir -p "/sys/fs/cgroup/$controller/$node_cgroup/system"
  done
  # A new cpuset has no CPUs or memory nodes until it is given its parent's.
  local cpuset=/sys/fs/cgroup/cpuset
  for path in "$cpuset/$node_cgroup" "$cpuset/$node_cgroup/system"; do
    cat "$(dirname "$path")/cpuset.cpus" >"$path/cpuset.cpus"
    cat "$(dirname "$path")/cpuset.mems" >"$path/cpuset.mems"
  done
}

# node_launch NAME BINARY ARGS...: `launch`, inside the selected node's network namespace and
# cgroup.
node_launch() {
  local name=$1
  shift
  launch "$name" nsenter --net="/run/netns/$node_netns" -- sh -c \
    'for c in "$0"/*/'"$node_cgroup"'/system; do echo $$ >"$c/cgroup.procs"; done; exec "$@"' \
    /sys/fs/cgroup "$@"
}

# node_certs: the identities of the nodes' parts, signed by the plane's CA: the apiserver's
# client certificate for the kubelets; each kubelet's (system:node:<name>, which the Node
# authorizer and NodeRestriction then confine to its own node) and kube-proxy's and
# CoreDNS's, with a kubeconfig each per node (each node reaches the apiserver through its
# own veth).
node_certs() {
  local pki=$dir/pki name
  (cd "$pki" && client_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" &&
    client_cert kube-proxy "/CN=system:kube-proxy" && client_cert coredns "/CN=system:coredns")
  while read -r name; do
    node_select "$name"
    (cd "$pki" && client_cert "kubelet-$name" "/O=system:nodes/CN=system:node:$name")
    write_kubeconfig "$node_dir/kubelet.kubeconfig" "https://$node_host_ip:$api_port" "$pki/kubelet-$name.crt" "$pki/kubelet-$name.key"
    local who
    for who in kube-proxy coredns; do
      write_kubeconfig "$node_dir/$who.kubeconfig" "https://$node_host_ip:$api_port" "$pki/$who.crt" "$pki/$who.key"
    done
  done <"$dir/real-nodes"
  node_select real-node
}

# The selected node's containerd and CNI configuration. runc keeps its state under the node's
# directory too: two nodes' containerds on one host never share a runc root.
node_containerd_config() {
  mkdir -p "$node_dir/containerd" "$node_dir/cni/net.d"
  cat >"$node_dir/containerd/config.toml" <<EOF
version = 2
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
[grpc]
  address = "$node_socket"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node_dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(cat "$bin/pause-image")"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$node_dir/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node_dir/cni/net.d"
EOF
  cat >"$node_dir/cni/net.d/10-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "dbop",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$node_pod_cidr"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$node_dir/cni/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

node_kubelet_config() {
  cat >"$node_dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$node_cgroup
failCgroupV1: false
oomScoreAdj: 0
containerRuntimeEndpoint: unix://$node_socket
clusterDNS: [$node_ip]
clusterDomain: cluster.local
podLogsDir: $node_dir/pod-logs
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
failSwapOn: false
serializeImagePulls: false
# Nothing here can pull, so nothing may be collected: every image was imported.
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
maxPods: 110
# Renewed every quarter of it: see node_lease_seconds.
nodeLeaseDurationSeconds: $node_lease_seconds
EOF
}

node_kube_proxy_config() {
  cat >"$node_dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $node_dir/kube-proxy.kubeconfig}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $node_cluster_cidr
# The conntrack table's size is the host's: leave it alone.
conntrack: {maxPerCore: 0}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
EOF
}

node_coredns_config() {
  cat >"$node_dir/Corefile" <<EOF
.:53 {
    bind $node_ip
    errors
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $node_dir/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    loadbalance
}
EOF
}

# CoreDNS's permissions, once for every node's.
node_coredns_rbac() {
  kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:coredns"}]
EOF
}

# The default StorageClass of a plane with real nodes: local volumes from cmd/local-provisioner,
# made once the scheduler has picked the pod's node (WaitForFirstConsumer), growable.
node_storage_class() {
  kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: $node_provisioner
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
EOF
}

# node_components: what `up` starts for the real nodes, in order (for control-plane.sh's
# list of components).
node_components() {
  local name suffix
  echo local-provisioner
  while read -r name; do
    suffix=$(node_suffix_of "$name")
    printf '%s\n' "containerd$suffix" "kubelet$suffix" "kube-proxy$suffix" "coredns$suffix"
  done < <(node_names)
}

# node_up: starts every node's parts (the apiserver is up) and waits for the nodes to be Ready.
node_up() {
  node_storage_class
  node_coredns_rbac
  mkdir -p "$dir/volumes"
  launch local-provisioner "$bin/local-provisioner" --kubeconfig "$kubeconfig" \
    --name "$node_provisioner" --dir "$dir/volumes"
  local name
  while read -r name; do
    node_select "$name"
    node_containerd_config
    node_kubelet_config
    node_kube_proxy_config
    node_coredns_config
    mkdir -p "$node_dir/pod-logs"
    node_launch "containerd$node_suffix" containerd --config "$node_dir/containerd/config.toml"
    node_wait_for_containerd
    ctr --address "$node_socket" -n k8s.io images import "$bin/pause.oci.tar" >/dev/null
    node_launch "kubelet$node_suffix" "$bin/kubelet" --config "$node_dir/kubelet.yaml" \
      --kubeconfig "$node_dir/kubelet.kubeconfig" --root-dir "$node_dir/kubelet" \
      --hostname-override "$node_name" --node-ip "$node_ip" --node-labels type=real
    node_launch "kube-proxy$node_suffix" "$bin/kube-proxy" --config "$node_dir/kube-proxy.yaml"
    node_launch "coredns$node_suffix" "$bin/coredns" -conf "$node_dir/Corefile"
  done <"$dir/real-nodes"
  while read -r name; do
    node_select "$name"
    node_wait_ready
  done <"$dir/real-nodes"
  node_select real-node
}

node_wait_for_containerd() {
  wait_for "containerd of $node_name" 60 "containerd$node_suffix" \
    ctr --address "$node_socket" version
}

# node_wait_ready: waits for the selected node to be registered and Ready, and its CoreDNS.
node_wait_ready() {
  wait_for "$node_name to register" 120 "kubelet$node_suffix" kubectl --kubeconfig "$kubeconfig" get node "$node_name"
  wait_for "$node_name to be Ready" 120 "kubelet$node_suffix" \
    kubectl --kubeconfig "$kubeconfig" wait --for=condition=Ready "node/$node_name" --timeout=1s
  wait_for "CoreDNS on $node_name" 60 "coredns$node_suffix" ip netns exec "$node_netns" curl -fsS http://127.0.0.1:8181/ready
}

# node_processes: the pids of every process of the selected node (its parts, containerd's
# shims, its pods' containers), from its cgroup.
node_processes() {
  find "/sys/fs/cgroup/pids/$node_cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null || true
}

# node_freeze: stops every process of the selected node where it is (the freezer cgroup), as
# a node that stops answering does: its kubelet no longer renews its lease, its servers
# neither answer nor exit, its volumes keep what they hold. node_thaw lets them go on.
node_freeze() {
  node_freezer FROZEN
}
node_thaw() {
  node_freezer THAWED
}
node_freezer() { # FROZEN|THAWED
  local state=/sys/fs/cgroup/freezer/$node_cgroup/freezer.state attempt
  [ -f "$state" ] || die "no freezer cgroup for $node_name ($state)"
  echo "$1" >"$state"
  # FREEZING until every task has stopped.
  for ((attempt = 0; attempt < 100; attempt++)); do
    [ "$(cat "$state")" = "$1" ] && { log "$node_name: $1"; return 0; }
    sleep 0.1
  done
  die "$node_name's freezer cgroup is $(cat "$state"), not $1, after 10 s"
}

# node_kill: kills every process of the selected node with SIGKILL (a node losing its power:
# nothing runs, the volumes keep what was written). node_start starts its parts again.
node_kill() {
  local procs attempt
  # A frozen task dies only once thawed.
  (node_thaw) >/dev/null 2>&1 || true
  for ((attempt = 0; attempt < 100; attempt++)); do
    procs=$(node_processes)
    [ -n "$procs" ] || { log "$node_name: killed"; return 0; }
    # shellcheck disable=SC2086
    kill -9 $procs 2>/dev/null || true
    sleep 0.1
  done
  die "$node_name still has processes after 10 s: $(node_processes | tr '\n' ' ')"
}

# node_partition ADDRESS PORT: the selected node drops what its pod at ADDRESS sends to TCP
# PORT of any other host, as a network that stops carrying one pod's connections to a server
# elsewhere does (e.g. a replica's to its primary); everything else still flows, the other
# way included. node_heal ADDRESS PORT lets it through again.
node_partition() {
  node_partition_rule -I "$@"
  log "$node_name: dropping what $1 sends to port $2 elsewhere"
}
node_heal() {
  node_partition_rule -D "$@"
  log "$node_name: $1 reaches port $2 elsewhere again"
}
node_partition_rule() { # -I|-D ADDRESS PORT
  [ -n "${2:-}" ] && [ -n "${3:-}" ] || die "usage: hack/control-plane.sh node partition|heal NODE ADDRESS PORT"
  ip netns exec "$node_netns" iptables -w "$1" FORWARD -s "$2" -p tcp --dport "$3" -j DROP
}

# node_start: starts a killed node's parts again, with the arguments `up` gave them
# (relaunch, control-plane.sh), and waits for the node to be Ready.
node_start() {
  local part
  [ -z "$(node_processes)" ] || die "$node_name is running: kill it first (hack/control-plane.sh node kill $node_name)"
  relaunch "containerd$node_suffix"
  node_wait_for_containerd
  for part in kubelet kube-proxy coredns; do relaunch "$part$node_suffix"; done
  node_wait_ready
}

# node_down: stops whatever of the nodes is left (by cgroup: the pods, containerd and its
# shims; a frozen node is thawed first), unmounts what the kubelets and containerds mounted
# under the plane's directory, and removes the cgroups, the namespaces and the veths. Safe to
# run on a half-started plane.
node_down() {
  [ -f "$dir/real-nodes" ] || return 0
  local name controller mounts
  while read -r name; do
    [ -f "$(node_dir_of "$name")/node.env" ] || continue
    node_select "$name"
    (node_kill) >/dev/null 2>&1 || true
  done <"$dir/real-nodes"
  mounts=$(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  [ -z "$mounts" ] || echo "$mounts" | xargs -r -n 1 umount -l 2>/dev/null || true
  while read -r name; do
    [ -f "$(node_dir_of "$name")/node.env" ] || continue
    node_select "$name"
    for controller in "${node_controllers[@]}"; do
      [ -d "/sys/fs/cgroup/$controller/$node_cgroup" ] &&
        find "/sys/fs/cgroup/$controller/$node_cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    ip netns del "$node_netns" 2>/dev/null || true
    [[ $node_socket != /run/dbop/* ]] || rm -rf "$(dirname "$node_socket")"
    ip link del "$node_veth" 2>/dev/null || true
    log "removed $name's namespace $node_netns, cgroup /$node_cgroup and mounts"
  done <"$dir/real-nodes"
}
