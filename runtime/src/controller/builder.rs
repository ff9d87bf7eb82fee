//! Wiring informers to the queue, and running the workers.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use kube_core::Resource;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::enqueue::{Background, Echo, Enqueue, Mapper, Settled, owner_keys};
use super::metrics::{ControllerMetrics, Metrics};
use super::worker::{self, Reconciler};
use super::{Error, ObjectKey};
use crate::informer::{self, Cache, Informer, key_of, wait_for_caches};
use crate::workqueue::RateLimitingQueue;

/// Whether a primary object is settled ([`Builder::settled`]).
type Predicate<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

/// What the event handlers of one controller share.
struct Shared {
    queue: RateLimitingQueue<ObjectKey>,
    background: Option<Arc<Background>>,
    echo: Option<Echo>,
}

/// Registers one informer's event handler on the controller's queue.
type Wire = Box<dyn FnOnce(&Shared) + Send>;

/// Builds a [`Controller`] over a primary informer and the informers of what it owns.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// # use operator_runtime::{controller, informer};
/// # async fn example(factory: informer::Factory) {
/// let controller = controller::Builder::new("deployment", factory.informer::<Deployment>())
///     .owns(factory.informer::<ReplicaSet>())
///     .workers(4)
///     .build();
/// # }
/// ```
pub struct Builder<K> {
    name: String,
    primary: Arc<Informer<K>>,
    queue: Option<RateLimitingQueue<ObjectKey>>,
    syncs: Vec<Arc<dyn Cache>>,
    wiring: Vec<Wire>,
    workers: usize,
    cache_sync_timeout: Duration,
    metrics: Option<Metrics>,
    settled: Option<Predicate<K>>,
    echo: Option<Echo>,
}

impl<K> Debug for Builder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder").field("name", &self.name).field("workers", &self.workers).finish_non_exhaustive()
    }
}

impl<K> Builder<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// A controller named `name` (the queue's metrics label) reconciling the objects of
    /// `primary`: every add, update and delete enqueues the object's key.
    pub fn new(name: &str, primary: Arc<Informer<K>>) -> Self {
        let mut builder = Self {
            name: name.to_string(),
            primary: primary.clone(),
            queue: None,
            syncs: Vec::new(),
            wiring: Vec::new(),
            workers: 2,
            cache_sync_timeout: Duration::from_secs(120),
            metrics: None,
            settled: None,
            echo: None,
        };
        builder.wire(primary, Arc::new(|obj: &K| vec![key_of(obj)]), true);
        builder
    }

    /// Reconcile the controller owner of every object of `informer` whose controller
    /// ownerReference points at a `K` (same apiVersion and kind), in the object's namespace.
    pub fn owns<C>(self, informer: Arc<Informer<C>>) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    {
        self.watches(informer, owner_keys::<K, C>)
    }

    /// Reconcile the keys `map` returns for every add, update (old and new object) and
    /// delete of `informer`'s objects.
    pub fn watches<C, F>(mut self, informer: Arc<Informer<C>>, map: F) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
        F: Fn(&C) -> Vec<String> + Send + Sync + 'static,
    {
        self.wire(informer, Arc::new(map), false);
        self
    }

    fn wire<C>(&mut self, informer: Arc<Informer<C>>, map: Mapper<C>, primary: bool)
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    {
        self.syncs.push(informer.clone());
        let controller = self.name.clone();
        self.wiring.push(Box::new(move |shared| {
            informer.add_event_handler(Arc::new(Enqueue {
                queue: shared.queue.clone(),
                map,
                controller,
                primary,
                background: shared.background.clone(),
                echo: shared.echo.clone().filter(|_| primary),
            }));
        }));
    }

    /// Says when a primary object needs nothing urgent (for example: its status reports the
    /// current generation and it is ready). For a settled object, and for one from the initial
    /// list until it settles or a user changes it, the events of watched objects and its own
    /// updates that leave `metadata.generation` alone are queued at low priority, behind users'
    /// changes (see [`crate::workqueue::Priority`] and the table in `enqueue.rs`). Without it,
    /// only the initial list and resyncs are low.
    pub fn settled(mut self, settled: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.settled = Some(Arc::new(settled));
        self
    }

    /// The statuses the reconciler writes through `statuses`: the watch event of such a write
    /// (its echo) queues no reconcile, as the reconcile that wrote it acted on all the rest
    /// that version shows (see [`Statuses::echo`](crate::write::Statuses::echo)). Without it,
    /// every echo costs a reconcile that finds nothing to do.
    pub fn own_statuses<S: Clone + Send + 'static>(mut self, statuses: crate::write::Statuses<S>) -> Self {
        self.echo = Some(Arc::new(move |key: &str, old: Option<&str>, new: Option<&str>| statuses.echo(key, old, new)));
        self
    }

    /// The number of workers reconciling in parallel (the "threadiness"); default 2.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// How long [`Controller::run`] waits for the caches before giving up; default 120 s.
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = timeout;
        self
    }

    /// Use this queue (e.g. with metrics or another rate limiter) instead of a default one.
    pub fn queue(mut self, queue: RateLimitingQueue<ObjectKey>) -> Self {
        self.queue = Some(queue);
        self
    }

    /// Record reconcile metrics (controller-runtime's names) under this controller's name.
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Registers the event handlers and returns the controller, ready to run.
    pub fn build(self) -> Controller<K> {
        let queue = self.queue.unwrap_or_else(|| RateLimitingQueue::new(&self.name));
        let background = self.settled.map(|settled| {
            let store = self.primary.store();
            let settled: Settled = Arc::new(move |key: &str| store.get(key).is_some_and(|obj| settled(&obj)));
            Arc::new(Background::new(settled))
        });
        let shared = Shared { queue, background, echo: self.echo };
        for wire in self.wiring {
            wire(&shared);
        }
        let queue = shared.queue;
        Controller {
            metrics: self.metrics.map(|m| m.for_controller(&self.name)),
            name: self.name,
            primary: self.primary,
            queue,
            syncs: self.syncs,
            workers: self.workers,
            cache_sync_timeout: self.cache_sync_timeout,
        }
    }
}

