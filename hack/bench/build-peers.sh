#!/usr/bin/env bash
# Builds the peers of the end-to-end reconcile benchmark into target/peers/ (once; a second run
# only rebuilds what changed):
#   sample-controller-peer   k8s.io/sample-controller from the Go module proxy (wrapper module)
#   controller-runtime-peer  benches/peers/controller-runtime (Go, controller-runtime)
#   kube-runtime/release/kube-runtime-peer   benches/peers/kube-runtime (Rust, kube-runtime)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$root/target/peers
mkdir -p "$out"
log() { printf '[build-peers] %s\n' "$*" >&2; }

# sample-controller's controller.go is in package main, which cannot be imported: compile it
# unchanged beside our main.go (upstream's, plus flags for workers and client QPS/burst).
(
  cd "$root/benches/peers/sample-controller"
  # `go list -m` prints no directory for a module that is not in the module cache yet.
  go mod download k8s.io/sample-controller
  dir=$(go list -m -f '{{.Dir}}' k8s.io/sample-controller)
  [ -n "$dir" ] || { log "cannot locate k8s.io/sample-controller in the module cache"; exit 1; }
  install -m 0644 "$dir/controller.go" upstream_controller.go
  log "sample-controller ($(go list -m -f '{{.Path}} {{.Version}}' k8s.io/sample-controller))"
  go build -o "$out/sample-controller-peer" .
  install -m 0644 "$dir/artifacts/examples/crd-status-subresource.yaml" "$out/sample-controller-crd.yaml"
)
(
  cd "$root/benches/peers/controller-runtime"
  log "controller-runtime ($(go list -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/controller-runtime))"
  go build -o "$out/controller-runtime-peer" .
)
log "kube-runtime (kube $(grep -A1 '^name = "kube-runtime"' "$root/benches/peers/kube-runtime/Cargo.lock" | sed -n 's/version = "\(.*\)"/\1/p'))"
CARGO_TARGET_DIR=$out/kube-runtime cargo build --release --locked -q \
  --manifest-path "$root/benches/peers/kube-runtime/Cargo.toml"
