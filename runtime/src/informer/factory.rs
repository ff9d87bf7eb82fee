//! One informer per kind, shared by every controller that asks for it.
//!
//! Like client-go's `SharedInformerFactory`: every `informer::<K>()` call for the same `K`
//! returns the same [`Informer`], so two controllers watching Deployments cost one list, one
//! watch and one cache. All informers of a factory use its client, namespaces and [`Config`]:
//! all namespaces, one, or a list of them (one list and watch per namespace, into one cache).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube_client::Client;
use kube_core::Resource;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::list_watch::{ListWatch, UrlListWatch, is_namespaced};
use super::shared::resource_name;
use super::{Cache, Config, Error, Informer, wait_for_caches};

/// Hands out one shared [`Informer`] per kind, and starts and waits for them together.
///
/// ```no_run
/// use std::time::Duration;
/// use operator_runtime::informer::{Config, Factory};
/// use k8s_openapi::api::apps::v1::Deployment;
/// use tokio_util::sync::CancellationToken;
///
/// # async fn example(client: kube_client::Client) -> Result<(), operator_runtime::informer::Error> {
/// let factory = Factory::new(client, Some("default".into()), Config::default());
/// let deployments = factory.informer::<Deployment>();
/// let cancel = CancellationToken::new();
/// let tasks = factory.start(cancel.clone());
/// factory.wait_for_cache_sync(Duration::from_secs(60)).await?;
/// println!("{} deployments", deployments.store().len());
/// cancel.cancel();
/// for task in tasks {
///     task.await.unwrap();
/// }
/// # Ok(())
/// # }
/// ```
pub struct Factory {
    client: Client,
    /// Empty: all namespaces.
    namespaces: Vec<String>,
    config: Config,
    informers: Mutex<HashMap<TypeId, Entry>>,
    stops: Arc<Stops>,
}

/// The informers that ended before their cancellation (a panicking handler or index
/// function ends one), and a wake-up for whoever waits on that.
#[derive(Default)]
struct Stops {
    resources: Mutex<Vec<String>>,
    notify: tokio::sync::Notify,
}

/// Held by an informer's task: dropped when the task ends, by a return or by a panic.
struct StopGuard {
    resource: String,
    cancel: CancellationToken,
    stops: Arc<Stops>,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        if !self.cancel.is_cancelled() {
            tracing::error!(resource = %self.resource, "informer stopped before it was cancelled; its cache is frozen");
            self.stops.resources.lock().unwrap_or_else(PoisonError::into_inner).push(self.resource.clone());
            self.stops.notify.notify_waiters();
        }
    }
}

struct Entry {
    informer: Arc<dyn Any + Send + Sync>,
    erased: Arc<dyn Erased>,
    started: bool,
    label_selector: Option<String>,
}

impl fmt::Debug for Factory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resources: Vec<String> = self.erased().iter().map(|informer| informer.resource().to_string()).collect();
        f.debug_struct("Factory")
            .field("namespaces", &self.namespaces)
            .field("informers", &resources)
            .finish_non_exhaustive()
    }
}

impl Factory {
    /// A factory of informers over `client`, in `namespace` (all namespaces when `None`;
    /// cluster-scoped kinds ignore it), all configured with `config`.
    pub fn new(client: Client, namespace: Option<String>, config: Config) -> Self {
        Self::for_namespaces(client, namespace.into_iter().collect(), config)
    }

    /// A factory of informers over `client` in exactly `namespaces` (all namespaces when
    /// empty; empty names are ignored): each informer of a namespaced kind lists and watches
    /// each of them apart, into one cache, and never across namespaces (so a Role in each is
    /// grant enough).
    pub fn for_namespaces(client: Client, mut namespaces: Vec<String>, config: Config) -> Self {
        namespaces.retain(|namespace| !namespace.is_empty());
        namespaces.sort();
        namespaces.dedup();
        Factory { client, namespaces, config, informers: Mutex::new(HashMap::new()), stops: Arc::default() }
    }

    /// The shared informer of `K`, created on first use. An informer created after
    /// [`start`](Self::start) is started by the next `start`.
    pub fn informer<K>(&self) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    {
        self.informer_with(None)
    }

    /// The shared informer of `K` that caches only the objects matching `label_selector`
    /// (e.g. `app.kubernetes.io/managed-by=database-operator`): what a controller keeps of a
    /// kind whose objects are mostly not its own (Secrets, claims), so its memory grows with
    /// its own objects, not with the cluster. An object that does not match is invisible: to
    /// never overwrite one, create such children rather than apply them when absent.
    ///
    /// # Panics
    ///
    /// If the informer of `K` already exists with another selector: one kind, one cache.
    pub fn informer_selected<K>(&self, label_selector: &str) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    {
        self.informer_with(Some(label_selector))
    }

