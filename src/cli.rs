//! Command-line flags, named like controller-runtime's (`--kubeconfig`, `--leader-elect`,
//! `--metrics-bind-address`, `--health-probe-bind-address`) so a Kubernetes user finds
//! what they expect. Every flag also reads an environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The version `--version` prints: the crate's version and the git revision it was built from.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GIT_REVISION"), ")");

/// A Kubernetes operator for Database resources (example.com/v1).
///
/// A flag given twice takes its last value, as kubectl's and controller-runtime's flags do, so a
/// kustomize patch or a Helm value can append a flag to override one in the manifests.
#[derive(Debug, Parser)]
#[command(name = "database-operator", version = VERSION, about, long_about = None, args_override_self = true)]
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
    /// Print the CustomResourceDefinitions (Database, DatabaseBackup) as YAML.
    Crd,
    /// Move a dump to or from an S3-compatible bucket (what the backup Job and the restore run;
    /// the keys come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
    Bucket {
        /// put or get.
        #[command(subcommand)]
        command: Box<crate::bucket::Command>,
    },
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
    /// Path to a kubeconfig, or several separated by ':' (merged as kubectl merges them).
    /// Only required if out-of-cluster; without it, the in-cluster configuration is used,
    /// else the default kubeconfig (~/.kube/config).
    #[arg(long, env = "KUBECONFIG", global = true)]
    pub kubeconfig: Option<std::ffi::OsString>,

    /// The kubeconfig context to use.
    #[arg(long, env = "KUBE_CONTEXT", global = true)]
    pub context: Option<String>,

    /// Watch and manage Databases in these namespaces only, comma-separated or repeated
    /// (default: all namespaces). Each is listed and watched apart, so a Role in each is grant
    /// enough.
    #[arg(long, env = "WATCH_NAMESPACE", global = true, value_delimiter = ',', value_name = "NAMESPACE")]
    pub namespace: Vec<String>,

    /// Number of Databases reconciled in parallel.
    #[arg(long, env = "WORKERS", default_value_t = 2, global = true)]
    pub workers: usize,

    /// Queue users' changes (a new Database, a changed spec, a deleted child) ahead of work
    /// nobody waits for (the initial list after a start, resyncs, the status churn of settled
    /// Databases), giving that work one turn in five while both wait.
    /// `--priority-queue=false` keeps one FIFO, as client-go's queue.
    #[arg(long, env = "PRIORITY_QUEUE", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", global = true)]
    pub priority_queue: bool,

    /// Threads of the async runtime. 1 (the default) runs everything on one thread: the
    /// operator waits on the network almost all the time, and one thread saves the wake-ups
    /// between threads (docs/benchmarks-e2e.md measures what they cost). Raise it when decoding a very large cluster's lists and watches outgrows one
    /// core.
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
    #[arg(long, env = "METRICS_BIND_ADDRESS", default_value = ":8443", global = true)]
    pub metrics_bind_address: String,

    /// Serve /metrics over HTTPS, to callers the apiserver authenticates (TokenReview) and
    /// authorizes for `get` on the non-resource URL /metrics (SubjectAccessReview).
    /// `--metrics-secure=false` serves plain HTTP to anyone who can reach it.
    #[arg(long, env = "METRICS_SECURE", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", global = true)]
    pub metrics_secure: bool,

    /// A directory holding the metrics server's certificate and key (e.g. a mounted Secret
    /// from cert-manager); re-read when the files change. Without it, a self-signed
    /// certificate is generated at start.
    #[arg(long, env = "METRICS_CERT_PATH", global = true)]
    pub metrics_cert_path: Option<PathBuf>,

    /// The certificate's file name in --metrics-cert-path.
    #[arg(long, env = "METRICS_CERT_NAME", default_value = "tls.crt", global = true)]
    pub metrics_cert_name: String,

    /// The key's file name in --metrics-cert-path.
    #[arg(long, env = "METRICS_CERT_KEY", default_value = "tls.key", global = true)]
    pub metrics_cert_key: String,

    /// The address the health probe endpoints (/healthz, /livez, /readyz) bind to ("0" disables
    /// them).
    #[arg(long, env = "HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081", global = true)]
    pub health_probe_bind_address: String,

    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// Log level or filter, e.g. "info", "debug" or "info,database_operator=debug"
    /// (tracing's EnvFilter syntax). Unset: RUST_LOG if set, else "info". An invalid filter,
    /// here or in RUST_LOG, stops the operator with the parser's message.
    #[arg(long, env = "LOG_LEVEL", value_parser = parse_log_filter, global = true)]
    pub log_level: Option<String>,

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

    /// The image whose `database-operator bucket` moves dumps to and from S3-compatible buckets
    /// (a DatabaseBackup's spec.bucket, a restore from one): the operator's own. Without it,
    /// backups to a bucket fail and say so. The manifests and the chart set it.
    #[arg(long, env = "BACKUP_IMAGE", global = true)]
    pub backup_image: Option<String>,

    /// For the rollout benchmark only (hack/bench/rollout.sh): put the label
    /// bench.example.com/rollout with this value on every Deployment and its pod template, so a
    /// start with a new value changes every Deployment at once, as an operator upgrade that
    /// changes the pod template would.
    #[arg(long, env = "DATABASE_OPERATOR_BENCH_ROLLOUT", hide = true, global = true)]
    pub bench_rollout_marker: Option<String>,

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

