//! Every metric family the operator serves on `/metrics`, registered in one place: [`super::run`]
//! serves this registry, and `tests/docs.rs` checks README.md's table of metrics against it, so
//! a family added here and not documented there fails the test command. The per-Database
//! families are computed at scrape time from the caches ([`super::database_metrics`]), which
//! exist only after the registry: [`Metrics::observe`] attaches them.

use std::sync::Arc;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Options;
use super::database_metrics::{self, Collector, Stores};
use operator_runtime::events::Recorder;
use operator_runtime::{controller, informer, workqueue};

/// The registry `/metrics` serves, and the handles the operator's parts record into.
#[derive(Debug)]
pub struct Metrics {
    pub(super) registry: Registry,
    pub(super) queue: workqueue::Metrics,
    pub(super) informer: informer::Metrics,
    pub(super) controller: controller::Metrics,
    /// `leader_election_master_status{name}`: set by the leadership while it holds the Lease.
    pub(super) is_leader: Gauge,
    /// The per-Database families, served once [`Metrics::observe`] gave them the caches.
    pub(super) databases: Arc<Collector>,
}

impl Metrics {
    /// Registers every family the operator serves when run with `options`: the work queues',
    /// the informers', the reconciles', the API client's (with `options.request_metrics`),
    /// leadership's (with `options.leader_election`), the events `recorder`'s and the
    /// per-Database ones (served once [`Metrics::observe`] is called).
    pub fn register(options: &Options, recorder: &Recorder) -> Self {
        let mut registry = Registry::default();
        let queue = workqueue::Metrics::register(&mut registry);
        let informer = informer::Metrics::new(&mut registry);
        let controller = controller::Metrics::register(&mut registry);
        if let Some(request_metrics) = &options.request_metrics {
            request_metrics.register(&mut registry);
        }
        // client-go's leader election metric name; like client-go, only with leader election (a
        // 0 on a replica that runs its workers without a Lease would read as "not leading").
        let is_leader = Family::<Vec<(String, String)>, Gauge>::default();
        if options.leader_election.is_some() {
            registry.register(
                "leader_election_master_status",
                "1 while this replica holds the leader Lease",
                is_leader.clone(),
            );
        }
        // Labelled with the Lease's name, as client-go labels it.
        let lease_name = options.leader_election.as_ref().map_or_else(String::new, |c| c.lease_name.clone());
        let is_leader = is_leader.get_or_create(&vec![("name".to_string(), lease_name)]).clone();
        recorder.register_metrics(&mut registry);
        let databases = database_metrics::register(&mut registry);
        Self { registry, queue, informer, controller, is_leader, databases }
    }

    /// Serves the per-Database families (`database_ready`, `database_backup_*`, ...) of the
    /// Databases and DatabaseBackups in `stores`, read at each scrape. The operator passes the
    /// caches its controllers share; a test may pass stores of its own.
    ///
    /// # Panics
    ///
    /// When called twice.
    pub fn observe(&self, stores: Stores) {
        self.databases.observe(stores);
    }

    /// The registry `/metrics` encodes.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}
