//! The `database-operator` binary: parse flags, set up logging, run until a signal.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use database_operator::cli::{Cli, Command, LogFormat, bind_address, log_filter};
use database_operator::{api, bucket, operator};
use operator_runtime::client;
use operator_runtime::ops::{self, leader};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Crd) => {
            print!("{}---\n{}", api::crd_yaml(), api::backup_crd_yaml());
            return ExitCode::SUCCESS;
        }
        Some(Command::Bucket { command }) => return transfer(*command),
        Some(Command::Run) | None => {}
    }
    let args = cli.run_args();
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = match log_filter(args.log_level.as_deref(), rust_log.as_deref()) {
        Ok(filter) => EnvFilter::new(filter),
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    match args.log_format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => tracing_subscriber::fmt().json().with_env_filter(filter).with_writer(std::io::stderr).init(),
    }
    let runtime = match args.runtime_threads {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        threads => tokio::runtime::Builder::new_multi_thread().worker_threads(threads.into()).enable_all().build(),
    };
    let result = match runtime {
        Ok(runtime) => runtime.block_on(run(args)),
        Err(err) => Err(anyhow::Error::new(err).context("starting the async runtime")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

/// `database-operator bucket put|get`, on a runtime of one thread; the error on stderr.
fn transfer(command: bucket::Command) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    match runtime.map(|runtime| runtime.block_on(bucket::run(command))) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(err)) => {
            eprintln!("error: {err}");
            ExitCode::from(err.exit_code())
        }
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: database_operator::cli::RunArgs) -> anyhow::Result<()> {
    let request_metrics = client::RequestMetrics::default();
    let limits = client::Limits { qps: args.kube_api_qps, burst: args.kube_api_burst };
    let (config, source) = client::load_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    info!(version = database_operator::cli::VERSION, "using the {source}");
    // Leader election gets a client of its own: its renewals never wait behind the
    // reconciles' requests, nor sit out a 429's retries past the renew deadline.
    let lease_client = args.leader_elect.then(|| client::for_leases(config.clone(), &request_metrics)).transpose()?;
    // Events too, with the same limits and a bucket of their own (as controller-runtime's
    // recorder has its own client): a burst of events never delays a reconcile, nor the reverse.
    let events_client = client::from_config(config.clone(), limits, &request_metrics)?;
    // The reviews of /metrics callers too, with a small budget of their own: a flood of
    // made-up tokens spends it, never the reconciles'.
    let review_client = client::from_config(config.clone(), operator::REVIEW_LIMITS, &request_metrics)?;
    let client = client::from_config(config, limits, &request_metrics)?;
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "database-operator".to_string());
    // Unique per process, like client-go's hostname + "_" + uuid: a restarted pod is a new
    // candidate, never mistaken for the old leader.
    let identity = format!("{host}_{:016x}", rand::random::<u64>());
    let leader_election = args.leader_elect.then(|| {
        let namespace = args.leader_election_namespace.clone().unwrap_or_else(own_namespace);
        let mut config = leader::Config::new(&args.leader_election_id, &namespace, &identity);
        config.lease_duration = args.leader_elect_lease_duration;
        config.renew_deadline = args.leader_elect_renew_deadline;
        config.retry_period = args.leader_elect_retry_period;
        config
    });
    if let Some(config) = &leader_election {
        config.validate()?;
    }
    let options = operator::Options {
        namespaces: args.namespace.clone(),
        workers: args.workers,
        priority_queue: args.priority_queue,
        resync_period: (!args.resync_period.is_zero()).then_some(args.resync_period),
        cache_sync_timeout: std::time::Duration::from_secs(120),
        identity,
        metrics_address: bind_address(&args.metrics_bind_address)
            .map_err(|e| anyhow::anyhow!("--metrics-bind-address {e}"))?,
        metrics_secure: args.metrics_secure.then(|| match &args.metrics_cert_path {
            Some(dir) => ops::tls::Source::Files {
                cert: dir.join(&args.metrics_cert_name),
                key: dir.join(&args.metrics_cert_key),
            },
            None => ops::tls::Source::SelfSigned,
        }),
        health_address: bind_address(&args.health_probe_bind_address)
            .map_err(|e| anyhow::anyhow!("--health-probe-bind-address {e}"))?,
        leader_election,
        lease_client,
        events_client: Some(events_client),
        review_client: Some(review_client),
        request_metrics: Some(request_metrics),
        rollout_marker: args.bench_rollout_marker.clone().filter(|marker| !marker.is_empty()),
        backup_image: args.backup_image.clone().filter(|image| !image.is_empty()),
    };

    let cancel = CancellationToken::new();
    let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let operator = tokio::spawn(operator::run(client, options, cancel.clone()));
    tokio::pin!(operator);
    tokio::select! {
        result = &mut operator => return Ok(result.context("the operator task failed")??),
        _ = terminate.recv() => info!("SIGTERM: shutting down"),
        _ = interrupt.recv() => info!("SIGINT: shutting down"),
    }
    cancel.cancel();
    // A second signal, or the grace period running out, exits at once.
    tokio::select! {
        result = &mut operator => Ok(result.context("the operator task failed")??),
        _ = terminate.recv() => anyhow::bail!("second signal: exiting without waiting for in-flight reconciles"),
        _ = interrupt.recv() => anyhow::bail!("second signal: exiting without waiting for in-flight reconciles"),
        _ = tokio::time::sleep(args.graceful_shutdown_timeout) => {
            warn!(timeout = ?args.graceful_shutdown_timeout, "in-flight reconciles did not finish within --graceful-shutdown-timeout");
            anyhow::bail!("graceful shutdown timed out")
        }
    }
}

/// The pod's namespace: POD_NAMESPACE (the downward API), else the service account's, else
/// "default".
fn own_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok())
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_string())
}
