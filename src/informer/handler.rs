//! Event handlers, and the fan-out that calls them in the order the cache changed.
//!
//! Every change to the cache goes through the [`Distributor`]: under one sequencing lock it
//! changes the store and queues the resulting deltas. Registering a handler takes the same lock,
//! snapshots the store and queues "add this handler with this snapshot" at that very position.
//! One [`Dispatcher`] task drains the queue and calls the handlers. So a handler sees:
//!
//! - `on_add` for every object cached when it was registered (nothing, before the first list),
//! - then every later change exactly once, in the order the cache made them,
//!
//! and never a delete for an object it was not shown, nor a missed change in between. Handler
//! calls never run concurrently with each other.
//!
//! ## Memory usage
//!
//! The queue is unbounded: a handler slower than the watch makes it grow. Handlers are meant to
//! map an object to a key and put it on a work queue, which takes microseconds.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use kube_core::Resource;
use tokio::sync::mpsc;

use super::store::{Delta, Store};

/// Reacts to changes of an informer's cache. Called from the informer's task, one call at a
/// time, in the order of the changes: return quickly (enqueue a key, do not reconcile here).
/// A panic in a handler ends the informer's [`run`](super::Informer::run).
pub trait EventHandler<K>: Send + Sync + 'static {
    /// `obj` was added to the cache (or was there when the handler was registered).
    fn on_add(&self, obj: &Arc<K>);
    /// A cached object changed from `old` to `new`; on resync, `old` and `new` are the same.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>);
    /// `obj` left the cache: deleted, or gone from a relist. `obj` is the last state known.
    fn on_delete(&self, obj: &Arc<K>);
}

enum Message<K> {
    Deltas(Vec<Delta<K>>),
    AddHandler(Arc<dyn EventHandler<K>>, Vec<Arc<K>>),
    Resync(Vec<Arc<K>>),
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
        (Distributor { store, sequence: Mutex::new(sender) }, Dispatcher { receiver, handlers: Vec::new() })
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
        self.sequenced(|store| Some(Message::Deltas(vec![store.upsert(obj)])));
    }

    /// Drops `obj` from the cache; handlers get `obj` (the final state the apiserver sent).
    /// Deleting what is not cached changes nothing and tells nobody: a handler never hears of
    /// the deletion of an object it was not shown.
    pub(crate) fn delete(&self, obj: Arc<K>) {
        self.sequenced(|store| store.remove(&obj).map(|_| Message::Deltas(vec![Delta::Deleted(obj)])));
    }

    /// Replaces the cache with `objects`; handlers get the difference.
    pub(crate) fn replace(&self, objects: Vec<Arc<K>>) {
        self.sequenced(|store| Some(Message::Deltas(store.replace(objects))));
    }
}

/// Calls the handlers, one message at a time, in queue order.
pub(crate) struct Dispatcher<K> {
    receiver: mpsc::UnboundedReceiver<Message<K>>,
    handlers: Vec<Arc<dyn EventHandler<K>>>,
}

impl<K> fmt::Debug for Dispatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher").field("handlers", &self.handlers.len()).finish_non_exhaustive()
    }
}

impl<K: 'static> Dispatcher<K> {
    /// Dispatches until the distributor is dropped.
    ///
    /// # Cancellation safety
    ///
    /// Dropping it between messages loses the queued ones; it never stops within a message.
    pub(crate) async fn run(mut self) {
        while let Some(message) = self.receiver.recv().await {
            self.dispatch(message);
            // Long bursts (a relist of thousands) must not starve the reflector on the same
            // thread; the queue order is unaffected.
            tokio::task::yield_now().await;
        }
    }

    fn dispatch(&mut self, message: Message<K>) {
        match message {
            Message::Deltas(deltas) => {
                for delta in &deltas {
                    for handler in &self.handlers {
                        match delta {
                            Delta::Added(obj) => handler.on_add(obj),
                            Delta::Updated(old, new) => handler.on_update(old, new),
                            Delta::Deleted(obj) => handler.on_delete(obj),
                        }
                    }
                }
            }
            Message::AddHandler(handler, snapshot) => {
                for obj in &snapshot {
                    handler.on_add(obj);
                }
                self.handlers.push(handler);
            }
            Message::Resync(snapshot) => {
                for obj in &snapshot {
                    for handler in &self.handlers {
                        handler.on_update(obj, obj);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::testing::{Recorder, cm};
    use k8s_openapi::api::core::v1::ConfigMap;

    fn drain(dispatcher: &mut Dispatcher<ConfigMap>) {
        while let Ok(message) = dispatcher.receiver.try_recv() {
            dispatcher.dispatch(message);
        }
    }

    #[test]
    fn handlers_see_changes_in_the_order_the_cache_made_them() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        let recorder = Recorder::new();
        distributor.add_handler(recorder.clone());
        distributor.upsert(Arc::new(cm("ns", "a", "1")));
        distributor.upsert(Arc::new(cm("ns", "a", "2")));
        distributor.upsert(Arc::new(cm("ns", "b", "3")));
        distributor.delete(Arc::new(cm("ns", "a", "4")));
        drain(&mut dispatcher);
        assert_eq!(recorder.events(), ["add ns/a@1", "update ns/a@1->2", "add ns/b@3", "delete ns/a@4"]);
    }

    #[test]
    fn late_handler_gets_current_contents_as_adds_then_only_later_changes() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        let early = Recorder::new();
        distributor.add_handler(early.clone());
        distributor.upsert(Arc::new(cm("ns", "a", "1")));
        distributor.upsert(Arc::new(cm("ns", "b", "2")));
        // Registered while the changes above are still queued: the snapshot already holds them,
        // so they must not be delivered to it a second time.
        let late = Recorder::new();
        distributor.add_handler(late.clone());
        distributor.delete(Arc::new(cm("ns", "a", "3")));
        drain(&mut dispatcher);
        assert_eq!(early.events(), ["add ns/a@1", "add ns/b@2", "delete ns/a@3"]);
        let mut late_events = late.events();
        late_events[..2].sort();
        assert_eq!(late_events, ["add ns/a@1", "add ns/b@2", "delete ns/a@3"]);
    }

    #[test]
    fn deleting_what_is_not_cached_tells_nobody() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        let recorder = Recorder::new();
        distributor.add_handler(recorder.clone());
        distributor.delete(Arc::new(cm("ns", "never-seen", "1")));
        drain(&mut dispatcher);
        assert!(recorder.events().is_empty());
    }

    #[test]
    fn resync_redelivers_every_cached_object_as_an_update_to_itself() {
        let (distributor, mut dispatcher) = Distributor::new(Store::new());
        distributor.upsert(Arc::new(cm("ns", "a", "1")));
        let recorder = Recorder::new();
        distributor.add_handler(recorder.clone());
        distributor.resync();
        drain(&mut dispatcher);
        assert_eq!(recorder.events(), ["add ns/a@1", "update ns/a@1->1"]);
    }
}
