# shellcheck shell=bash
# A real node for the local control plane, sourced by hack/control-plane.sh (NODES=real):
# containerd, the kubelet, kube-proxy and CoreDNS, so that pods really run; and the plane's
# volume provisioner, so that their claims are volumes a non-root database can write.
#
# Everything of the node lives in places of the plane's own, so planes run side by side and
# `down` leaves nothing behind:
# - a network namespace (dbop-<plane>) joined to the host by a veth pair on 10.201.N.0/30:
#   the host end (.1) is where the node reaches the apiserver (which then listens on every
#   address), the node end (.2) is the node's IP, where the apiserver reaches the kubelet
#   (logs, exec, port-forward) and where pods find the cluster's DNS. Pods get 10.88.0.0/16
#   on a bridge inside it, and kube-proxy's iptables rules stay inside it. Only the network
#   is a namespace of its own: the kubelet and containerd share the host's mounts, as on a
#   real node;
# - a cgroup (/dbop-<plane>) in every v1 hierarchy: the kubelet's cgroup root, with the node's
#   own processes in /dbop-<plane>/system, so `down` kills whatever is left by cgroup;
# - containerd's root, state and socket, the kubelet's root, the pods' logs and the volumes,
#   all under the plane's directory.
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

node_name=real-node
node_pod_cidr=10.88.0.0/16
node_provisioner=example.com/local-path

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

