//! What every micro-benchmark binary shares: criterion's settings, and the table each one prints
//! at the end (the command that produced it, then one row per benchmark it ran).
//!
//! The table is read back from criterion's own results (`<target>/criterion/**/new/`), so it
//! shows the numbers criterion printed, gathered in one place: time per iteration (criterion's
//! slope estimate, or its mean where it sampled flat) and, for benchmarks with a throughput,
//! elements per second with criterion's 95% confidence interval. Rows are machine-readable:
//! `| id | time | per second | low | high |`, numbers without separators.

#![allow(dead_code)] // Each bench binary uses part of it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::Duration;

use criterion::Criterion;
use serde_json::Value;

/// Counts finished work down to zero and wakes the thread that made it then, like a Go
/// `sync.WaitGroup` that workers call `Done` on once per item.
#[derive(Debug)]
pub(crate) struct Countdown {
    remaining: AtomicUsize,
    waiter: Thread,
}

impl Countdown {
    /// A countdown at zero that [`wait`](Self::wait)s on the calling thread.
    pub(crate) fn new() -> Self {
        Countdown { remaining: AtomicUsize::new(0), waiter: std::thread::current() }
    }

    /// Expects `count` more [`tick`](Self::tick)s. Call it before the work that ticks starts.
    pub(crate) fn start(&self, count: usize) {
        self.remaining.fetch_add(count, Ordering::AcqRel);
    }

    /// One item finished.
    pub(crate) fn tick(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.waiter.unpark();
        }
    }

    /// Parks the thread that made the countdown until it reaches zero.
    pub(crate) fn wait(&self) {
        while self.remaining.load(Ordering::Acquire) != 0 {
            std::thread::park();
        }
    }
}

/// Benchmark ids run by this process, in the order they ran.
static RAN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Criterion with this crate's defaults: 10 samples of about 2.5 s after 1 s of warm-up, no
/// plots. Command-line flags (`--measurement-time`, `--sample-size`, a filter...) still win.
pub(crate) fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_millis(2500))
        .without_plots()
        .configure_from_args()
}

/// True when this run measures (`cargo bench`), false in criterion's test mode
/// (`cargo test --all-targets` runs every benchmark once) and when listing.
pub(crate) fn measuring() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|arg| arg == flag);
    has("--bench") && !has("--test") && !has("--list") && !args.iter().any(|arg| arg.starts_with("--profile-time"))
}

/// True in criterion's test mode (`cargo test --all-targets` runs every benchmark once,
/// unoptimized): benchmarks then use small inputs.
pub(crate) fn testing() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|arg| arg == flag);
    !has("--bench") || has("--test")
}

/// Notes that benchmark `id` (criterion's full id, `group/function/parameter`) ran, so the final
/// table shows it. Call it from inside the benchmark closure, which criterion skips when a filter
/// excludes the benchmark.
pub(crate) fn ran(id: &str) {
    let mut ran = RAN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !ran.iter().any(|seen| seen == id) {
        ran.push(id.to_string());
    }
}

/// The command line that ran this benchmark binary, as a user would type it.
pub(crate) fn command(bench: &str) -> String {
    let args: Vec<String> = std::env::args().skip(1).filter(|arg| arg != "--bench").collect();
    if args.is_empty() {
        format!("cargo bench --bench {bench}")
    } else {
        format!("cargo bench --bench {bench} -- {}", args.join(" "))
    }
}

/// Prints the table of everything that ran (see the module docs). Does nothing in test mode.
pub(crate) fn print_table(bench: &str) {
    if !measuring() {
        return;
    }
    let ran = RAN.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    let results = read_results(&output_directory());
    println!();
    println!("{}", machine());
    println!("$ {}", command(bench));
    println!();
    println!("| benchmark | time per iteration | per second | per second, low | per second, high |");
    println!("|---|---:|---:|---:|---:|");
    for id in &ran {
        match results.iter().find(|result| &result.id == id) {
            Some(result) => {
                let rate = |seconds: f64| result.elements.map_or(String::from("-"), |n| format!("{:.0}", n / seconds));
                println!(
                    "| {} | {} | {} | {} | {} |",
                    id,
                    human(result.seconds),
                    rate(result.seconds),
                    rate(result.high_seconds),
                    rate(result.low_seconds)
                );
            }
            None => println!("| {id} | (no criterion result found) | - | - | - |"),
        }
    }
    println!();
}

/// One line about the machine: cores, CPU model, load (the numbers are only as quiet as it was).
pub(crate) fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| String::from("unknown CPU"));
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|load| load.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!("machine: {cores} cores, {model}; load average at the end: {load}")
}

fn human(seconds: f64) -> String {
    match seconds {
        s if s >= 1.0 => format!("{s:.3} s"),
        s if s >= 1e-3 => format!("{:.3} ms", s * 1e3),
        s if s >= 1e-6 => format!("{:.3} µs", s * 1e6),
        s => format!("{:.1} ns", s * 1e9),
    }
}

struct Measured {
    id: String,
    elements: Option<f64>,
    seconds: f64,
    low_seconds: f64,
    high_seconds: f64,
}

/// Where criterion writes: `$CARGO_TARGET_DIR/criterion`, else the workspace's target directory.
fn output_directory() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
        manifest.join("target")
    });
    target.join("criterion")
}

fn read_results(directory: &Path) -> Vec<Measured> {
    let mut results = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    let mut seen = BTreeSet::new();
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name == "new") {
                    if let Some(result) = read_result(&path)
                        && seen.insert(result.id.clone())
                    {
                        results.push(result);
                    }
                } else if path.file_name().is_none_or(|name| name != "base" && name != "change") {
                    pending.push(path);
                }
            }
        }
    }
    results
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn read_result(dir: &Path) -> Option<Measured> {
    let benchmark = read_json(&dir.join("benchmark.json"))?;
    let estimates = read_json(&dir.join("estimates.json"))?;
    let id = benchmark.get("full_id")?.as_str()?.to_string();
    let elements = benchmark.get("throughput").and_then(|t| t.get("Elements")).and_then(Value::as_f64);
    // Criterion reports the slope when it sampled linearly, the mean when it sampled flat.
    let estimate = estimates.get("slope").filter(|slope| !slope.is_null()).or_else(|| estimates.get("mean"))?;
    let nanos = |value: &Value| value.as_f64().map(|ns| ns / 1e9);
    let interval = estimate.get("confidence_interval")?;
    Some(Measured {
        id,
        elements,
        seconds: nanos(estimate.get("point_estimate")?)?,
        low_seconds: nanos(interval.get("lower_bound")?)?,
        high_seconds: nanos(interval.get("upper_bound")?)?,
    })
}
