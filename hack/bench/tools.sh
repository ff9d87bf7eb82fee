# shellcheck shell=bash disable=SC2034  # the variables are for the scripts that source this file
# Sourced by the benchmark scripts (hack/bench/e2e.sh, scale.sh, rollout.sh, workers.sh and
# build-peers.sh), from the repository's root: where the benchmark's own binaries are, and the
# cargo profile they are built with.
#
#   TOOLS_PROFILE=release  the cargo profile of this crate's benchmark tools (the examples
#                          e2e-probe, bare-writer and delay-proxy) and of the kube-runtime peer
#                          (its own workspace, benches/peers/kube-runtime). Published figures
#                          use release: fat LTO and one codegen unit in both workspaces, so the
#                          two Rust implementations compare code, not compiler settings. `dev` is
#                          for a run that only proves the harness and the builds (hack/test.sh's
#                          tiny runs): no optimisation, and the dependencies the test build
#                          already compiled (target/debug) are not compiled again; the bare
#                          writer's and the kube-runtime peer's figures then measure unoptimised
#                          code, so such a run's figures are never published.
#
# The operator is not a tool: OPERATOR names it (target/release/database-operator, the release
# profile, by default), and the scripts that measure it build it in release whatever
# TOOLS_PROFILE says.
TOOLS_PROFILE=${TOOLS_PROFILE:-release}
peers=target/peers
case $TOOLS_PROFILE in
  release)
    probe=target/release/examples/e2e-probe
    # The kube-runtime peer's release build keeps a target directory of its own: its fat-LTO
    # build is what the published figures measure, and it is built as it always was.
    kube_runtime_target=$peers/kube-runtime
    kube_runtime_peer=$kube_runtime_target/release/kube-runtime-peer ;;
  dev)
    # Cargo names the dev profile's directory "debug".
    probe=target/debug/examples/e2e-probe
    # In this crate's target directory: the crates both dependency graphs hold with the same
    # version, features and dependencies are then compiled once, by the test build that
    # precedes the tiny runs in hack/test.sh (about half of the peer's; the rest differ,
    # since kube-runtime switches on features our graph lacks, as syn's visit-mut, and cargo
    # reuses a crate only when everything it was built from is the same): the peer's cold
    # build takes about half the time (docs/benchmarks-e2e.md, "Builds and profiles").
    kube_runtime_target=target
    kube_runtime_peer=target/debug/kube-runtime-peer ;;
  *) die "TOOLS_PROFILE=$TOOLS_PROFILE: use release (published figures) or dev (a check of the harness)" ;;
esac
bare_writer=${probe%/e2e-probe}/bare-writer
delay_proxy=${probe%/e2e-probe}/delay-proxy

# build_tools OPERATOR EXAMPLE...: this crate's examples in TOOLS_PROFILE, and the operator in
# release when OPERATOR is this tree's (target/release/database-operator; another path is
# measured as it is). With both in release, one cargo invocation, as every published round was
# built: building an example brings in the dev-dependencies, whose features cargo unifies into
# the whole build (tokio's test-util among them), so the operator built alone would be another
# binary than the one the rounds measured.
build_tools() {
  local operator=$1 ours=() examples=() example
  shift
  [ "$operator" != target/release/database-operator ] || ours=(--bin database-operator)
  for example in "$@"; do examples+=(--example "$example"); done
  if [ "$TOOLS_PROFILE" = release ]; then
    cargo build --release -q "${ours[@]}" "${examples[@]}"
  else
    [ ${#ours[@]} -eq 0 ] || cargo build --release -q "${ours[@]}"
    cargo build --profile "$TOOLS_PROFILE" -q "${examples[@]}"
  fi
  [ -x "$operator" ] || die "OPERATOR=$operator: no such executable"
}

# implementation_command IMPL WORKERS KUBECONFIG [OPERATOR]: sets the array `command` to the
# command line of the implementation IMPL with WORKERS workers against KUBECONFIG, under the
# run's client limits (QPS, BURST). IMPL is database-operator (the binary OPERATOR, default
# target/release/database-operator, with no endpoints), database-operator-fifo (the same with
# one FIFO: --priority-queue=false), sample-controller, controller-runtime, kube-runtime,
# bare-writer or bare-writer-events. A script appends what it needs more (an operator's flag
# given twice takes its last value).
#
# Every implementation logs at the same level, BENCH_LOG (default error: none of them then
# logs per object; sample-controller's klog has no level above its per-sync info lines, so
# its log goes to /dev/null but for errors), and the Rust ones run RUNTIME_THREADS threads of
# async runtime (default 1, the operator's default: a current-thread runtime); the Go ones run
# Go's default, GOMAXPROCS = the cores.
BENCH_LOG=${BENCH_LOG:-error}
RUNTIME_THREADS=${RUNTIME_THREADS:-1}
implementation_command() {
  local impl=$1 workers=$2 kubeconfig=$3 operator=${4:-target/release/database-operator}
  local limits=(--kube-api-qps "$QPS" --kube-api-burst "$BURST") threads=(--runtime-threads "$RUNTIME_THREADS")
  case $impl in
    database-operator) command=("$operator" --kubeconfig "$kubeconfig" --workers "$workers" "${limits[@]}"
      --metrics-bind-address 0 --health-probe-bind-address 0 --log-level "$BENCH_LOG" "${threads[@]}") ;;
    database-operator-fifo) implementation_command database-operator "$workers" "$kubeconfig" "$operator"
      command+=(--priority-queue=false) ;;
    sample-controller) command=("$peers/sample-controller-peer" -kubeconfig "$kubeconfig" -workers "$workers"
      -kube-api-qps "$QPS" -kube-api-burst "$BURST")
      [ "$BENCH_LOG" != error ] || command+=(-logtostderr=false -log_file=/dev/null -stderrthreshold=ERROR) ;;
    controller-runtime) command=("$peers/controller-runtime-peer" --kubeconfig "$kubeconfig" --workers "$workers"
      "${limits[@]}" --zap-log-level "$BENCH_LOG") ;;
    kube-runtime) command=(env RUST_LOG="$BENCH_LOG" "$kube_runtime_peer" --kubeconfig "$kubeconfig"
      --workers "$workers" "${limits[@]}" "${threads[@]}") ;;
    bare-writer) command=("$bare_writer" --kubeconfig "$kubeconfig" --workers "$workers" "${limits[@]}"
      "${threads[@]}") ;;
    bare-writer-events) implementation_command bare-writer "$workers" "$kubeconfig"
      command+=(--events) ;;
    *) die "unknown implementation $impl" ;;
  esac
}
