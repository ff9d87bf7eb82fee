#!/usr/bin/env bash
# Tests `hack/engine-images.sh import` against a throwaway containerd: root, state and sockets in
# a temporary directory, so a node's own containerd is never touched. Every image name must be
# there in namespace k8s.io, and every image must start from its unpacked snapshot as uid 999
# (its entrypoint, running the server's --version). Then containerd is stopped and everything
# it made is unmounted and removed.
#
# usage: hack/engine-images/import-test.sh   (as root; ENGINE_IMAGES as hack/engine-images.sh)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
start=$(date +%s)
log() { printf '[import-test %4ss] %s\n' "$(($(date +%s) - start))" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# Short: a unix socket's path has at most 108 bytes.
dir=$(mktemp -d /tmp/containerd-test.XXXXXX)
address=$dir/containerd.sock
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; fi
  # Snapshots and task root filesystems still mounted under the directory, deepest first.
  awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l
  rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/config.toml" <<EOF
version = 2
root = "$dir/root"
state = "$dir/state"
[grpc]
  address = "$address"
[ttrpc]
  address = "$address.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  # The kubelet's containers may not lower their OOM score without CAP_SYS_RESOURCE.
  restrict_oom_score_adj = true
EOF
containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 &
pid=$!
for _ in {1..50}; do ctr --address "$address" version >/dev/null 2>&1 && break; sleep 0.2; done
ctr --address "$address" version >/dev/null 2>&1 || { tail -20 "$dir/containerd.log" >&2; die "containerd did not start"; }
log "containerd $(ctr --address "$address" version | awk '/Server:/ { s = 1 } s && /Version:/ { print $2; exit }') at $address"

mapfile -t lines < <("$root/hack/engine-images.sh" import "$address")
[ ${#lines[@]} -gt 0 ] || die "hack/engine-images.sh import printed no image"
present=$(ctr --address "$address" -n k8s.io images ls --quiet)
n=0
for line in "${lines[@]}"; do
  read -ra names <<<"$(cut -f2- <<<"$line")"
  for name in "${names[@]}"; do
    grep -qxF "$name" <<<"$present" || die "$name is not in containerd's k8s.io namespace"
  done
  case ${names[0]} in
    */postgres:*) version=(postgres --version) ;;
    */mariadb:*) version=(mariadbd --version) ;;
    */redis:*) version=(redis-server --version) ;;
    *) die "no version command for ${names[0]}" ;;
  esac
  n=$((n + 1))
  # As the image's user (ctr run has no --user: the image's own, 999:999, applies).
  # shellcheck disable=SC2016 # for the container's shell
  printed=$(ctr --address "$address" -n k8s.io run --rm "${names[0]}" "engine-test-$n" \
    docker-entrypoint.sh sh -c 'printf "uid %s: " "$(id -u)" && exec "$@"' sh "${version[@]}") ||
    die "${names[0]} did not start"
  [[ $printed == "uid 999: "* ]] || die "${names[0]} ran as another user: $printed"
  log "ok: ${names[*]}: $printed"
done
log "passed"