/// Checks that `value` is a valid log filter (tracing's EnvFilter syntax).
pub fn parse_log_filter(value: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(value).map(|_| value.to_string()).map_err(|error| error.to_string())
}

/// The log filter to use: `--log-level` (already checked), else `rust_log` (the value of
/// RUST_LOG) if set, else "info".
///
/// # Errors
///
/// RUST_LOG is not a valid filter; the message names it and says why.
pub fn log_filter(log_level: Option<&str>, rust_log: Option<&str>) -> Result<String, String> {
    match (log_level, rust_log.filter(|value| !value.trim().is_empty())) {
        (Some(level), _) => Ok(level.to_string()),
        (None, Some(value)) => parse_log_filter(value).map_err(|error| format!("RUST_LOG={value:?}: {error}")),
        (None, None) => Ok("info".to_string()),
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
    fn a_repeated_flag_takes_its_last_value() {
        let cli =
            Cli::try_parse_from(["database-operator", "run", "--workers=2", "--leader-elect", "--workers=5"]).unwrap();
        assert_eq!(cli.run_args().workers, 5);
        let cli =
            Cli::try_parse_from(["database-operator", "--metrics-secure=false", "--metrics-secure=true"]).unwrap();
        assert!(cli.run_args().metrics_secure);
    }

    #[test]
    fn metrics_are_secure_unless_turned_off() {
        assert!(Cli::try_parse_from(["database-operator"]).unwrap().run_args().metrics_secure);
        assert!(Cli::try_parse_from(["database-operator", "--metrics-secure"]).unwrap().run_args().metrics_secure);
        let plain = Cli::try_parse_from(["database-operator", "--metrics-secure=false"]).unwrap();
        assert!(!plain.run_args().metrics_secure);
    }

    #[test]
    fn the_version_names_the_crate_version_and_the_revision() {
        let err = Cli::try_parse_from(["database-operator", "--version"]).unwrap_err();
        let printed = err.to_string();
        assert!(printed.starts_with(&format!("database-operator {} (", env!("CARGO_PKG_VERSION"))), "{printed}");
        assert!(!printed.contains("()"), "a revision or \"unknown\": {printed}");
    }

    #[test]
    fn an_invalid_log_level_is_refused_with_the_parsers_reason() {
        let error = Cli::try_parse_from(["database-operator", "--log-level=info,x=loud"]).unwrap_err();
        assert!(error.to_string().contains("--log-level"), "{error}");
        let cli = Cli::try_parse_from(["database-operator", "--log-level=info,database_operator=debug"]).unwrap();
        assert_eq!(cli.run_args().log_level.as_deref(), Some("info,database_operator=debug"));
    }

    #[test]
    fn rust_log_is_honoured_when_no_log_level_is_given_and_checked_too() {
        assert_eq!(log_filter(None, None).unwrap(), "info");
        assert_eq!(log_filter(None, Some("debug")).unwrap(), "debug");
        assert_eq!(log_filter(Some("warn"), Some("debug")).unwrap(), "warn", "the flag wins");
        let error = log_filter(None, Some("info,x=loud")).unwrap_err();
        assert!(error.starts_with("RUST_LOG=\"info,x=loud\": "), "{error}");
    }

    #[test]
    fn bind_address_zero_disables_and_colon_port_means_all_interfaces() {
        assert_eq!(bind_address("0").unwrap(), None);
        assert_eq!(bind_address(":8081").unwrap(), Some("0.0.0.0:8081".parse().unwrap()));
        assert!(bind_address("nonsense").is_err());
    }
}
