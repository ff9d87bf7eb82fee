//! Command-line flags, named like controller-runtime's (`--kubeconfig`, `--leader-elect`,
//! `--metrics-bind-address`, `--health-probe-bind-address`) so a Kubernetes user finds
//! what they expect. Every flag also reads an environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// A Kubernetes operator for Database resources (example.com/v1).
#[derive(Debug, Parser)]
#[command(name = "database-operator", version, about, long_about = None)]
pub struct Cli {
    /// What to do; `run` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Flags of `run` (global: they may come before or after the subcommand).
    #[command(flatten)]
    pub run: RunArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator (the default).
    Run,
    /// Print the Database CustomResourceDefinition as YAML.
    Crd,
}

/// The log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// The flags of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Path to a kubeconfig. Only required if out-of-cluster; without it, the in-cluster
    /// configuration is used, else the default kubeconfig (~/.kube/config).
    #[arg(long, env = "KUBECONFIG", global = true)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use.
    #[arg(long, env = "KUBE_CONTEXT", global = true)]
    pub context: Option<String>,

    /// Watch and manage Databases in this namespace only (default: all namespaces).
    #[arg(long, env = "WATCH_NAMESPACE", global = true)]
    pub namespace: Option<String>,

    /// Number of Databases reconciled in parallel.
    #[arg(long, env = "WORKERS", default_value_t = 2, global = true)]
    pub workers: usize,

    /// Threads of the async runtime. 1 (the default) runs everything on one thread: the
    /// operator waits on the network almost all the time, and one thread saves the wake-ups
    /// between threads (about 10 % of its CPU in the end-to-end benchmark). Raise it when
    /// decoding a very large cluster's lists and watches outgrows one core.
    #[arg(long, env = "RUNTIME_THREADS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..), global = true)]
    pub runtime_threads: u16,

    /// How often every cached Database is reconciled again even without a change
    /// (e.g. "10h", "30m"; "0s" disables it).
    #[arg(long, env = "RESYNC_PERIOD", default_value = "10h", value_parser = humantime::parse_duration, global = true)]
    pub resync_period: Duration,

    /// Queries per second to the Kubernetes API (client-side throttling; 0 disables it).
    #[arg(long, env = "KUBE_API_QPS", default_value_t = 20.0, global = true)]
    pub kube_api_qps: f32,

    /// Burst of queries to the Kubernetes API above --kube-api-qps.
    #[arg(long, env = "KUBE_API_BURST", default_value_t = 30, global = true)]
    pub kube_api_burst: u32,

    /// The address the metrics endpoint binds to ("0" disables it).
    #[arg(long, env = "METRICS_BIND_ADDRESS", default_value = ":8080", global = true)]
    pub metrics_bind_address: String,

    /// The address the health probe endpoints (/healthz, /readyz) bind to ("0" disables them).
    #[arg(long, env = "HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081", global = true)]
    pub health_probe_bind_address: String,

    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// Log level or filter, e.g. "info", "debug" or "info,database_operator=debug".
    #[arg(long, env = "LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,

    /// Run workers only while holding a Lease, so that several replicas can run with one
    /// active (the others keep their caches warm and take over when it goes).
    #[arg(long, env = "LEADER_ELECT", global = true)]
    pub leader_elect: bool,

    /// The name of the leader election Lease.
    #[arg(long, env = "LEADER_ELECTION_ID", default_value = "database-operator.example.com", global = true)]
    pub leader_election_id: String,

    /// The namespace of the leader election Lease (default: the pod's namespace, from
    /// POD_NAMESPACE or the service account, else "default").
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", global = true)]
    pub leader_election_namespace: Option<String>,

    /// How long a non-renewed Lease keeps other replicas from taking over.
    #[arg(long, env = "LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration, global = true)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader tries to renew the Lease before it stops reconciling.
    #[arg(long, env = "LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    pub leader_elect_renew_deadline: Duration,

    /// How often replicas try to acquire or renew the Lease.
    #[arg(long, env = "LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = humantime::parse_duration, global = true)]
    pub leader_elect_retry_period: Duration,

    /// How long in-flight reconciles may run after SIGTERM before the operator exits.
    #[arg(long, env = "GRACEFUL_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    pub graceful_shutdown_timeout: Duration,
}

impl Cli {
    /// The flags of `run`, wherever on the command line they were given.
    pub fn run_args(&self) -> RunArgs {
        self.run.clone()
    }
}

/// Parses a controller-runtime style bind address: ":8080" (all interfaces), "host:port",
/// or "0" (disabled, `None`).
pub fn bind_address(value: &str) -> Result<Option<SocketAddr>, String> {
    match value {
        "0" | "" => Ok(None),
        _ if value.starts_with(':') => {
            format!("0.0.0.0{value}").parse().map(Some).map_err(|e| format!("{value:?}: {e}"))
        }
        _ => value.parse().map(Some).map_err(|e| format!("{value:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_with_controller_runtime_names() {
        let cli = Cli::try_parse_from([
            "database-operator",
            "run",
            "--workers=8",
            "--kube-api-qps=50",
            "--kube-api-burst=100",
            "--resync-period=30m",
            "--metrics-bind-address=127.0.0.1:9090",
        ])
        .unwrap();
        let run = cli.run_args();
        assert_eq!(run.workers, 8);
        assert_eq!(run.resync_period, Duration::from_secs(1800));
        assert_eq!(bind_address(&run.metrics_bind_address).unwrap(), Some("127.0.0.1:9090".parse().unwrap()));
    }

    #[test]
    fn run_is_the_default_subcommand() {
        let cli = Cli::try_parse_from(["database-operator", "--workers=3"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.run_args().workers, 3);
    }

    #[test]
    fn the_runtime_runs_on_one_thread_unless_asked_and_never_on_none() {
        assert_eq!(Cli::try_parse_from(["database-operator"]).unwrap().run_args().runtime_threads, 1);
        let four = Cli::try_parse_from(["database-operator", "--runtime-threads=4"]).unwrap();
        assert_eq!(four.run_args().runtime_threads, 4);
        let err = Cli::try_parse_from(["database-operator", "--runtime-threads=0"]).unwrap_err();
        assert!(err.to_string().contains("--runtime-threads"), "{err}");
    }

    #[test]
    fn bind_address_zero_disables_and_colon_port_means_all_interfaces() {
        assert_eq!(bind_address("0").unwrap(), None);
        assert_eq!(bind_address(":8081").unwrap(), Some("0.0.0.0:8081".parse().unwrap()));
        assert!(bind_address("nonsense").is_err());
    }
}
