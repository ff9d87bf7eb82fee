//! The informer: a reflector, a store and the handlers of one collection, shared by everyone
//! who needs that collection.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube_client::Api;
use kube_core::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::handler::{Dispatcher, Distributor};
use super::index::IndexFunc;
use super::list_watch::ListWatch;
use super::reflector::{Parts, Reflector};
use super::sync::{Cache, wait_for_caches};
use super::transform::{TransformFunc, default_transform};
use super::{Config, Error, EventHandler, Store};

/// Lists and watches one collection into an indexed [`Store`] and tells [`EventHandler`]s about
/// every change. See the [module contract](super) for ordering and consistency.
///
/// ```no_run
/// use std::{sync::Arc, time::Duration};
/// use operator_runtime::informer::{Config, Informer};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use tokio_util::sync::CancellationToken;
///
/// # async fn example(client: kube_client::Client) -> Result<(), operator_runtime::informer::Error> {
/// let informer = Arc::new(Informer::new(kube_client::Api::<ConfigMap>::namespaced(client, "default"), Config::default()));
/// let cancel = CancellationToken::new();
/// let task = tokio::spawn({
///     let (informer, cancel) = (informer.clone(), cancel.clone());
///     async move { informer.run(cancel).await }
/// });
/// informer.wait_for_sync(Duration::from_secs(30)).await?;
/// println!("{} config maps", informer.store().len());
/// cancel.cancel();
/// task.await.unwrap();
/// # Ok(())
/// # }
/// ```
pub struct Informer<K> {
    resource: String,
    /// One collection, or one per namespace (each with its namespace).
    list_watches: Vec<(Option<String>, Arc<dyn ListWatch<K>>)>,
    config: Config,
    store: Store<K>,
    distributor: Arc<Distributor<K>>,
    dispatcher: Mutex<Option<Dispatcher<K>>>,
    transform: Mutex<TransformFunc<K>>,
    synced: Arc<watch::Sender<bool>>,
}

