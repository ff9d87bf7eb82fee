#!/usr/bin/env bash
# The whole test suite, as CI runs it: builds what is missing (the control plane with its real
# node's parts, helm, SeaweedFS and promtool into ~/.cache, the operator's image, the engines'
# images, the crate), starts a control plane of its own with kwok nodes and a real node
# (NODES=kwok,real: the tests' pods go to kwok unless a test needs them to run), imports the
# images into the real node's containerd, runs every `cargo test` target (unit, integration, end-to-end,
# installation, doc) against it, and stops the plane even when tests fail; then the tests of
# a plane of three real nodes (tests/nodes/: REAL_NODES=3 NODES=real, a plane of their own,
# since they freeze and kill nodes; about five minutes); then the fault
# suite (hack/faults.sh, about five minutes, on a plane of its own) and tiny runs of the
# end-to-end benchmark against its peers and of the scale ladder (hack/bench/e2e.sh and
# hack/bench/scale.sh with N=50: their builds and harness, not their figures).
#
# usage: hack/test.sh [extra cargo test args...]
#
#   FAULTS=0   skip the fault suite (hack/test-matrix.sh does, on every version)
#   BENCH=0    skip the tiny benchmark runs (hack/test-matrix.sh does too)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" test

# A plane of the suite's own, so a developer's running plane is left alone.
export PLANE=${PLANE:-test-$$}
stop_plane_on_exit

log "building the control plane (cached under ~/.cache after the first run)"
hack/control-plane/build.sh >/dev/null
log "building helm (cached under ~/.cache after the first run)"
HELM=$(hack/helm.sh | tail -n 1)
export HELM
# The S3-compatible object store the bucket tests back up to (tests/e2e/buckets.rs).
log "building SeaweedFS (cached under ~/.cache after the first run)"
WEED=$(hack/seaweedfs.sh | tail -n 1)
export WEED
# promtool checks the chart's alerting rules and runs their unit tests (tests/monitoring.rs).
log "building promtool (cached under ~/.cache after the first run)"
PROMTOOL=$(hack/promtool.sh | tail -n 1)
export PROMTOOL
# The images the real node runs: the operator's (the installation tests run it as its Pod)
# and the engines' (built from Debian's packages: no registry is reachable here).
log "building the operator's image"
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/hack/image/containers.conf}
hack/image.sh >/dev/null
log "building the engines' images (cached under ~/.cache after the first run)"
hack/engine-images.sh build >/dev/null

# Compile the tests while the plane starts: starting is mostly waiting on the apiserver.
log "starting control plane '$PLANE' (kwok nodes and a real node) and compiling the tests"
NODES=kwok,real hack/control-plane.sh up >"${TMPDIR:-/tmp}/control-plane-$PLANE.out" 2>&1 &
up_pid=$!
cargo test --all-targets --no-run
cargo test --test nodes --no-run
if ! wait "$up_pid"; then
  cat "${TMPDIR:-/tmp}/control-plane-$PLANE.out" >&2
  log "the control plane did not start"
  exit 1
fi
eval "$(hack/control-plane.sh env)"
log "importing the images into the real node's containerd"
IMAGE=$(hack/image.sh | tail -n 1)
export IMAGE
hack/engine-images.sh import "$CONTAINERD_ADDRESS" >/dev/null

log "running cargo test"
cargo test --all-targets "$@"
cargo test --doc

hack/control-plane.sh down >/dev/null 2>&1 || true
export PLANE=$PLANE-nodes
log "starting control plane '$PLANE' (three real nodes) for the tests of tests/nodes/"
if ! REAL_NODES=3 NODES=real hack/control-plane.sh up >"${TMPDIR:-/tmp}/control-plane-$PLANE.out" 2>&1; then
  cat "${TMPDIR:-/tmp}/control-plane-$PLANE.out" >&2
  die "the plane of three real nodes did not start"
fi
eval "$(hack/control-plane.sh env)"
log "importing the postgres image (all these tests run) into every node's containerd"
for address in $CONTAINERD_ADDRESSES; do ENGINE_IMAGES=postgres-17 hack/engine-images.sh import "$address" >/dev/null; done
log "running the tests of a plane of three real nodes (cargo test --test nodes)"
cargo test --test nodes
hack/control-plane.sh down >/dev/null 2>&1 || true

if [ "${FAULTS:-1}" != 0 ]; then
  log "running the fault suite (hack/faults.sh)"
  hack/control-plane.sh down >/dev/null 2>&1 || true
  PLANE=faults-$$ BIN=target/image/context/database-operator hack/faults.sh
fi
if [ "${BENCH:-1}" != 0 ]; then
  # The benchmark's path, proven on every run: its builds (the peers from the Go module proxy
  # and crates.io) and one tiny run of every implementation. Figures this small are not
  # figures (docs/benchmarks.md has those); a failing run is a red test command. So the runs
  # measure what this command built already and build the rest cheaply: the image's static
  # release binary as both database-operator and database-operator-image, and the probe, the
  # bare writer and the kube-runtime peer in the dev profile, beside the test build
  # (docs/benchmarks-e2e.md, "Builds and profiles"; published runs set none of this).
  (
    export OPERATOR=target/x86_64-unknown-linux-gnu/release/database-operator
    export OPERATOR_IMAGE=target/image/context/database-operator TOOLS_PROFILE=dev PLANE=bench-$$
    log "running a tiny benchmark comparison (hack/bench/e2e.sh: N=50, every implementation once)"
    N=50 SWEEP="" RUNS=1 REPEAT=0 OUT=target/bench/ci SVG=target/bench/ci/reconcile-throughput.svg \
      hack/bench/e2e.sh
    # The ladder's Databases arrive at a fixed pace here (its PACE); the seeded start is the
    # comparison's above.
    log "running a tiny scale ladder (hack/bench/scale.sh: N=50 created at 25/s, a forced relist, every implementation once)"
    LADDER=50 PEER_N=50 PACE=25 OUT=target/bench/ci-scale SVG=target/bench/ci-scale/scale.svg \
      hack/bench/scale.sh
  )
fi
log "all tests passed"
