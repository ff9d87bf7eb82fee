//! Event handlers, and the fan-out that calls them in the order the cache changed.
//!
//! Every change to the cache goes through the [`Distributor`]: under one sequencing lock it
//! changes the store and queues the resulting deltas. Registering a handler takes the same lock,
//! snapshots the store and queues "add this handler with this snapshot" at that very position.
//! One [`Dispatcher`] task drains that queue into one *lane* per handler: the handler's own
//! queue and task. So a handler sees:
//!
//! - `on_add` for every object cached when it was registered (nothing, before the first list),
//! - then every later change exactly once, in the order the cache made them,
//!
//! and never a delete for an object it was not shown, nor a missed change in between. One
//! handler's calls never run concurrently with each other; different handlers run
//! concurrently, each at its own pace, so a slow handler delays only itself.
//!
//! ## Memory usage
//!
//! A lane is unbounded: a handler slower than the watch makes its own lane grow, and
//! `informer_handler_queue_depth{resource, handler}` shows by how much (changes waiting).
//! Handlers are meant to map an object to a key and put it on a work queue, which takes
//! microseconds.
//!
//! ## Panics
//!
//! A handler that panics ends its lane, and the dispatcher re-raises the panic, which ends the
//! informer's [`run`](super::Informer::run) (the operator watches for that and exits).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use kube_core::Resource;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::metrics::ResourceMetrics;
use super::store::{Delta, Store};

/// Reacts to changes of an informer's cache. Called from the handler's own task, one call at a
/// time, in the order of the changes: return quickly (enqueue a key, do not reconcile here).
/// A panic in a handler ends the informer's [`run`](super::Informer::run).
pub trait EventHandler<K>: Send + Sync + 'static {
    /// `obj` was added to the cache (or was there when the handler was registered).
    /// `in_initial_list` (client-go's `isInInitialList`) is true for the objects of the
    /// informer's first list and of the snapshot a handler gets when registered: what was there
    /// before anyone watched, rather than a creation seen live (or found by a later relist).
    fn on_add(&self, obj: &Arc<K>, in_initial_list: bool);
    /// A cached object changed from `old` to `new`; on resync, `old` and `new` are the same.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>);
    /// `obj` left the cache: deleted, or gone from a relist. `obj` is the last state known.
    fn on_delete(&self, obj: &Arc<K>);
    /// The handler's name in `informer_handler_queue_depth{handler}`: by default its type's
    /// name without the module path. Handlers of one informer with the same name share the
    /// series.
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        let path = full.split('<').next().unwrap_or(full);
        path.rsplit("::").next().unwrap_or(path).to_string()
    }
}

enum Message<K> {
    /// Changes of the cache; `true` for the first list's.
    Deltas(Vec<Delta<K>>, bool),
    AddHandler(Arc<dyn EventHandler<K>>, Vec<Arc<K>>),
    Resync(Vec<Arc<K>>),
}

/// What one lane delivers: shared by every lane, never copied per handler.
enum Work<K> {
    /// Changes; `true` for the first list's.
    Deltas(Arc<Vec<Delta<K>>>, bool),
    /// The cache when the handler was registered, as adds.
    Snapshot(Vec<Arc<K>>),
    Resync(Arc<Vec<Arc<K>>>),
}

impl<K: 'static> Work<K> {
    fn len(&self) -> usize {
        match self {
            Work::Deltas(deltas, _) => deltas.len(),
            Work::Snapshot(objects) => objects.len(),
            Work::Resync(objects) => objects.len(),
        }
    }

    fn deliver(&self, handler: &dyn EventHandler<K>) {
        match self {
            Work::Deltas(deltas, initial) => {
                for delta in deltas.iter() {
                    match delta {
                        Delta::Added(obj) => handler.on_add(obj, *initial),
                        Delta::Updated(old, new) => handler.on_update(old, new),
                        Delta::Deleted(obj) => handler.on_delete(obj),
                    }
                }
            }
            Work::Snapshot(objects) => objects.iter().for_each(|obj| handler.on_add(obj, true)),
            Work::Resync(objects) => objects.iter().for_each(|obj| handler.on_update(obj, obj)),
        }
    }
}

/// The only writer of a store: changes it and queues the deltas for the handlers, atomically.
pub(crate) struct Distributor<K> {
    store: Store<K>,
    sequence: Mutex<mpsc::UnboundedSender<Message<K>>>,
}