    fn informer_with<K>(&self, label_selector: Option<&str>) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    {
        let mut informers = self.informers.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = informers.entry(TypeId::of::<K>()).or_insert_with(|| {
            let config = Config { label_selector: label_selector.map(str::to_string), ..self.config.clone() };
            let received = config.metrics.as_ref().map(|m| m.received_bytes(&resource_name::<K>())).unwrap_or_default();
            let informer = Arc::new(if self.namespaces.len() > 1 && is_namespaced::<K>() {
                let each = self.namespaces.iter().map(|namespace| {
                    let list_watch =
                        UrlListWatch::<K>::new(self.client.clone(), Some(namespace)).counting(received.clone());
                    (namespace.clone(), Arc::new(list_watch) as Arc<dyn ListWatch<K>>)
                });
                Informer::from_namespaced_list_watches(each.collect(), config)
            } else {
                let namespace = self.namespaces.first().map(String::as_str);
                let list_watch = UrlListWatch::<K>::new(self.client.clone(), namespace).counting(received);
                Informer::from_list_watch(list_watch, config)
            });
            Entry {
                informer: informer.clone(),
                erased: informer,
                started: false,
                label_selector: label_selector.map(str::to_string),
            }
        });
        assert_eq!(
            entry.label_selector.as_deref(),
            label_selector,
            "the informer of {} exists with another label selector",
            std::any::type_name::<K>()
        );
        entry.informer.clone().downcast::<Informer<K>>().expect("entries are keyed by the TypeId of their kind")
    }

    /// Runs every informer not yet started, each on its own task, until `cancel` fires. Await
    /// the handles after cancelling to know they stopped. An informer that ends before `cancel`
    /// fires (a panicking event handler or index function ends it) is reported by
    /// [`stopped`](Self::stopped) and [`wait_for_unexpected_stop`](Self::wait_for_unexpected_stop).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(&self, cancel: CancellationToken) -> Vec<JoinHandle<()>> {
        let mut informers = self.informers.lock().unwrap_or_else(PoisonError::into_inner);
        let mut tasks = Vec::new();
        for entry in informers.values_mut().filter(|entry| !entry.started) {
            entry.started = true;
            let guard = StopGuard {
                resource: entry.erased.resource().to_string(),
                cancel: cancel.clone(),
                stops: self.stops.clone(),
            };
            let run = entry.erased.clone().run(cancel.clone());
            tasks.push(tokio::spawn(async move {
                let _guard = guard;
                run.await;
            }));
        }
        tasks
    }

    /// Whether every informer created so far has synced and none has stopped unexpectedly:
    /// what `/readyz` reports, computed afresh at every call.
    pub fn has_synced(&self) -> bool {
        self.stopped().is_empty() && self.erased().iter().all(|informer| informer.has_synced())
    }

    /// The resources whose informer ended before it was cancelled: their caches are frozen.
    pub fn stopped(&self) -> Vec<String> {
        self.stops.resources.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits until an informer ends before it was cancelled, and returns its resource. The
    /// operator stops when this returns: a frozen cache must not be reconciled from.
    ///
    /// # Cancellation safety
    ///
    /// Safe: it only waits.
    pub async fn wait_for_unexpected_stop(&self) -> String {
        loop {
            let notified = self.stops.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(resource) = self.stopped().into_iter().next() {
                return resource;
            }
            notified.await;
        }
    }

    /// Waits until every informer created so far has synced.
    ///
    /// # Errors
    ///
    /// [`Error::SyncTimeout`] naming the resources not synced after `timeout`.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), Error> {
        let informers = self.erased();
        let caches: Vec<&dyn Cache> = informers.iter().map(|informer| informer.as_cache()).collect();
        wait_for_caches(&caches, timeout).await
    }

    fn erased(&self) -> Vec<Arc<dyn Erased>> {
        let informers = self.informers.lock().unwrap_or_else(PoisonError::into_inner);
        let mut erased: Vec<_> = informers.values().map(|entry| entry.erased.clone()).collect();
        erased.sort_by(|a, b| a.resource().cmp(b.resource()));
        erased
    }
}

/// What the factory does with an informer without knowing its kind.
trait Erased: Cache {
    fn as_cache(&self) -> &dyn Cache;
    fn run(self: Arc<Self>, cancel: CancellationToken) -> BoxFuture<'static, ()>;
}

impl<K: Resource<DynamicType = ()> + Send + Sync + 'static> Erased for Informer<K> {
    fn as_cache(&self) -> &dyn Cache {
        self
    }

    fn run(self: Arc<Self>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
        async move { Informer::run(&self, cancel).await }.boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn factory() -> Factory {
        // Never connects: nothing here lists or watches.
        let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
        Factory::new(Client::try_from(config).unwrap(), Some("ns".into()), Config::default())
    }

    #[tokio::test]
    async fn the_same_kind_gets_the_same_informer() {
        let factory = factory();
        let a = factory.informer::<ConfigMap>();
        let b = factory.informer::<ConfigMap>();
        assert!(Arc::ptr_eq(&a, &b));
        let deployments = factory.informer::<Deployment>();
        assert_eq!(deployments.resource(), "deployments.apps");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_cache_sync_names_the_informers_that_did_not_sync() {
        let factory = factory();
        factory.informer::<ConfigMap>();
        factory.informer::<Deployment>();
        let error = factory.wait_for_cache_sync(Duration::from_secs(5)).await.unwrap_err();
        assert!(error.is_sync_timeout());
        assert!(error.to_string().contains("configmaps, deployments.apps"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn start_runs_each_informer_once_and_cancel_stops_them() {
        let factory = factory();
        factory.informer::<ConfigMap>();
        let cancel = CancellationToken::new();
        let mut tasks = factory.start(cancel.clone());
        assert_eq!(tasks.len(), 1);
        factory.informer::<Deployment>();
        let later = factory.start(cancel.clone());
        assert_eq!(later.len(), 1, "only the new informer starts");
        tasks.extend(later);
        cancel.cancel();
        for task in tasks {
            task.await.unwrap();
        }
    }
}
