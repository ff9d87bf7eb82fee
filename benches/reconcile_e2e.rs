//! The end-to-end reconcile benchmark, as a `cargo bench` target.
//!
//! `cargo bench --bench reconcile_e2e` runs `hack/bench/e2e.sh` (which builds what is missing,
//! starts its own control plane `PLANE=bench`, measures database-operator, its peers and the
//! bare writer, prints the table, writes docs/reconcile-throughput.svg and stops the plane)
//! and streams its output. `E2E_N=500 cargo bench --bench reconcile_e2e` is a quick run: N
//! objects and no worker sweep. The script's own variables (`N`, `WORKERS`, `SWEEP`, `QPS`,
//! `BURST`) pass through.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing: the benchmark
//! takes many minutes and needs a control plane, which a test run must not start.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    if !std::env::args().any(|arg| arg == "--bench") {
        return ExitCode::SUCCESS;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/bench/e2e.sh");
    let mut command = Command::new("bash");
    command.arg(script);
    if let Ok(n) = std::env::var("E2E_N") {
        command.env("N", n).env("SWEEP", std::env::var("SWEEP").unwrap_or_default());
    }
    match command.status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("reconcile_e2e: {script} failed: {status}");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("reconcile_e2e: cannot run {script}: {err}");
            ExitCode::FAILURE
        }
    }
}