/// A built controller: its handlers are registered and feed its queue.
pub struct Controller<K> {
    metrics: Option<ControllerMetrics>,
    name: String,
    primary: Arc<Informer<K>>,
    queue: RateLimitingQueue<ObjectKey>,
    syncs: Vec<Arc<dyn Cache>>,
    workers: usize,
    cache_sync_timeout: Duration,
}

impl<K> Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").field("name", &self.name).field("workers", &self.workers).finish_non_exhaustive()
    }
}

impl<K> Controller<K> {
    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// The primary informer.
    pub fn primary(&self) -> &Arc<Informer<K>> {
        &self.primary
    }

    /// Waits for the caches, runs the workers until `cancel` fires, then drains the queue
    /// (in-flight reconciles finish) and returns. The informers are run by their owner (the
    /// [`crate::informer::Factory`]), not here.
    ///
    /// # Errors
    ///
    /// [`Error::CacheSyncTimeout`] if the caches did not sync in time; no reconcile ran.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future abandons the workers mid-reconcile; cancel through `cancel` instead.
    pub async fn run<R: Reconciler>(self, reconciler: Arc<R>, cancel: CancellationToken) -> Result<(), Error> {
        self.run_until_aborted(reconciler, cancel, CancellationToken::new()).await
    }

    /// [`Controller::run`], and if `abort` fires, before or during the drain, the in-flight
    /// reconciles are dropped at their next await point instead of being waited for, and it
    /// returns at once. A leader that lost its Lease does this: another replica may start
    /// writing soon, and a reconcile left to run to completion would write beside it. The
    /// aborted keys are left unfinished in the queue: the caller is expected to stop, and the
    /// next start lists everything again.
    ///
    /// # Errors
    ///
    /// [`Error::CacheSyncTimeout`], as [`Controller::run`].
    pub async fn run_until_aborted<R: Reconciler>(
        self,
        reconciler: Arc<R>,
        cancel: CancellationToken,
        abort: CancellationToken,
    ) -> Result<(), Error> {
        self.wait_for_caches(&cancel).await?;
        if cancel.is_cancelled() || abort.is_cancelled() {
            self.queue.shut_down();
            return Ok(());
        }
        info!(controller = %self.name, workers = self.workers, "caches synced; starting workers");
        let workers: Vec<_> = (0..self.workers)
            .map(|id| tokio::spawn(worker::run(id, self.queue.clone(), reconciler.clone(), self.metrics.clone())))
            .collect();
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = abort.cancelled() => {}
        }
        info!(controller = %self.name, "stopping: draining in-flight reconciles");
        tokio::select! {
            () = self.queue.shut_down_with_drain() => {}
            () = abort.cancelled() => {
                tracing::warn!(controller = %self.name, "aborting in-flight reconciles");
                self.queue.shut_down();
                for worker in &workers {
                    worker.abort();
                }
            }
        }
        for worker in workers {
            // A worker never panics (reconcile panics are caught); a JoinError other than an
            // abort would be a bug in the worker loop itself.
            if let Err(err) = worker.await
                && !err.is_cancelled()
            {
                tracing::error!(controller = %self.name, error = %err, "worker task failed");
            }
        }
        info!(controller = %self.name, "stopped");
        Ok(())
    }

    /// Until every watched cache has synced, or `cancel` fires.
    async fn wait_for_caches(&self, cancel: &CancellationToken) -> Result<(), Error> {
        let caches: Vec<&dyn Cache> = self.syncs.iter().map(|cache| cache.as_ref()).collect();
        tokio::select! {
            synced = wait_for_caches(&caches, self.cache_sync_timeout) => synced.map_err(|error| match error {
                informer::Error::SyncTimeout { resources, timeout } => Error::CacheSyncTimeout { timeout, pending: resources },
                other => Error::CacheSyncTimeout { timeout: self.cache_sync_timeout, pending: other.to_string() },
            }),
            () = cancel.cancelled() => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reconciler that blocks until released, counting the reconciles that started and
    /// those that finished.
    #[derive(Default)]
    struct Blocking {
        started: std::sync::atomic::AtomicUsize,
        finished: std::sync::atomic::AtomicUsize,
        release: tokio::sync::Notify,
    }

    impl Reconciler for Blocking {
        type Error = std::convert::Infallible;

        async fn reconcile(&self, _key: &str) -> Result<crate::controller::Action, Self::Error> {
            self.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.release.notified().await;
            self.finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(crate::controller::Action::Done)
        }
    }

    /// A controller over a fake informer holding one ConfigMap, running `reconciler`.
    async fn running(
        reconciler: Arc<Blocking>,
    ) -> (
        CancellationToken,
        CancellationToken,
        tokio::task::JoinHandle<Result<(), Error>>,
        crate::informer::tests::harness::Harness,
    ) {
        use crate::informer::tests::fake::{FakeListWatch, cm};
        let fake = FakeListWatch::default();
        fake.list_page(vec![cm("ns", "a", "1")], "1", None);
        let _watch = fake.watch();
        let config =
            crate::informer::Config { initial_list: crate::informer::InitialListMode::List, ..Default::default() };
        let harness = crate::informer::tests::harness::start(&fake, config);
        let controller = Builder::new("test", harness.informer.clone()).workers(1).build();
        let (cancel, abort) = (CancellationToken::new(), CancellationToken::new());
        let task = tokio::spawn(controller.run_until_aborted(reconciler.clone(), cancel.clone(), abort.clone()));
        crate::informer::tests::fake::eventually("the reconcile to start", Duration::from_secs(10), || {
            reconciler.started.load(std::sync::atomic::Ordering::SeqCst) == 1
        })
        .await;
        (cancel, abort, task, harness)
    }

    #[tokio::test]
    async fn a_cancelled_controller_waits_for_its_in_flight_reconcile() {
        let reconciler = Arc::new(Blocking::default());
        let (cancel, _abort, task, _harness) = running(reconciler.clone()).await;
        cancel.cancel();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!task.is_finished(), "the drain waits for the reconcile");
        reconciler.release.notify_one();
        task.await.unwrap().unwrap();
        assert_eq!(reconciler.finished.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_abort_during_the_drain_drops_the_in_flight_reconcile_at_once() {
        let reconciler = Arc::new(Blocking::default());
        let (cancel, abort, task, _harness) = running(reconciler.clone()).await;
        cancel.cancel();
        abort.cancel();
        let stopped = tokio::time::timeout(Duration::from_secs(10), task).await;
        stopped.expect("the controller returns without waiting for the reconcile").unwrap().unwrap();
        // The reconcile never got past its await point: it was dropped, not finished.
        reconciler.release.notify_one();
        tokio::task::yield_now().await;
        assert_eq!(reconciler.finished.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