impl<K> fmt::Debug for Distributor<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Distributor").field("store", &self.store).finish_non_exhaustive()
    }
}

impl<K: 'static> Distributor<K> {
    /// A distributor writing `store`, and the dispatcher that calls its handlers.
    pub(crate) fn new(store: Store<K>) -> (Self, Dispatcher<K>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (Distributor { store, sequence: Mutex::new(sender) }, Dispatcher { receiver, lanes: Vec::new() })
    }

    /// Runs `change` on the store and queues what it returns, under the sequencing lock.
    fn sequenced(&self, change: impl FnOnce(&Store<K>) -> Option<Message<K>>) {
        let sender = self.sequence.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(message) = change(&self.store) {
            // Fails only once the dispatcher is gone (the informer stopped): nobody to tell.
            let _ = sender.send(message);
        }
    }

    /// Registers `handler`: it first gets `on_add` for everything cached now.
    pub(crate) fn add_handler(&self, handler: Arc<dyn EventHandler<K>>) {
        self.sequenced(|store| Some(Message::AddHandler(handler, store.list())));
    }

    /// Re-delivers every cached object as `on_update(obj, obj)`.
    pub(crate) fn resync(&self) {
        self.sequenced(|store| Some(Message::Resync(store.list())));
    }
}

impl<K: Resource + 'static> Distributor<K> {
    /// Caches `obj` (added or modified).
    pub(crate) fn upsert(&self, obj: Arc<K>) {
        self.sequenced(|store| Some(Message::Deltas(vec![store.upsert(obj)], false)));
    }

    /// Drops `obj` from the cache; handlers get `obj` (the final state the apiserver sent).
    /// Deleting what is not cached changes nothing and tells nobody: a handler never hears of
    /// the deletion of an object it was not shown.
    pub(crate) fn delete(&self, obj: Arc<K>) {
        self.sequenced(|store| store.remove(&obj).map(|_| Message::Deltas(vec![Delta::Deleted(obj)], false)));
    }

    /// Drops what is cached under `key`, if anything; handlers get its last cached state.
    pub(crate) fn forget(&self, key: &str) {
        self.sequenced(|store| store.remove_key(key).map(|old| Message::Deltas(vec![Delta::Deleted(old)], false)));
    }

    /// Replaces the cache (within `namespace`, when given) with `objects`; handlers get the
    /// difference, as the initial list's if `initial` (the first list of that collection).
    pub(crate) fn replace(&self, namespace: Option<&str>, objects: Vec<Arc<K>>, initial: bool) {
        self.sequenced(|store| Some(Message::Deltas(store.replace_in(namespace, objects), initial)));
    }
}

/// One handler's queue; its task drains it.
struct Lane<K> {
    sender: mpsc::UnboundedSender<Work<K>>,
    depth: Gauge,
}

impl<K: 'static> Lane<K> {
    fn push(&self, work: Work<K>) {
        self.depth.inc_by(work.len() as i64);
        // Fails only when the lane's task ended (its handler panicked): the dispatcher is
        // about to re-raise that panic.
        let _ = self.sender.send(work);
    }
}

/// Fans the queue out to one lane per handler, in queue order.
pub(crate) struct Dispatcher<K> {
    receiver: mpsc::UnboundedReceiver<Message<K>>,
    lanes: Vec<Lane<K>>,
}

impl<K> fmt::Debug for Dispatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher").field("handlers", &self.lanes.len()).finish_non_exhaustive()
    }
}

