#!/usr/bin/env bash
# A stand-in for the kubelet on the local control plane: its kwok nodes only pretend to run the
# Pods scheduled on them, and this runs a Pod's containers for real, with podman, as the
# installation tests do (examples/kubelet/: the ServiceAccount's token and CA, env with
# fieldRefs, securityContext, limits, the host's network; a stop is SIGTERM, then SIGKILL after
# the Pod's grace period).
#
# usage: hack/kubelet.sh start -n NAMESPACE -l SELECTOR [-c CONTAINER] [--timeout 120s]
#        hack/kubelet.sh stop  -n NAMESPACE [-l SELECTOR]
#        hack/kubelet.sh logs  -n NAMESPACE [-l SELECTOR] [-c CONTAINER] [-f]
#
# e.g., after `helm install database-operator charts/database-operator -n database-operator-system ...`:
#   hack/kubelet.sh start -n database-operator-system -l app.kubernetes.io/name=database-operator
#
# `start` waits until a Pod matching the selector is scheduled, starts its containers detached,
# prints their podman names on its last lines and exits: they run until `stop`. A container
# already running is left alone. `stop` stops and removes the containers of the matching Pods
# (every one it started in the namespace without -l) and of Pods that are gone.
#
#   KUBECONFIG       the cluster: for the local plane, eval "$(hack/control-plane.sh env)"
#   CONTAINERS_CONF  podman's settings (default hack/image/containers.conf: runc, no default
#                    ulimits, which podman needs on this project's machines)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log() { printf '[kubelet] %s\n' "$*" >&2; }

export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/hack/image/containers.conf}
log "running examples/kubelet (cargo run --example kubelet: built on first use, in a minute or two)"
exec cargo run --quiet --example kubelet -- "$@"
