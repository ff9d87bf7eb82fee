//! Waiting for caches to sync: the one way, used by an informer, the factory and the
//! controller alike (client-go's `WaitForCacheSync`).
//!
//! A cache has synced once its informer's first full list is in the store. Waiting does not
//! poll: each informer signals the moment it syncs.

use std::time::Duration;

use futures::future::{BoxFuture, join_all};

use super::Error;

/// A cache one can wait for, whatever its kind.
pub trait Cache: Send + Sync {
    /// Its resource, as in logs and metrics (`deployments.apps`).
    fn resource(&self) -> &str;
    /// Whether its first full list is in the store.
    fn has_synced(&self) -> bool;
    /// Resolves once it has synced.
    fn synced(&self) -> BoxFuture<'_, ()>;
}

/// Waits until every one of `caches` has synced.
///
/// # Errors
///
/// [`Error::SyncTimeout`] naming the resources not synced after `timeout`.
///
/// # Cancellation safety
///
/// Cancel-safe: it only observes.
pub async fn wait_for_caches(caches: &[&dyn Cache], timeout: Duration) -> Result<(), Error> {
    let all_synced = join_all(caches.iter().map(|cache| cache.synced()));
    if tokio::time::timeout(timeout, all_synced).await.is_ok() {
        return Ok(());
    }
    let pending: Vec<&str> = caches.iter().filter(|cache| !cache.has_synced()).map(|cache| cache.resource()).collect();
    if pending.is_empty() {
        return Ok(());
    }
    Err(Error::SyncTimeout { resources: pending.join(", "), timeout })
}