# node_plan: picks the node's subnet (10.201.N.0/30, N free on this host) and names, and
# creates the namespace and the veth pair while holding a lock, so two planes starting at
# once never pick the same N. Sets node_netns, node_veth, node_host_ip, node_ip, node_cgroup.
node_plan() {
  local n addresses lock=$dir/../.node-network.lock
  node_netns=dbop-$plane
  node_cgroup=dbop-$plane
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
  ip netns add "$node_netns"
  ip link add "$node_veth" type veth peer name eth0 netns "$node_netns"
  ip addr add "$node_host_ip/30" dev "$node_veth"
  ip link set "$node_veth" up
  exec 9>&-
  printf 'node_netns=%s\nnode_veth=%s\nnode_host_ip=%s\nnode_ip=%s\nnode_cgroup=%s\n' \
    "$node_netns" "$node_veth" "$node_host_ip" "$node_ip" "$node_cgroup" >"$dir/node.env"
  in_netns() { ip netns exec "$node_netns" "$@"; }
  in_netns ip addr add "$node_ip/30" dev eth0
  in_netns ip link set eth0 up
  in_netns ip link set lo up
  in_netns ip route add default via "$node_host_ip"
  # Pods reach the apiserver (the `kubernetes` Service) and the host through the veth, as
  # the node: the host needs no route back to the pods.
  in_netns sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  in_netns iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE

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
node_controllers=(blkio cpu cpuacct cpuset devices freezer memory pids systemd)

# node_launch NAME BINARY ARGS...: `launch`, inside the node's network namespace and cgroup.
node_launch() {
  local name=$1
  shift
  launch "$name" nsenter --net="/run/netns/$node_netns" -- sh -c \
    'for c in "$0"/*/'"$node_cgroup"'/system; do echo $$ >"$c/cgroup.procs"; done; exec "$@"' \
    /sys/fs/cgroup "$@"
}

# node_certs: the identities of the node's parts, signed by the plane's CA: the apiserver's
# client certificate for the kubelet, the kubelet's (system:node:<name>, which the Node
# authorizer and NodeRestriction then confine to its own node), kube-proxy's and CoreDNS's.
node_certs() {
  local pki=$dir/pki
  (
    cd "$pki"
    client_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
    client_cert kubelet "/O=system:nodes/CN=system:node:$node_name"
    client_cert kube-proxy "/CN=system:kube-proxy"
    client_cert coredns "/CN=system:coredns"
  )
  local who
  for who in kubelet kube-proxy coredns; do
    write_kubeconfig "$dir/$who.kubeconfig" "https://$node_host_ip:$api_port" "$pki/$who.crt" "$pki/$who.key"
  done
}

node_containerd_config() {
  mkdir -p "$dir/containerd" "$dir/cni/net.d"
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
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
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
EOF
  cat >"$dir/cni/net.d/10-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "dbop",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$node_pod_cidr"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$dir/cni/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

node_kubelet_config() {
  cat >"$dir/kubelet.yaml" <<EOF
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
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
clusterDNS: [$node_ip]
clusterDomain: cluster.local
podLogsDir: $dir/pod-logs
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
failSwapOn: false
serializeImagePulls: false
# Nothing here can pull, so nothing may be collected: every image was imported.
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
maxPods: 110
EOF
}

node_kube_proxy_config() {
  cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/kube-proxy.kubeconfig}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $node_pod_cidr
# The conntrack table's size is the host's: leave it alone.
conntrack: {maxPerCore: 0}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
EOF
}

node_coredns_config() {
  cat >"$dir/Corefile" <<EOF
.:53 {
    bind $node_ip
    errors
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $dir/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    loadbalance
}
EOF
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

# The default StorageClass of a plane with a real node: local volumes from cmd/local-provisioner,
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

# node_up: starts the node's parts (the apiserver is up) and waits for the node to be Ready.
node_up() {
  node_containerd_config
  node_kubelet_config
  node_kube_proxy_config
  node_coredns_config
  node_storage_class
  mkdir -p "$dir/volumes" "$dir/pod-logs"
  launch local-provisioner "$bin/local-provisioner" --kubeconfig "$kubeconfig" \
    --name "$node_provisioner" --dir "$dir/volumes"
  node_launch containerd containerd --config "$dir/containerd/config.toml"
  local ctr=(ctr --address "$dir/containerd/containerd.sock")
  wait_for "containerd" 60 containerd "${ctr[@]}" version
  "${ctr[@]}" -n k8s.io images import "$bin/pause.oci.tar" >/dev/null
  node_launch kubelet "$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --hostname-override "$node_name" --node-ip "$node_ip" --node-labels type=real
  node_launch kube-proxy "$bin/kube-proxy" --config "$dir/kube-proxy.yaml"
  node_launch coredns "$bin/coredns" -conf "$dir/Corefile"
  wait_for "the real node to register" 120 kubelet kubectl --kubeconfig "$kubeconfig" get node "$node_name"
  wait_for "the real node to be Ready" 120 kubelet \
    kubectl --kubeconfig "$kubeconfig" wait --for=condition=Ready "node/$node_name" --timeout=1s
  wait_for "CoreDNS" 60 coredns ip netns exec "$node_netns" curl -fsS http://127.0.0.1:8181/ready
}

# node_down: stops whatever of the node is left (by cgroup: the pods, containerd and its
# shims), unmounts what the kubelet and containerd mounted under the plane's directory, and
# removes the cgroups, the namespace and the veth. Safe to run on a half-started node.
node_down() {
  [ -f "$dir/node.env" ] || return 0
  # shellcheck source=/dev/null
  . "$dir/node.env"
  local procs attempt controller mounts
  for ((attempt = 0; attempt < 100; attempt++)); do
    procs=$(find "/sys/fs/cgroup/pids/$node_cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
    [ -n "$procs" ] || break
    # shellcheck disable=SC2086
    kill -9 $procs 2>/dev/null || true
    sleep 0.1
  done
  mounts=$(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  [ -z "$mounts" ] || echo "$mounts" | xargs -r -n 1 umount -l 2>/dev/null || true
  for controller in "${node_controllers[@]}"; do
    [ -d "/sys/fs/cgroup/$controller/$node_cgroup" ] &&
      find "/sys/fs/cgroup/$controller/$node_cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  ip netns del "$node_netns" 2>/dev/null || true
  ip link del "$node_veth" 2>/dev/null || true
  log "removed the real node's namespace $node_netns, cgroup /$node_cgroup and mounts"
}
