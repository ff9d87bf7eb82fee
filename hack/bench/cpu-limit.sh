#!/usr/bin/env bash
# Runs a command under a CPU limit, as a pod's `resources.limits.cpu` does: a CFS quota on a
# cgroup of its own (cgroup v1's cpu controller, or cgroup v2's cpu.max), so the command and
# every thread and child it starts share LIMIT of CPU time per 100 ms period.
#
# usage: hack/bench/cpu-limit.sh LIMIT NAME COMMAND...
#
#   LIMIT   Kubernetes CPU notation: 25m, 100m, 500m, 1, 1.5
#   NAME    the cgroup's name under database-operator-bench/ (one per measurement; reused
#           names get the new limit)
#
# The script moves itself into the cgroup and then execs COMMAND, so COMMAND keeps this
# process's pid (the benchmark's probe reads its CPU time and peak RSS from /proc/PID). It
# needs root, or write access to the cgroup hierarchy. `cpu-limit.sh --remove NAME` removes
# the cgroup once nothing runs in it.
set -euo pipefail

v1=/sys/fs/cgroup/cpu
v2=/sys/fs/cgroup
if [ -f "$v1/cpu.cfs_quota_us" ]; then
  parent=$v1/database-operator-bench
elif [ -f "$v2/cgroup.controllers" ]; then
  parent=$v2/database-operator-bench
else
  echo "cpu-limit.sh: no cgroup cpu controller found (neither $v1 nor a cgroup v2 hierarchy at $v2)" >&2
  exit 1
fi

if [ "${1:-}" = "--remove" ]; then
  rmdir "$parent/${2:?usage: cpu-limit.sh --remove NAME}" 2>/dev/null || true
  exit 0
fi
[ $# -ge 3 ] || { echo "usage: cpu-limit.sh LIMIT NAME COMMAND..." >&2; exit 2; }
limit=$1 name=$2
shift 2

period=100000
# Microseconds of CPU per period: 25m -> 2500, 1.5 -> 150000.
quota=$(python3 -c '
import sys
text = sys.argv[1]
cores = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
if cores <= 0:
    sys.exit("cpu-limit.sh: the limit must be positive, not " + text)
print(max(1000, round(cores * int(sys.argv[2]))))' "$limit" "$period")

group=$parent/$name
mkdir -p "$group"
if [ "$parent" = "$v1/database-operator-bench" ]; then
  echo "$period" >"$group/cpu.cfs_period_us"
  echo "$quota" >"$group/cpu.cfs_quota_us"
else
  # cgroup v2: the cpu controller must be enabled for the parent's children.
  grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu >"$v2/cgroup.subtree_control"
  grep -qw cpu "$parent/cgroup.subtree_control" || echo +cpu >"$parent/cgroup.subtree_control"
  echo "$quota $period" >"$group/cpu.max"
fi
echo $$ >"$group/cgroup.procs"
exec "$@"
