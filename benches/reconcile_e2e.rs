//! The end-to-end benchmarks, as a `cargo bench` target.
//!
//! `cargo bench --bench reconcile_e2e` runs `hack/bench/e2e.sh` (which builds what is missing,
//! starts its own control plane `PLANE=bench`, measures database-operator, its peers and the
//! bare writer, prints the table, writes docs/reconcile-throughput.svg and stops the plane)
//! and streams its output. `E2E_N=500 cargo bench --bench reconcile_e2e` is a quick run: N
//! objects and no worker sweep. The script's own variables (`N`, `WORKERS`, `SWEEP`, `QPS`,
//! `BURST`) pass through.
//!
//! `E2E_SCENARIO` picks another scenario of docs/benchmarks.md, at a quick size unless
//! `E2E_FULL=1` asks for the script's own (which takes up to a few hours):
//!
//! | `E2E_SCENARIO` | script | quick size |
//! |---|---|---|
//! | `reconcile` (default) | `hack/bench/e2e.sh` | the full run, or `E2E_N` |
//! | `scale` | `hack/bench/scale.sh` | N = 1,000, the peers at 1,000 (full: 1,000-20,000, the peers at 10,000) |
//! | `rollout` | `hack/bench/rollout.sh` | N = 500, 10 arrivals (full: 2,000, 40) |
//! | `workers` | `hack/bench/workers.sh` | N = 100, round trips 0 and 20 ms, 1, 4 and 16 workers |
//!
//! The quick sizes write their plots under target/bench, never over the ones in docs/.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing: the benchmarks
//! take many minutes and need a control plane, which a test run must not start.

use std::process::{Command, ExitCode};

/// The script of a scenario, and the variables of its quick size.
fn scenario(name: &str) -> Option<(&'static str, &'static [(&'static str, &'static str)])> {
    Some(match name {
        "reconcile" => ("e2e.sh", &[]),
        "scale" => ("scale.sh", &[("LADDER", "1000"), ("PEER_N", "1000"), ("SVG", "target/bench/scale/scale.svg")]),
        "rollout" => ("rollout.sh", &[("N", "500"), ("ARRIVALS", "10")]),
        "workers" => (
            "workers.sh",
            &[("N", "100"), ("RTTS", "0 20"), ("WORKER_COUNTS", "1 4 16"), ("SVG", "target/bench/workers/workers.svg")],
        ),
        _ => return None,
    })
}

fn main() -> ExitCode {
    if !std::env::args().any(|arg| arg == "--bench") {
        return ExitCode::SUCCESS;
    }
    let name = std::env::var("E2E_SCENARIO").unwrap_or_else(|_| "reconcile".into());
    let Some((file, quick)) = scenario(&name) else {
        eprintln!("reconcile_e2e: unknown E2E_SCENARIO {name:?} (reconcile, scale, rollout or workers)");
        return ExitCode::FAILURE;
    };
    let script = format!("{}/hack/bench/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new("bash");
    command.arg(&script);
    if std::env::var("E2E_FULL").as_deref() != Ok("1") {
        // The caller's own variables win over the quick size.
        command.envs(quick.iter().filter(|(key, _)| std::env::var_os(key).is_none()).copied());
    }
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
