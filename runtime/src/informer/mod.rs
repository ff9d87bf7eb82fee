//! A hand-built informer: client-go's `tools/cache` (Reflector, thread-safe indexed store,
//! SharedIndexInformer, SharedInformerFactory) for Rust.
//!
//! ```text
//! apiserver --list / watch--> Reflector --transform--> Store (items + indices, one lock)
//!             (ListWatch)        |                          |
//!                                +---- deltas, in order --> Dispatcher --> EventHandlers
//! ```
//!
//! # Contract
//!
//! **Getting the state.** An informer first fetches the whole collection, then watches it from
//! the resourceVersion of that fetch. The fetch is a *streaming list* when the apiserver supports
//! it (a watch with `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan` and
//! `allowWatchBookmarks`, whose initial events end at a bookmark annotated
//! `k8s.io/initial-events-end: "true"`), otherwise a *paginated list* (`limit` = 500 and
//! `continue`). With [`InitialListMode::Auto`] (the default) it tries streaming once, and when
//! the apiserver refuses it (400 / 422) or the end bookmark does not come within
//! [`Config::initial_events_timeout`] of quiet, it uses paginated lists for the rest of the
//! informer's life. Both read at the latest resourceVersion (a consistent read), so the cache
//! never goes back in time.
//!
//! **Staying current.** Watches carry `allowWatchBookmarks` and a `timeoutSeconds` drawn from
//! [300, 600]. When one ends it is reopened from the last resourceVersion seen (objects and
//! bookmarks both advance it). `410 Gone` (HTTP or a watch `ERROR` event, code 410 or reason
//! `Expired`) means that resourceVersion is compacted away: the informer *relists*. Any other
//! failure is logged (`warn`), counted ([`Metrics`]) and retried after a backoff of 800 ms
//! doubling to 30 s, plus up to 100% jitter, reset after 2 minutes without failure.
//!
//! **Relist.** A relist (and the end of a streaming list) replaces the cache in one step: a
//! reader sees all of the old contents or all of the new. Handlers then get, for what changed
//! while the watch was down: `on_update(old, new)` for each object whose resourceVersion changed,
//! `on_add` for each new object, then `on_delete` for each object that vanished (its last known
//! state). Unchanged objects produce no call.
//!
//! **Several namespaces.** An informer of a [`Factory`] made [for a list of
//! namespaces](Factory::for_namespaces) has one list and watch per namespace (each with its
//! own resourceVersion, backoff and relists) into one store and one set of handlers; a
//! namespace's relist replaces that namespace's objects alone, and the informer has synced once
//! every namespace's first fetch is in the store. It never lists or watches across namespaces,
//! so it needs no cluster-wide grant.
//!
//! **Queries.** A [`Store`] keeps items and indices under one `RwLock`: each query (`get`,
//! `list`, `by_index`, `len`) is one consistent snapshot; separate queries may see different
//! ones. The store may be *behind* the apiserver (by the watch latency, or for as long as the
//! apiserver is unreachable) but never ahead, and never out of order. Objects are cached as
//! `Arc<K>` after the transform (default: drop `metadata.managedFields`) and keyed `namespace/name`
//! or `name` ([`key_of`]). Every store has the index [`NAMESPACE_INDEX`]; add more with
//! [`Informer::add_indexer`] (e.g. [`controller_uid_index`]). Empty index sets are deleted.
//!
//! **Handlers.** [`EventHandler`]s are called from the informer's task, one call at a time, in
//! the order the cache changed, after the store changed (a handler looking at the store sees
//! the change, or a later state). A handler added at any time first gets `on_add` for every
//! object then cached, then every later change, with nothing missed and nothing twice. With
//! [`Config::resync_period`] set, every cached object is re-delivered as `on_update(obj, obj)`
//! that often. [`Informer::has_synced`] turns true once the first full fetch is in the store
//! (the handlers may still be receiving its adds).
//!
//! **Not promised.** The store is not linearizable with the apiserver: a write you just made may
//! not be cached yet. After a relist, handlers get the net change only, not the intermediate
//! states the watch missed. Handler calls lag the store by the length of the handler queue.

mod backoff;
mod config;
mod decode;
mod error;
mod factory;
mod handler;
mod index;
mod list_watch;
mod metrics;
mod reflector;
mod shared;
mod store;
mod sync;
mod transform;
pub mod view;

#[cfg(test)]
pub(crate) mod tests;

pub use config::{Config, InitialListMode};
pub use decode::ListPage;
pub use error::{Error, Undecodable};
pub use factory::Factory;
pub use handler::EventHandler;
pub use index::{CONTROLLER_UID_INDEX, IndexFunc, NAMESPACE_INDEX, controller_uid_index, namespace_index};
pub use list_watch::{ListWatch, WatchStream};
pub use metrics::Metrics;
pub use shared::Informer;
pub use store::{Store, key_of};
pub use sync::{Cache, wait_for_caches};
pub use transform::{TransformFunc, strip_annotations_and_managed_fields, strip_managed_fields};