impl<K: Send + Sync + 'static> Dispatcher<K> {
    /// Dispatches until the distributor is dropped; re-raises a handler's panic.
    ///
    /// # Cancellation safety
    ///
    /// Dropping it stops every lane at its next change (the lanes' tasks are aborted); queued
    /// changes are lost.
    pub(crate) async fn run(mut self, metrics: ResourceMetrics) {
        let mut lanes = JoinSet::new();
        loop {
            tokio::select! {
                message = self.receiver.recv() => match message {
                    Some(message) => {
                        if let Some((handler, receiver, depth)) = self.dispatch(message, &metrics) {
                            lanes.spawn(serve(handler, receiver, depth));
                        }
                    }
                    None => return,
                },
                Some(ended) = lanes.join_next() => {
                    if let Err(error) = ended
                        && error.is_panic()
                    {
                        std::panic::resume_unwind(error.into_panic());
                    }
                }
            }
        }
    }

    /// Hands `message` to the lanes; a new handler's lane comes back to be served.
    fn dispatch(&mut self, message: Message<K>, metrics: &ResourceMetrics) -> Option<NewLane<K>> {
        match message {
            Message::Deltas(deltas, initial) => {
                let deltas = Arc::new(deltas);
                self.lanes.iter().for_each(|lane| lane.push(Work::Deltas(deltas.clone(), initial)));
                None
            }
            Message::Resync(snapshot) => {
                let snapshot = Arc::new(snapshot);
                self.lanes.iter().for_each(|lane| lane.push(Work::Resync(snapshot.clone())));
                None
            }
            Message::AddHandler(handler, snapshot) => {
                let (sender, receiver) = mpsc::unbounded_channel();
                let depth = metrics.handler_depth(&handler.name());
                let lane = Lane { sender, depth: depth.clone() };
                lane.push(Work::Snapshot(snapshot));
                self.lanes.push(lane);
                Some((handler, receiver, depth))
            }
        }
    }
}

type NewLane<K> = (Arc<dyn EventHandler<K>>, mpsc::UnboundedReceiver<Work<K>>, Gauge);

/// A lane's task: delivers its work in order until the dispatcher is gone, in slices of at
/// most [`SLICE`] (at least one message) between which it yields. So on one thread, a fast
/// handler catches up on its whole backlog in one turn while a slow one does one message per
/// turn, and a relist of thousands never starves the reflector.
async fn serve<K: 'static>(
    handler: Arc<dyn EventHandler<K>>,
    mut receiver: mpsc::UnboundedReceiver<Work<K>>,
    depth: Gauge,
) {
    while let Some(mut work) = receiver.recv().await {
        let started = std::time::Instant::now();
        loop {
            work.deliver(handler.as_ref());
            depth.dec_by(work.len() as i64);
            if started.elapsed() >= SLICE {
                break;
            }
            match receiver.try_recv() {
                Ok(next) => work = next,
                Err(_) => break,
            }
        }
        tokio::task::yield_now().await;
    }
}

