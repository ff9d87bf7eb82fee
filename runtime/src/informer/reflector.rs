//! The list -> watch -> relist state machine that keeps a store in step with the apiserver.
//!
//! ```text
//!        +-------------------- 410 Gone (relist) ---------------------+
//!        v                                                            |
//!   [sync] --ok--> [watch from rv] --closed normally--> [watch from rv]-+
//!     |  ^               |                                   ^
//!     |  +-- backoff --+ +--- other error --> backoff -------+
//!     +-- error -------+
//! ```
//!
//! - **sync** fetches the whole collection and replaces the cache in one step: a streaming list
//!   (one watch with `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`,
//!   `allowWatchBookmarks`, ending at the bookmark annotated `k8s.io/initial-events-end: "true"`,
//!   whose stream then simply goes on as the watch), or a paginated list (`limit`, `continue`),
//!   read consistently (no resourceVersion) so a relist never goes back in time.
//! - **watch** starts from the last resourceVersion seen (list, event or bookmark), with
//!   `allowWatchBookmarks` and a `timeoutSeconds` drawn from [300, 600] as client-go does, so the
//!   watches of many clients do not all end, and reconnect, at the same moment.
//! - **410 Gone** (HTTP answer or `ERROR` event) means the resourceVersion was compacted away:
//!   sync again at once. Any other failure: log it, count it, [back off](super::backoff), and
//!   watch again from the same resourceVersion. A 410 on a list page's continue token means
//!   the list outlived etcd's compaction: one unpaginated list instead, as client-go's pager
//!   does.
//! - **An object that does not decode** (a list item or a watch event, see
//!   [`decode`](super::decode)) is logged, counted and left out of the cache; the rest of the
//!   list or watch goes on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube_core::params::{ListParams, WatchParams};
use kube_core::{Resource, WatchEvent};
use rand::Rng;
use tokio::sync::watch;
use tokio::time::{Instant, timeout_at};
use tracing::{debug, warn};

use super::backoff::Backoff;
use super::error::Undecodable;
use super::handler::Distributor;
use super::list_watch::{ListWatch, WatchStream};
use super::metrics::ResourceMetrics;
use super::store::key_of;
use super::transform::TransformFunc;
use super::{Config, Error, InitialListMode};

/// The annotation on the bookmark that ends the initial events of a streaming list.
pub(crate) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";
/// Watch `timeoutSeconds` is drawn from this range: client-go's `[minWatchTimeout, 2 *
/// minWatchTimeout]` with its 5 minute minimum.
const WATCH_TIMEOUT_SECONDS: std::ops::RangeInclusive<u32> = 300..=600;
/// A watch still open this long after its `timeoutSeconds` lost its connection without noticing
/// (no read timeout on the client): drop it and watch again.
const WATCH_SLACK: Duration = Duration::from_secs(30);
/// A watch that closes sooner than this without any event is an error (client-go's "very short
/// watch"), so a server closing watches at once is backed off instead of hammered.
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// Keeps one informer's store in step with the apiserver.
pub(crate) struct Reflector<K> {
    list_watch: Arc<dyn ListWatch<K>>,
    distributor: Arc<Distributor<K>>,
    transform: TransformFunc<K>,
    config: Config,
    metrics: ResourceMetrics,
    resource: String,
    namespace: Option<String>,
    synced: Arc<watch::Sender<bool>>,
    backoff: Backoff,
    /// The last resourceVersion seen; the next watch starts there.
    resource_version: String,
    /// Auto mode found that this apiserver refuses streaming lists (a 400 or 422 answer).
    streaming_unsupported: bool,
}

/// What a reflector is made of: its informer's parts.
pub(crate) struct Parts<K> {
    pub(crate) list_watch: Arc<dyn ListWatch<K>>,
    pub(crate) distributor: Arc<Distributor<K>>,
    pub(crate) transform: TransformFunc<K>,
    pub(crate) config: Config,
    pub(crate) metrics: ResourceMetrics,
    /// The resource's name in logs and metrics.
    pub(crate) resource: String,
    /// The one namespace `list_watch` reads, of an informer over several: a relist replaces
    /// that namespace's objects alone. `None`: the whole store.
    pub(crate) namespace: Option<String>,
    /// Set to true once the first full list is in the store.
    pub(crate) synced: Arc<watch::Sender<bool>>,
}

/// A watch in progress.
struct OpenWatch<K> {
    stream: WatchStream<K>,
    started: Instant,
    deadline: Instant,
    events: usize,
}

