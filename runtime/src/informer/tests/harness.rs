//! A whole informer over a scripted fake apiserver, with a recording handler and metrics: the
//! rig of the fault-injection scenarios.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::params::WatchParams;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::fake::{FakeListWatch, Recorder, eventually};
use crate::informer::{Config, Informer, InitialListMode, Metrics};

pub(crate) struct Harness {
    pub(crate) fake: FakeListWatch,
    pub(crate) informer: Arc<Informer<ConfigMap>>,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) metrics: Metrics,
    pub(crate) cancel: CancellationToken,
    pub(crate) task: JoinHandle<()>,
}

/// Starts an informer over `fake` (scripted beforehand) with a recording handler.
pub(crate) fn start(fake: &FakeListWatch, config: Config) -> Harness {
    let metrics = Metrics::new(&mut Registry::default());
    let informer = Informer::from_list_watch(fake.clone(), Config { metrics: Some(metrics.clone()), ..config });
    let (informer, recorder, cancel, task) = run(informer);
    Harness { fake: fake.clone(), informer, recorder, metrics, cancel, task }
}

/// Runs `informer` on a task of its own with a recording handler: the informer, the recorder,
/// what stops it and its task.
pub(crate) fn run(
    informer: Informer<ConfigMap>,
) -> (Arc<Informer<ConfigMap>>, Arc<Recorder>, CancellationToken, JoinHandle<()>) {
    let informer = Arc::new(informer);
    let recorder = Recorder::new();
    informer.add_event_handler(recorder.clone());
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    (informer, recorder, cancel, task)
}

/// A config that always lists (no streaming), as most scenarios here want.
pub(crate) fn listing() -> Config {
    Config { initial_list: InitialListMode::List, ..Config::default() }
}

impl Harness {
    pub(crate) async fn events(&self, count: usize) -> Vec<String> {
        eventually(&format!("{count} handler calls"), Duration::from_secs(600), || {
            self.recorder.events().len() >= count
        })
        .await;
        self.recorder.events()
    }

    pub(crate) async fn watch_calls(&self, count: usize) -> Vec<(WatchParams, String, Instant)> {
        eventually(&format!("{count} watch requests"), Duration::from_secs(600), || {
            self.fake.watch_calls().len() >= count
        })
        .await;
        self.fake.watch_calls()
    }

    pub(crate) fn counters(&self) -> [u64; 5] {
        let m = self.metrics.for_resource("configmaps");
        [m.lists.get(), m.list_errors.get(), m.watches.get(), m.relists.get(), m.watch_errors.get()]
    }

    /// `informer_undecodable_objects_total` of this informer.
    pub(crate) fn undecodable(&self) -> u64 {
        self.metrics.for_resource("configmaps").undecodable.get()
    }

    pub(crate) fn sorted_keys(&self) -> Vec<String> {
        let mut keys = self.informer.store().keys();
        keys.sort();
        keys
    }

    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }
}
