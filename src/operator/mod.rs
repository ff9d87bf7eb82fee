//! The operator assembled: a client, one informer factory, two controllers, the endpoints,
//! leadership, and a run until cancelled, then the shutdown sequence ([`run`]).
//!
//! ```text
//!         ── Database informer ──────┬─> controller "database" (queue, N workers) ─> DatabaseReconciler
//! Factory ── Deployment, Service ────┤                      ▲ reads
//!         ── claims, Secrets ────────┤   DatabaseBackup ────┘
//!         ── DatabaseBackup informer ┼─> controller "databasebackup" (queue, N workers) ─> BackupReconciler
//!         ── Job informer ───────────┘
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube_client::Client;
use tokio_util::sync::CancellationToken;
use tracing::info;

use operator_runtime::client::{self, RequestMetrics};
use operator_runtime::controller;
use operator_runtime::events::Recorder;
use operator_runtime::informer::{self, Factory};
use operator_runtime::ops::leader::{self, Elector};

use operator_runtime::ops::{self, Health};

mod controllers;
pub mod database_metrics;
mod leadership;
mod metrics;
mod shutdown;
use controllers::{Controllers, Settings};
use leadership::{Leadership, WorkerStop};
pub use metrics::Metrics;
use shutdown::Shutdown;

/// What can stop the operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No client: no usable configuration, or one a client cannot be built from.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// The controller stopped with an error.
    #[error(transparent)]
    Controller(#[from] controller::Error),
    /// This replica lost the leader Lease (it could not renew it in time): its workers are
    /// stopped. Exiting lets the pod restart as a follower (controller-runtime does the same).
    #[error("lost the leader election Lease; stopped reconciling")]
    LeadershipLost,
    /// An informer ended before it was told to (a panicking event handler or index function):
    /// its cache froze, so the operator stopped rather than reconcile from it.
    #[error("the {resource} informer stopped unexpectedly; stopped reconciling (its cache would be stale)")]
    InformerStopped {
        /// The informer's resource.
        resource: String,
    },
    /// The leader election settings are ones client-go would refuse.
    #[error(transparent)]
    LeaderElection(#[from] leader::ConfigError),
    /// The metrics endpoint's certificate could not be loaded or made.
    #[error(transparent)]
    MetricsTls(#[from] ops::tls::Error),
    /// An HTTP endpoint could not bind its address.
    #[error("cannot serve {what} on {address}: {source}; pick another address or \"0\" to disable it")]
    Bind {
        /// `metrics` or `health probes`.
        what: &'static str,
        /// The address.
        address: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
}

/// The request budget of the client that reviews `/metrics` callers ([`Options::review_client`]):
/// reviews are cached (a scraper costs two every few minutes), so only made-up tokens, which
/// miss the cache, spend it.
pub const REVIEW_LIMITS: client::Limits = client::Limits { qps: 5.0, burst: 10 };

/// How to run the operator.
#[derive(Clone)]
pub struct Options {
    /// Only these namespaces, or all when empty.
    pub namespaces: Vec<String>,
    /// Parallel reconciles.
    pub workers: usize,
    /// Whether the controllers' queues put users' changes first (see
    /// [`operator_runtime::workqueue::Priority`]); `false` keeps one FIFO.
    pub priority_queue: bool,
    /// Periodic resync of every cached object; `None` disables it.
    pub resync_period: Option<Duration>,
    /// How long to wait for the caches before failing.
    pub cache_sync_timeout: Duration,
    /// The reporting instance of events (the pod or host name).
    pub identity: String,
    /// Where to serve `/metrics`; `None` disables it.
    pub metrics_address: Option<SocketAddr>,
    /// Serve `/metrics` over HTTPS with this certificate, to callers the apiserver
    /// authenticates and authorizes ([`ops::auth`]); `None` serves plain HTTP.
    pub metrics_secure: Option<ops::tls::Source>,
    /// Where to serve `/healthz`, `/livez` and `/readyz`; `None` disables them.
    pub health_address: Option<SocketAddr>,
    /// Run workers only while holding this Lease; `None` runs them at once.
    pub leader_election: Option<leader::Config>,
    /// The client for the Lease: best one of its own ([`client::for_leases`]), so renewals
    /// never queue behind the reconciles' requests; `None` uses the shared one.
    pub lease_client: Option<Client>,
    /// The client for Events: best one of its own ([`client::from_config`] again), so events
    /// have their own request budget and never queue behind reconciles; `None` uses the shared
    /// one.
    pub events_client: Option<Client>,
    /// The client for the reviews of `/metrics` callers (TokenReviews, SubjectAccessReviews):
    /// best one of its own with a small budget ([`REVIEW_LIMITS`]), so that a flood of scrapes
    /// with made-up tokens spends that budget, never the reconciles'; `None` uses the shared
    /// one.
    pub review_client: Option<Client>,
    /// The API request metrics of the client passed to [`run`] (see [`client::from_config`]),
    /// served on `/metrics`.
    pub request_metrics: Option<RequestMetrics>,
    /// The rollout benchmark's marker on every Deployment (`--bench-rollout-marker`); `None`
    /// outside that benchmark.
    pub rollout_marker: Option<String>,
    /// The image that moves dumps to and from buckets (`--backup-image`): the operator's own.
    pub backup_image: Option<String>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("namespaces", &self.namespaces)
            .field("workers", &self.workers)
            .field("priority_queue", &self.priority_queue)
            .field("resync_period", &self.resync_period)
            .field("metrics_address", &self.metrics_address)
            .field("health_address", &self.health_address)
            .field("leader_election", &self.leader_election)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Options for watching `namespace` (or all) with `workers`, no HTTP endpoints and no
    /// resync, as a test or an embedding program wants them.
    pub fn new(namespace: Option<String>, workers: usize) -> Self {
        Self {
            namespaces: namespace.into_iter().collect(),
            workers,
            priority_queue: true,
            resync_period: None,
            cache_sync_timeout: Duration::from_secs(60),
            identity: format!("database-operator-{}", std::process::id()),
            metrics_address: None,
            metrics_secure: None,
            health_address: None,
            leader_election: None,
            lease_client: None,
            events_client: None,
            review_client: None,
            request_metrics: None,
            rollout_marker: None,
            backup_image: None,
        }
    }
}

/// Runs the Database controller until `cancel` fires (or, with leader election, the Lease is
/// lost), then stops in this order, each step when the one before is over (steps 3 to 6 are
/// [`shutdown`]):
///
/// 1. take no new key;
/// 2. let in-flight reconciles finish (after a lost Lease: abort them once
///    `lease_duration - renew_deadline` has passed);
/// 3. write the queued Events (after a lost Lease: drop them);
/// 4. stop renewing the Lease;
/// 5. release it, so another replica takes over at once;
/// 6. stop the informers and the HTTP endpoints.
///
/// The Lease is renewed until step 4: a drain longer than the Lease never lets another replica
/// write beside this one.
///
/// # Errors
///
/// [`Error::Controller`] if the caches did not sync in time; [`Error::LeadershipLost`] after a
/// lost Lease; [`Error::LeaderElection`] for durations client-go would refuse;
/// [`Error::MetricsTls`] and [`Error::Bind`] when an endpoint cannot be served.
pub async fn run(client: Client, options: Options, cancel: CancellationToken) -> Result<(), Error> {
    if let Some(config) = &options.leader_election {
        config.validate()?;
    }
    let events_client = options.events_client.clone().unwrap_or_else(|| client.clone());
    let (recorder, events_task) = Recorder::new(events_client, "example.com/database-operator", &options.identity);
    let Metrics {
        registry,
        queue: queue_metrics,
        informer: informer_metrics,
        controller: controller_metrics,
        is_leader,
        databases: database_metrics,
    } = Metrics::register(&options, &recorder);
    let registry = Arc::new(registry);
    let health = Health::default();
    // The endpoints and the informers stop last (step 6 of the shutdown sequence below), not at
    // `cancel`: draining reconciles read the caches, and /metrics and the probes serve until
    // the end.
    let servers_cancel = CancellationToken::new();
    // An early return (a bind error, say) stops what has started.
    let _servers_guard = servers_cancel.clone().drop_guard();
    let mut servers = Vec::new();
    let metrics_secure = match &options.metrics_secure {
        Some(source) if options.metrics_address.is_some() => Some(ops::Secure {
            tls: ops::tls::acceptor(source)?,
            authorizer: Arc::new(ops::auth::Authorizer::new(
                options.review_client.clone().unwrap_or_else(|| client.clone()),
            )),
        }),
        _ => None,
    };
    for (what, address, registry, secure) in [
        ("metrics", options.metrics_address, Some(registry.clone()), metrics_secure),
        ("health probes", options.health_address, None, None),
    ] {
        if let Some(address) = address {
            let server = ops::serve(address, registry, health.clone(), secure, servers_cancel.clone())
                .await
                .map_err(|source| Error::Bind { what, address, source })?;
            servers.push(server);
        }
    }

    let config = informer::Config {
        resync_period: options.resync_period,
        metrics: Some(informer_metrics),
        ..Default::default()
    };
    let factory = Arc::new(Factory::for_namespaces(client.clone(), options.namespaces.clone(), config));
    let settings = Settings {
        workers: options.workers,
        priority_queue: options.priority_queue,
        cache_sync_timeout: options.cache_sync_timeout,
        queue_metrics,
        controller_metrics,
        rollout_marker: options.rollout_marker.clone(),
        backup_image: options.backup_image.clone(),
    };
    let controllers = Controllers::build(&factory, &client, &recorder, settings);
    // The per-Database metrics read the controllers' caches, at each scrape.
    database_metrics.observe(controllers.stores());
    // The recorders now live in the reconcilers: the events task ends when they are dropped.
    drop(recorder);

    let informers_cancel = CancellationToken::new();
    let _informers_guard = informers_cancel.clone().drop_guard();
    let informer_tasks = factory.start(informers_cancel.clone());
    // Ready while the caches are synced and every informer runs, computed at every probe.
    health.set_check({
        let factory = factory.clone();
        move || factory.has_synced()
    });
    let namespaces = if options.namespaces.is_empty() { "<all>".to_string() } else { options.namespaces.join(",") };
    info!(%namespaces, workers = options.workers, "starting");
    // `cancel`, or an informer that stopped: a frozen cache must not be reconciled from. The
    // process then exits non-zero, and the kubelet restarts it.
    let stop = cancel.child_token();
    let informer_stopped = tokio::spawn({
        let (factory, stop) = (factory.clone(), stop.clone());
        async move {
            let resource = factory.wait_for_unexpected_stop().await;
            stop.cancel();
            resource
        }
    });
    // Followers keep their caches warm (the informers run) but run no workers.
    let workers = WorkerStop { drain: stop.child_token(), abort: CancellationToken::new() };
    let mut leadership = None;
    if let Some(config) = &options.leader_election {
        let lease_client = options.lease_client.clone().unwrap_or_else(|| client.clone());
        let elector = Elector::new(lease_client, config.clone())?;
        leadership = Leadership::acquire(elector, config, &stop, is_leader, workers.clone()).await;
    }
    let result = if stop.is_cancelled() {
        drop(controllers);
        Ok(())
    } else {
        controllers.run(workers.drain.clone(), workers.abort.clone()).await
    };

    // Steps 1 and 2 are done: no new key is taken, and in-flight reconciles have finished (or
    // were aborted, the Lease being lost).
    Shutdown {
        events: events_task,
        leadership,
        health,
        informers: informers_cancel,
        informer_tasks,
        informer_stopped,
        servers: servers_cancel,
        server_tasks: servers,
    }
    .run(result)
    .await
}
