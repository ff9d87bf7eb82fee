//! The controller: informers feed a rate-limiting work queue, N workers drain it into a
//! reconcile function.
//!
//! ```text
//! primary informer --(key of the object)--------------+
//! owned informers  --(key of the controller owner)----+--> workqueue --> N workers --> Reconciler
//! watched informers --(keys from a mapping function)--+
//! ```
//!
//! # Contract
//!
//! - Keys are `namespace/name` strings ([`crate::informer::key_of`]), held in the queue as
//!   [`ObjectKey`] (`Arc<str>`): the queue copies a key several times per pass (FIFO, item map,
//!   worker), and a shared string makes each copy a reference count instead of an allocation.
//!   The reconciler gets
//!   only the key and reads the object from the informer's cache: the cache is the truth, an
//!   event is only a hint that something changed.
//! - Each event enqueues its keys at a priority ([`crate::workqueue::Priority`]): the initial
//!   list and resyncs are low, and so, with [`Builder::settled`], are the child and status-only
//!   changes of settled objects and of those from the initial list; users' changes are normal
//!   and go first (the table is in `enqueue.rs`).
//! - Workers start only after every registered informer has synced; if that takes longer
//!   than [`Builder::cache_sync_timeout`], [`Controller::run`] returns
//!   [`Error::CacheSyncTimeout`] and no reconcile has run.
//! - Each worker loops: `get`, reconcile, then `forget` on success or `add_rate_limited` on
//!   error, then `done`. A reconcile may ask to run again after a delay
//!   ([`Action::RequeueAfter`]). A panic in reconcile is caught, logged and retried with
//!   backoff like an error; it never takes a worker down.
//! - The queue never hands the same key to two workers at once, so a reconcile of one object
//!   never races another reconcile of the same object.
//! - On cancellation the queue stops taking keys and drains: in-flight reconciles finish,
//!   then [`Controller::run`] returns.

mod builder;
mod enqueue;
mod metrics;
mod worker;

pub use builder::{Builder, Controller};
pub use metrics::Metrics;
pub use worker::{Action, ReconcileError, Reconciler};

use std::sync::Arc;
use std::time::Duration;

/// A key on a controller's queue: `namespace/name`, shared rather than copied.
pub type ObjectKey = Arc<str>;

/// What can stop a controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The informers' caches did not fill in time; usually RBAC forbids the list, or the
    /// resource (e.g. the CRD) is not installed. The informers' logs say which.
    #[error(
        "caches did not sync within {timeout:?} (not synced: {pending}); check that the CRD is installed and that RBAC allows list and watch"
    )]
    CacheSyncTimeout {
        /// How long the controller waited.
        timeout: Duration,
        /// The informers that had not synced.
        pending: String,
    },
}
