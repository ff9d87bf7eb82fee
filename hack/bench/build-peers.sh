#!/usr/bin/env bash
# Builds the peers of the end-to-end reconcile benchmark into target/peers/ (once; a second run
# only rebuilds what changed):
#   sample-controller-peer   k8s.io/sample-controller from the Go module proxy (wrapper module)
#   controller-runtime-peer  benches/peers/controller-runtime (Go, controller-runtime)
#   kube-runtime/release/kube-runtime-peer   benches/peers/kube-runtime (Rust, kube-runtime);
#                            with TOOLS_PROFILE=dev (a check of the harness, hack/bench/tools.sh)
#                            target/debug/kube-runtime-peer instead
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" build-peers
out=$root/target/peers
mkdir -p "$out"
# shellcheck source=hack/bench/tools.sh
. hack/bench/tools.sh

# Both Go peers build with -trimpath, as hack/control-plane/build.sh builds the plane: the flag
# is part of every package's key in Go's build cache, so with it the peers reuse the standard
# library and every module the plane compiled at the same version (client-go, apimachinery and
# api v0.37.2 and their dependencies; left to compile: controller-runtime's and
# sample-controller's own packages and a few others) instead of compiling about 600 packages
# again. It only changes the file names recorded in the binaries.
#
# sample-controller's controller.go is in package main, which cannot be imported: compile it
# unchanged beside our main.go (upstream's, plus flags for workers and client QPS/burst).
(
  cd "$root/benches/peers/sample-controller"
  # `go list -m` prints no directory for a module that is not in the module cache yet.
  go mod download k8s.io/sample-controller
  dir=$(go list -m -f '{{.Dir}}' k8s.io/sample-controller)
  [ -n "$dir" ] || die "cannot locate k8s.io/sample-controller in the module cache"
  install -m 0644 "$dir/controller.go" upstream_controller.go
  log "sample-controller ($(go list -m -f '{{.Path}} {{.Version}}' k8s.io/sample-controller))"
  go build -trimpath -o "$out/sample-controller-peer" .
  install -m 0644 "$dir/artifacts/examples/crd-status-subresource.yaml" "$out/sample-controller-crd.yaml"
)
(
  cd "$root/benches/peers/controller-runtime"
  log "controller-runtime ($(go list -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/controller-runtime))"
  go build -trimpath -o "$out/controller-runtime-peer" .
)
log "kube-runtime (kube $(grep -A1 '^name = "kube-runtime"' "$root/benches/peers/kube-runtime/Cargo.lock" | sed -n 's/version = "\(.*\)"/\1/p'), $TOOLS_PROFILE profile)"
CARGO_TARGET_DIR=$root/$kube_runtime_target cargo build --profile "$TOOLS_PROFILE" --locked -q \
  --manifest-path "$root/benches/peers/kube-runtime/Cargo.toml"
[ -x "$kube_runtime_peer" ] || die "the build left no $kube_runtime_peer"
log "built"