impl<K: Resource + Send + Sync + 'static> Reflector<K> {
    /// A reflector that has seen nothing yet: it starts with a full list.
    pub(crate) fn new(parts: Parts<K>) -> Self {
        let Parts { list_watch, distributor, transform, config, metrics, resource, namespace, synced } = parts;
        Reflector {
            list_watch,
            distributor,
            transform,
            config,
            metrics,
            resource,
            namespace,
            synced,
            backoff: Backoff::default(),
            resource_version: String::new(),
            streaming_unsupported: false,
        }
    }

    /// Lists and watches forever.
    ///
    /// # Cancellation safety
    ///
    /// Drop it to stop; the cache keeps its contents, and nothing half-applied is left in it (a
    /// sync replaces the cache only once complete).
    pub(crate) async fn run(mut self) {
        loop {
            match self.sync().await {
                Ok(open) => self.watch(open).await,
                Err(error) => {
                    self.metrics.list_errors.inc();
                    warn!(resource = %self.resource, %error, "list failed; backing off");
                    self.back_off().await;
                }
            }
        }
    }

    async fn back_off(&mut self) {
        tokio::time::sleep(self.backoff.next_delay(Instant::now())).await;
    }

    /// Fills the cache with the whole collection; returns the streaming list's watch, if any.
    async fn sync(&mut self) -> Result<Option<OpenWatch<K>>, Error> {
        let stream = match self.config.initial_list {
            InitialListMode::List => false,
            InitialListMode::Streaming => true,
            InitialListMode::Auto => !self.streaming_unsupported,
        };
        if stream {
            match self.stream_initial_events().await {
                Ok(open) => return Ok(Some(open)),
                // Only an explicit refusal (400, 422) says the server cannot stream lists: use
                // paginated lists from now on.
                Err(error) if self.config.initial_list == InitialListMode::Auto && error.is_streaming_rejected() => {
                    self.metrics.list_errors.inc();
                    warn!(resource = %self.resource, %error, "the apiserver refuses streaming lists; using paginated lists from now on");
                    self.streaming_unsupported = true;
                }
                // A quiet stream may be a slow moment (a busy apiserver, a large collection):
                // one paginated list now, and a streaming list again at the next sync.
                Err(error @ Error::InitialEventsIncomplete) if self.config.initial_list == InitialListMode::Auto => {
                    self.metrics.list_errors.inc();
                    warn!(resource = %self.resource, %error, "streaming list incomplete; one paginated list instead");
                }
                Err(error) => return Err(error),
            }
        }
        self.list().await?;
        Ok(None)
    }

    /// A paginated list.
    async fn list(&mut self) -> Result<(), Error> {
        self.metrics.lists.inc();
        let mut params = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            limit: (self.config.page_size > 0).then_some(self.config.page_size),
            ..ListParams::default()
        };
        let mut objects = Vec::new();
        let resource_version = loop {
            let page = match self.list_watch.list(&params).await {
                // The continue token outlived etcd's compaction: as client-go's pager does, one
                // unpaginated list instead, from the start.
                Err(error) if error.is_gone() && params.continue_token.is_some() => {
                    warn!(resource = %self.resource, %error, "continue token expired; one unpaginated list instead");
                    objects.clear();
                    params.continue_token = None;
                    params.limit = None;
                    self.list_watch.list(&params).await?
                }
                page => page?,
            };
            objects.extend(page.items.into_iter().map(|obj| Arc::new((self.transform)(obj))));
            for bad in page.undecodable {
                self.set_aside(&bad);
            }
            match page.continue_token.filter(|token| !token.is_empty()) {
                Some(token) => params.continue_token = Some(token),
                None => break page.resource_version.unwrap_or_default(),
            }
        };
        self.replace(objects, resource_version);
        Ok(())
    }

    /// A streaming list: collects the initial events, replaces the cache at the end bookmark,
    /// and hands back the stream to go on watching.
    async fn stream_initial_events(&mut self) -> Result<OpenWatch<K>, Error> {
        self.metrics.lists.inc();
        let params = WatchParams { send_initial_events: true, ..self.watch_params() };
        // "" with NotOlderThan: a consistent read, as fresh as a quorum read from etcd.
        let mut open = self.open_watch(&params, "").await?;
        // Only Auto mode gives up on a quiet stream; a forced streaming list waits for the end.
        let quiet_limit =
            (self.config.initial_list == InitialListMode::Auto).then_some(self.config.initial_events_timeout);
        let mut objects = BTreeMap::new();
        loop {
            let wait_until = quiet_limit.map_or(open.deadline, |limit| open.deadline.min(Instant::now() + limit));
            let event = match timeout_at(wait_until, open.stream.next()).await {
                Ok(Some(Err(Error::Undecodable(bad)))) => {
                    open.events += 1;
                    self.set_aside(&bad);
                    if let Some(key) = bad.key() {
                        objects.remove(&key);
                    }
                    continue;
                }
                Ok(Some(event)) => event?,
                Ok(None) | Err(_) => return Err(Error::InitialEventsIncomplete),
            };
            open.events += 1;
            self.metrics.event(&event);
            match event {
                WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                    let obj = (self.transform)(obj);
                    objects.insert(key_of(&obj), Arc::new(obj));
                }
                WatchEvent::Deleted(obj) => {
                    objects.remove(&key_of(&obj));
                }
                WatchEvent::Bookmark(bookmark) => {
                    if bookmark.metadata.annotations.get(INITIAL_EVENTS_END).is_some_and(|value| value == "true") {
                        self.replace(objects.into_values().collect(), bookmark.metadata.resource_version);
                        return Ok(open);
                    }
                }
                WatchEvent::Error(status) => return Err(Error::WatchEvent(status)),
            }
        }
    }

    fn replace(&mut self, objects: Vec<Arc<K>>, resource_version: String) {
        debug!(resource = %self.resource, objects = objects.len(), %resource_version, "cache replaced");
        let initial = !*self.synced.borrow();
        self.distributor.replace(self.namespace.as_deref(), objects, initial);
        self.resource_version = resource_version;
        self.synced.send_if_modified(|synced| !std::mem::replace(synced, true));
    }

    fn watch_params(&self) -> WatchParams {
        WatchParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            timeout: Some(rand::rng().random_range(WATCH_TIMEOUT_SECONDS)),
            bookmarks: true,
            send_initial_events: false,
        }
    }

    async fn open_watch(&mut self, params: &WatchParams, resource_version: &str) -> Result<OpenWatch<K>, Error> {
        self.metrics.watches.inc();
        let started = Instant::now();
        let stream = self.list_watch.watch(params, resource_version).await?;
        let timeout = Duration::from_secs(params.timeout.unwrap_or(*WATCH_TIMEOUT_SECONDS.start()).into());
        Ok(OpenWatch { stream, started, deadline: started + timeout + WATCH_SLACK, events: 0 })
    }

    /// Watches, re-watching from the last resourceVersion, until a relist is needed.
    async fn watch(&mut self, mut open: Option<OpenWatch<K>>) {
        loop {
            let watch = match open.take() {
                Some(watch) => watch,
                None => {
                    let params = self.watch_params();
                    let resource_version = self.resource_version.clone();
                    match self.open_watch(&params, &resource_version).await {
                        Ok(watch) => watch,
                        Err(error) => {
                            if self.relist_after(error).await {
                                return;
                            }
                            continue;
                        }
                    }
                }
            };
            if let Err(error) = self.consume(watch).await
                && self.relist_after(error).await
            {
                return;
            }
        }
    }

    /// Logs and counts a failed watch. True when the resourceVersion is gone and a relist is
    /// due; otherwise backs off first.
    async fn relist_after(&mut self, error: Error) -> bool {
        self.metrics.watch_errors.inc();
        if error.is_gone() {
            self.metrics.relists.inc();
            warn!(resource = %self.resource, resource_version = %self.resource_version, %error, "watch expired; relisting");
            return true;
        }
        warn!(resource = %self.resource, resource_version = %self.resource_version, %error, "watch failed; backing off");
        self.back_off().await;
        false
    }

    /// Applies a watch's events until it ends: `Ok` when it closed normally.
    async fn consume(&mut self, mut watch: OpenWatch<K>) -> Result<(), Error> {
        loop {
            match timeout_at(watch.deadline, watch.stream.next()).await {
                Err(_) => {
                    debug!(resource = %self.resource, "watch outlived its timeout; watching again");
                    return Ok(());
                }
                Ok(None) if watch.events == 0 && watch.started.elapsed() < SHORT_WATCH => {
                    return Err(Error::ShortWatch);
                }
                Ok(None) => return Ok(()),
                // One bad object: it leaves the cache, and the watch goes on after it.
                Ok(Some(Err(Error::Undecodable(bad)))) => {
                    watch.events += 1;
                    self.set_aside(&bad);
                    if let Some(key) = bad.key() {
                        self.distributor.forget(&key);
                    }
                    if let Some(resource_version) = bad.resource_version.filter(|rv| !rv.is_empty()) {
                        self.resource_version = resource_version;
                    }
                }
                Ok(Some(event)) => {
                    watch.events += 1;
                    self.apply(event?)?;
                }
            }
        }
    }

    /// Logs and counts an object that does not decode; the caller leaves it out of the cache.
    fn set_aside(&self, bad: &Undecodable) {
        self.metrics.undecodable.inc();
        warn!(resource = %self.resource, object = ?bad.key(), error = %bad.error, "an object does not decode; leaving it out of the cache");
    }

    fn apply(&mut self, event: WatchEvent<K>) -> Result<(), Error> {
        self.metrics.event(&event);
        let resource_version = match event {
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                let resource_version = obj.meta().resource_version.clone();
                self.distributor.upsert(Arc::new((self.transform)(obj)));
                resource_version
            }
            WatchEvent::Deleted(obj) => {
                let resource_version = obj.meta().resource_version.clone();
                self.distributor.delete(Arc::new((self.transform)(obj)));
                resource_version
            }
            WatchEvent::Bookmark(bookmark) => Some(bookmark.metadata.resource_version),
            WatchEvent::Error(status) => return Err(Error::WatchEvent(status)),
        };
        if let Some(resource_version) = resource_version.filter(|rv| !rv.is_empty()) {
            self.resource_version = resource_version;
        }
        Ok(())
    }
}