impl<K> fmt::Debug for Informer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Informer")
            .field("resource", &self.resource)
            .field("synced", &*self.synced.borrow())
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    /// An informer of the collection `api` addresses (one namespace, or all).
    pub fn new(api: Api<K>, config: Config) -> Self {
        Self::from_list_watch(api, config)
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    /// An informer reading through any [`ListWatch`]: a fake, for tests.
    pub fn from_list_watch(list_watch: impl ListWatch<K>, config: Config) -> Self {
        Self::from_scoped(vec![(None, Arc::new(list_watch))], config)
    }

    /// An informer of several namespaces, each read through its own [`ListWatch`] (which must
    /// list and watch that namespace's objects only) into one store and one set of handlers;
    /// see the [module contract](super) on several namespaces.
    pub fn from_namespaced_list_watches(list_watches: Vec<(String, Arc<dyn ListWatch<K>>)>, config: Config) -> Self {
        Self::from_scoped(list_watches.into_iter().map(|(ns, lw)| (Some(ns), lw)).collect(), config)
    }

    fn from_scoped(list_watches: Vec<(Option<String>, Arc<dyn ListWatch<K>>)>, config: Config) -> Self {
        let store = Store::new();
        let (distributor, dispatcher) = Distributor::new(store.clone());
        let (synced, _) = watch::channel(false);
        Informer {
            resource: resource_name::<K>(),
            list_watches,
            config,
            store,
            distributor: Arc::new(distributor),
            dispatcher: Mutex::new(Some(dispatcher)),
            transform: Mutex::new(default_transform()),
            synced: Arc::new(synced),
        }
    }

    /// The resource this informer watches, as in metrics and logs: `configmaps`,
    /// `deployments.apps`.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// A read handle on the cache.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Adds the index `name` (replacing one of that name) and files the cached objects under
    /// it. Meant to be called before [`run`](Self::run); later works too.
    pub fn add_indexer(&self, name: &str, f: IndexFunc<K>) {
        self.store.add_indexer(name, f);
    }

    /// Replaces the transform applied to each object before it is cached (default:
    /// [`strip_managed_fields`](super::strip_managed_fields)). Takes effect at the next
    /// [`run`](Self::run): call it before.
    pub fn set_transform(&self, f: TransformFunc<K>) {
        *self.transform.lock().unwrap_or_else(PoisonError::into_inner) = f;
    }

    /// Registers `handler`. It first gets `on_add` for every object cached now (none before
    /// the first sync), then every later change, in order.
    pub fn add_event_handler(&self, handler: Arc<dyn EventHandler<K>>) {
        self.distributor.add_handler(handler);
    }

    /// True once the first full list is in the store (and forever after).
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until [`has_synced`](Self::has_synced).
    ///
    /// # Errors
    ///
    /// [`Error::SyncTimeout`] after `timeout`, e.g. when the apiserver is unreachable, the
    /// informer was never [run](Self::run), or RBAC forbids listing.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: it only observes.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), Error> {
        wait_for_caches(&[self], timeout).await
    }

    /// Resolves once synced.
    pub(crate) async fn synced(&self) {
        let mut synced = self.synced.subscribe();
        // Fails only when the sender is dropped, and `self` holds it.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// Lists, watches and calls the handlers until `cancel` fires.
    ///
    /// # Panics
    ///
    /// When called a second time: an informer runs once (handlers were handed to the first run).
    /// A panicking [`EventHandler`] panics here too.
    ///
    /// # Cancellation safety
    ///
    /// Stops at the next await after `cancel` fires (or when the future is dropped); changes
    /// queued for handlers but not yet delivered are dropped. The store keeps its contents.
    pub async fn run(&self, cancel: CancellationToken) {
        let dispatcher = self.dispatcher.lock().unwrap_or_else(PoisonError::into_inner).take();
        let dispatcher = dispatcher.expect("Informer::run called twice; an informer runs once");
        let metrics = self.config.metrics.as_ref().map(|m| m.for_resource(&self.resource)).unwrap_or_default();
        let transform = self.transform.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let (mut reflectors, mut each_synced) = (Vec::new(), Vec::new());
        for (namespace, list_watch) in &self.list_watches {
            let (synced, receiver) = watch::channel(false);
            each_synced.push(receiver);
            let reflector = Reflector::new(Parts {
                list_watch: list_watch.clone(),
                distributor: self.distributor.clone(),
                transform: transform.clone(),
                metrics: metrics.clone(),
                config: self.config.clone(),
                resource: self.resource.clone(),
                namespace: namespace.clone(),
                synced: Arc::new(synced),
            });
            reflectors.push(reflector.run());
        }
        // Synced once every collection's first fetch is in the store.
        let all_synced = async {
            for mut synced in each_synced {
                // Fails only when the reflector is dropped, which ends this select too.
                let _ = synced.wait_for(|synced| *synced).await;
            }
            self.synced.send_if_modified(|synced| !std::mem::replace(synced, true));
            std::future::pending::<()>().await
        };
        info!(resource = %self.resource, "informer starting");
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {}
            _ = futures::future::join_all(reflectors) => {}
            _ = all_synced => {}
            _ = dispatcher.run(metrics) => {}
            _ = self.resync() => {}
        }
        info!(resource = %self.resource, "informer stopped");
    }

    /// Every `resync_period`, re-delivers the cache as updates; never returns.
    async fn resync(&self) {
        let Some(period) = self.config.resync_period.filter(|period| !period.is_zero()) else {
            return std::future::pending().await;
        };
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if self.has_synced() {
                self.distributor.resync();
            }
        }
    }
}

/// `plural` for the core group, `plural.group` otherwise: the name `kubectl` and RBAC use.
pub(super) fn resource_name<K: Resource<DynamicType = ()>>() -> String {
    let (plural, group) = (K::plural(&()), K::group(&()));
    if group.is_empty() { plural.into_owned() } else { format!("{plural}.{group}") }
}

impl<K: Resource<DynamicType = ()> + Send + Sync + 'static> Cache for Informer<K> {
    fn resource(&self) -> &str {
        Informer::resource(self)
    }

    fn has_synced(&self) -> bool {
        Informer::has_synced(self)
    }

    fn synced(&self) -> BoxFuture<'_, ()> {
        Informer::synced(self).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn resource_names_carry_the_group_unless_core() {
        assert_eq!(resource_name::<ConfigMap>(), "configmaps");
        assert_eq!(resource_name::<Deployment>(), "deployments.apps");
    }
}