/// How long a lane delivers before it yields to the other tasks.
const SLICE: std::time::Duration = std::time::Duration::from_millis(1);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::tests::fake::{Recorder, cm};
    use k8s_openapi::api::core::v1::ConfigMap;

    /// Dispatches what is queued and delivers every lane's work, here and now.
    fn drain(dispatcher: &mut Dispatcher<ConfigMap>, lanes: &mut Vec<NewLane<ConfigMap>>) {
        let metrics = ResourceMetrics::default();
        while let Ok(message) = dispatcher.receiver.try_recv() {
            lanes.extend(dispatcher.dispatch(message, &metrics));
        }
        for (handler, receiver, _) in lanes.iter_mut() {
            while let Ok(work) = receiver.try_recv() {
                work.deliver(handler.as_ref());
            }
        }
    }

    #[test]
    fn handlers_see_changes_in_the_order_the_cache_made_them() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        let mut lanes = Vec::new();
        let recorder = Recorder::new();
        distributor.add_handler(recorder.clone());
        distributor.upsert(Arc::new(cm("ns", "a", "1")));
        distributor.upsert(Arc::new(cm("ns", "a", "2")));
        distributor.upsert(Arc::new(cm("ns", "b", "3")));
        distributor.delete(Arc::new(cm("ns", "a", "4")));
        drain(&mut dispatcher, &mut lanes);
        assert_eq!(recorder.events(), ["add ns/a@1", "update ns/a@1->2", "add ns/b@3", "delete ns/a@4"]);
    }

    #[test]
    fn late_handler_gets_current_contents_as_adds_then_only_later_changes() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        let mut lanes = Vec::new();
        let early = Recorder::new();
        distributor.add_handler(early.clone());
        distributor.upsert(Arc::new(cm("ns", "a", "1")));
        distributor.upsert(Arc::new(cm("ns", "b", "2")));
        // Registered while the changes above are still queued: the snapshot already holds them,
        // so they must not be delivered to it a second time.
        let late = Recorder::new();
        distributor.add_handler(late.clone());
        distributor.delete(Arc::new(cm("ns", "a", "3")));
        drain(&mut dispatcher, &mut lanes);
        assert_eq!(early.events(), ["add ns/a@1", "add ns/b@2", "delete ns/a@3"]);
        let mut late_events = late.events();
        late_events[..2].sort();
        assert_eq!(late_events, ["add ns/a@1", "add ns/b@2", "delete ns/a@3"]);
    }

    #[test]
    fn deleting_what_is_not_cached_tells_nobody() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        let mut lanes = Vec::new();
        let recorder = Recorder::new();
        distributor.add_handler(recorder.clone());
        distributor.delete(Arc::new(cm("ns", "never-seen", "1")));
        drain(&mut dispatcher, &mut lanes);
        assert!(recorder.events().is_empty());
    }

    #[test]
    fn resync_redelivers_every_cached_object_as_an_update_to_itself() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        let mut lanes = Vec::new();
        distributor.upsert(Arc::new(cm("ns", "a", "1")));
        let recorder = Recorder::new();
        distributor.add_handler(recorder.clone());
        distributor.resync();
        drain(&mut dispatcher, &mut lanes);
        assert_eq!(recorder.events(), ["add ns/a@1", "update ns/a@1->1"]);
    }

    /// Takes 50 ms per change, on its thread, as a handler doing too much would.
    struct Slow(Arc<Recorder>);

    impl EventHandler<ConfigMap> for Slow {
        fn on_add(&self, obj: &Arc<ConfigMap>, in_initial_list: bool) {
            std::thread::sleep(std::time::Duration::from_millis(50));
            self.0.on_add(obj, in_initial_list);
        }
        fn on_update(&self, _: &Arc<ConfigMap>, _: &Arc<ConfigMap>) {}
        fn on_delete(&self, _: &Arc<ConfigMap>) {}
    }

    /// On one thread, as the operator runs by default (`--runtime-threads 1`).
    #[tokio::test(flavor = "current_thread")]
    async fn a_slow_handler_delays_only_itself_and_its_backlog_is_measured() {
        use crate::informer::Metrics;
        let metrics = Metrics::new(&mut prometheus_client::registry::Registry::default());
        let resource = metrics.for_resource("configmaps");
        let (distributor, dispatcher) = Distributor::new(Store::new());
        let (slow, fast) = (Recorder::new(), Recorder::new());
        distributor.add_handler(Arc::new(Slow(slow.clone())));
        distributor.add_handler(fast.clone());
        let run = tokio::spawn(dispatcher.run(resource.clone()));
        for i in 0..10 {
            distributor.upsert(Arc::new(cm("ns", &format!("o{i}"), "1")));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while fast.events().len() < 10 {
            assert!(std::time::Instant::now() < deadline, "the fast handler never got its changes");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        // Had the fast handler waited for the slow one, the slow one would be done by now.
        let (handled, waiting) = (slow.events().len(), resource.handler_depth("Slow").get());
        assert!(handled < 5, "the fast handler waited for {handled} slow calls");
        assert!(waiting >= 5, "the slow handler's backlog: {waiting}");
        assert_eq!(resource.handler_depth("Recorder").get(), 0);
        while slow.events().len() < 10 {
            assert!(std::time::Instant::now() < deadline, "the slow handler never caught up");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(slow.events(), fast.events(), "same changes, same order");
        assert_eq!(resource.handler_depth("Slow").get(), 0);
        run.abort();
    }

    struct Panics;

    impl EventHandler<ConfigMap> for Panics {
        fn on_add(&self, _: &Arc<ConfigMap>, _: bool) {
            panic!("a handler bug");
        }
        fn on_update(&self, _: &Arc<ConfigMap>, _: &Arc<ConfigMap>) {}
        fn on_delete(&self, _: &Arc<ConfigMap>) {}
    }

    #[tokio::test]
    async fn a_panicking_handler_ends_the_dispatcher_with_its_panic() {
        let (distributor, dispatcher) = Distributor::new(Store::new());
        distributor.add_handler(Arc::new(Panics));
        distributor.upsert(Arc::new(cm("ns", "a", "1")));
        let ended = tokio::spawn(dispatcher.run(ResourceMetrics::default())).await;
        let panic = ended.expect_err("the panic ends the dispatcher").into_panic();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"a handler bug"));
        drop(distributor);
    }
}
