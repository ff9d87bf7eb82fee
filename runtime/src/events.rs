//! Kubernetes Events (events.k8s.io/v1) about the objects the operator manages, as
//! `kubectl describe` and `kubectl events` show them.
//!
//! Repeats are merged into a series, the way client-go's events library does: an event with
//! the same object, type, reason, action and note as one published within the last six
//! minutes updates that event's `series` (count and last observed time) instead of creating
//! another object. A failing object reconciled again and again therefore costs one Event
//! and one small patch per retry, never a flood of new objects.
//!
//! Publishing is best effort and off the reconcile's path: [`Recorder::publish`] queues the
//! event and returns; one background task per recorder writes the queue in order (so series
//! are counted right) and logs failures. A reconcile never waits for, nor fails on, an event.
//!
//! Nothing grows without bound, as in client-go's broadcaster and correlator:
//! - the queue holds at most [`QUEUE_LENGTH`] events; beyond that (the apiserver is slow or
//!   away) an event is dropped;
//! - each object may publish a burst of [`SPAM_BURST`] events, then one per
//!   [`SPAM_PERIOD`] (client-go's spam filter: 25, then one per five minutes); beyond that an
//!   event is dropped, so one object failing in a loop cannot crowd out the others;
//!
//! and both are counted in `events_dropped_total{cause="queue_full"|"spam"}`
//! ([`Recorder::register_metrics`]). Give the recorder a client of its own (its own request
//! budget, as controller-runtime's recorder has) so events never wait behind reconciles.

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use kube_core::{ObjectMeta, Resource};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::write::Wrote;

/// How long a published event absorbs its repeats (client-go's isomorphic-event window).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Events queued for the writer at most (client-go's `maxQueuedEvents`).
pub const QUEUE_LENGTH: usize = 1000;
/// Events one object may publish at once (client-go's `defaultSpamBurst`).
pub const SPAM_BURST: u32 = 25;
/// After the burst, one event per this period per object (client-go's `defaultSpamQPS`).
pub const SPAM_PERIOD: Duration = Duration::from_secs(5 * 60);
/// The spam filter forgets objects whose budget has refilled every this many publishes.
const SPAM_PRUNE_EVERY: u64 = 1024;

type DropLabels = [(&'static str, &'static str); 1];

/// Normal or Warning, as `kubectl get events` shows in TYPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something happened as expected (created, updated).
    Normal,
    /// Something needs a human's attention.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    uid: String,
    type_: EventType,
    reason: String,
    action: String,
    note: String,
}

#[derive(Debug, Clone)]
struct Series {
    namespace: String,
    name: String,
    count: i32,
    first_seen: Instant,
}

/// Publishes events for one controller; cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    queue: mpsc::Sender<Request>,
    spam: Arc<SpamFilter>,
    dropped: Family<DropLabels, Counter>,
}

/// A token bucket per object: [`SPAM_BURST`], then one per [`SPAM_PERIOD`].
struct SpamFilter {
    buckets: DefaultKeyedRateLimiter<String>,
    publishes: AtomicU64,
}

impl SpamFilter {
    fn new() -> Self {
        let quota = Quota::with_period(SPAM_PERIOD)
            .expect("a non-zero period")
            .allow_burst(NonZeroU32::new(SPAM_BURST).expect("a non-zero burst"));
        SpamFilter { buckets: RateLimiter::keyed(quota), publishes: AtomicU64::new(0) }
    }

    /// Whether an event about the object `key` may go out now.
    fn allows(&self, key: String) -> bool {
        if self.publishes.fetch_add(1, Ordering::Relaxed) % SPAM_PRUNE_EVERY == SPAM_PRUNE_EVERY - 1 {
            self.buckets.retain_recent();
        }
        self.buckets.check_key(&key).is_ok()
    }
}

/// One queued event.
struct Request {
    regarding: ObjectReference,
    type_: EventType,
    reason: String,
    action: String,
    note: String,
}

/// The background writer: the client and the series seen so far.
struct Writer {
    client: Client,
    controller: String,
    instance: String,
    series: SeriesCache,
}

/// The series published within the window, forgotten in the order they began: each event
/// costs O(1) bookkeeping however many series are open (sweeping the whole map on every new
/// event made publishing N events O(N²)).
#[derive(Debug, Default)]
struct SeriesCache {
    /// The key is shared with `started` (one copy of its strings, not two).
    open: HashMap<Arc<SeriesKey>, Series>,
    /// When each series began, oldest first. A key published again after its series expired
    /// appears twice; the older entry is skipped when its time no longer matches.
    started: VecDeque<(Instant, Arc<SeriesKey>)>,
}

impl SeriesCache {
    /// The series `key` belongs to, if one began within the window before `now`.
    fn live(&mut self, key: &SeriesKey, now: Instant) -> Option<&mut Series> {
        self.forget_expired(now);
        self.open.get_mut(key)
    }

    /// Records that a new series for `key` began at `series.first_seen`.
    fn begin(&mut self, key: SeriesKey, series: Series) {
        let key = Arc::new(key);
        self.started.push_back((series.first_seen, Arc::clone(&key)));
        self.open.insert(key, series);
    }

    fn forget_expired(&mut self, now: Instant) {
        while let Some((began, _)) = self.started.front() {
            if now.saturating_duration_since(*began) < SERIES_WINDOW {
                break;
            }
            let (began, key) = self.started.pop_front().expect("front() was Some");
            if self.open.get(&*key).is_some_and(|series| series.first_seen == began) {
                self.open.remove(&*key);
            }
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("open", &!self.queue.is_closed()).finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder whose events name `controller` (e.g. `example.com/database-operator`) as
    /// the reporting controller and `instance` (e.g. the pod name) as its instance, and the
    /// task that writes them. The task ends, after writing what was queued, once every clone
    /// of the recorder is dropped: await it to flush on shutdown.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub fn new(client: Client, controller: &str, instance: &str) -> (Self, JoinHandle<()>) {
        let (queue, mut requests) = mpsc::channel::<Request>(QUEUE_LENGTH);
        let mut writer = Writer {
            client,
            controller: controller.to_string(),
            instance: instance.to_string(),
            series: SeriesCache::default(),
        };
        let task = tokio::spawn(async move {
            while let Some(request) = requests.recv().await {
                if let Err(err) = writer.write(&request).await {
                    warn!(error = %err, reason = %request.reason, "could not publish an event");
                }
            }
        });
        (Self { queue, spam: Arc::new(SpamFilter::new()), dropped: Family::default() }, task)
    }

    /// Registers `events_dropped_total{cause}`: events dropped because the queue was full
    /// (`queue_full`) or their object published too many (`spam`).
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "events_dropped",
            "Events dropped: queue full, or too many for one object",
            self.dropped.clone(),
        );
        // Both series exist from the start, at 0.
        for cause in ["queue_full", "spam"] {
            let _ = self.dropped.get_or_create(&[("cause", cause)]);
        }
    }

    /// Events dropped so far for `cause` (`queue_full` or `spam`).
    pub fn dropped(&self, cause: &'static str) -> u64 {
        self.dropped.get_or_create(&[("cause", cause)]).get()
    }

    /// Queues an event about `regarding`; it is published, or counted into the series of an
    /// identical recent one, in the background. Never fails and never waits.
    pub fn publish<K>(&self, regarding: &K, type_: EventType, reason: &str, action: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        let meta = regarding.meta();
        let object = meta.uid.clone().unwrap_or_else(|| {
            format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
        });
        if !self.spam.allows(object) {
            self.dropped.get_or_create(&[("cause", "spam")]).inc();
            return;
        }
        let request = Request {
            regarding: ObjectReference {
                api_version: Some(K::api_version(&()).to_string()),
                kind: Some(K::kind(&()).to_string()),
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                ..Default::default()
            },
            type_,
            reason: reason.to_string(),
            action: action.to_string(),
            note: truncate(note, 1024),
        };
        match self.queue.try_send(request) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(request)) => {
                self.dropped.get_or_create(&[("cause", "queue_full")]).inc();
                warn!(reason = %request.reason, "the event queue is full; dropping an event");
            }
            // Closed only when the writer task is gone (the runtime shuts down): nothing to do.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Publishes, in order, the events a reconcile of `regarding` collected in `report`, as
    /// [`Recorder::publish`] does each.
    pub fn publish_report<K>(&self, regarding: &K, action: &str, report: Report)
    where
        K: Resource<DynamicType = ()>,
    {
        for (type_, reason, note) in report.events {
            self.publish(regarding, type_, &reason, action, &note);
        }
    }
}

/// The events one reconcile collects on its way, published together at its end
/// ([`Recorder::publish_report`]), whether it succeeded or not: what it did is told once, in
/// the order it did it, from one place.
#[derive(Debug, Default)]
pub struct Report {
    events: Vec<(EventType, String, String)>,
}

impl Report {
    /// A Normal event.
    pub fn normal(&mut self, reason: impl Into<String>, note: impl Into<String>) {
        self.events.push((EventType::Normal, reason.into(), note.into()));
    }

    /// A Warning event.
    pub fn warning(&mut self, reason: impl Into<String>, note: impl Into<String>) {
        self.events.push((EventType::Warning, reason.into(), note.into()));
    }

    /// Tells what one step wrote, given `(kind, name, what)` per object: one `Created` event
    /// naming every object it created, one `Updated` naming every object it repaired and the
    /// field that differed in each, to match the spec of the `owner` kind. Objects written
    /// together (a Deployment and its Service) get one event, not one each: half the event
    /// writes of the reconcile that creates them.
    pub fn writes(&mut self, owner: &str, writes: &[(&str, &str, &Wrote)]) {
        let created: Vec<String> = writes
            .iter()
            .filter(|(.., wrote)| **wrote == Wrote::Created)
            .map(|(kind, name, _)| format!("{kind} {name}"))
            .collect();
        let updated: Vec<String> = writes
            .iter()
            .filter_map(|(kind, name, wrote)| match wrote {
                Wrote::Updated(field) => Some(format!("{kind} {name} ({field} differed)")),
                _ => None,
            })
            .collect();
        if !created.is_empty() {
            self.normal("Created", format!("created {}", created.join(" and ")));
        }
        if !updated.is_empty() {
            self.normal("Updated", format!("updated {} to match the {owner} spec", updated.join(" and ")));
        }
    }

    /// The events collected so far: type, reason, note.
    pub fn events(&self) -> impl Iterator<Item = (EventType, &str, &str)> {
        self.events.iter().map(|(type_, reason, note)| (*type_, reason.as_str(), note.as_str()))
    }
}

impl Writer {
    async fn write(&mut self, request: &Request) -> Result<(), kube_client::Error> {
        let regarding = &request.regarding;
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".to_string());
        let key = SeriesKey {
            uid: regarding.uid.clone().unwrap_or_default(),
            type_: request.type_,
            reason: request.reason.clone(),
            action: request.action.clone(),
            note: request.note.clone(),
        };
        let now = MicroTime(Timestamp::now());

        if let Some(series) = self.series.live(&key, Instant::now()) {
            let count = series.count + 1;
            let events: Api<Event> = Api::namespaced(self.client.clone(), &series.namespace);
            let patch = serde_json::json!({
                "series": EventSeries { count, last_observed_time: now.clone() },
            });
            match events.patch(&series.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    series.count = count;
                    return Ok(());
                }
                // The Event was deleted (or expired: the apiserver keeps events an hour by
                // default): begin a new series rather than fail every repeat.
                Err(kube_client::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(err),
            }
        }

        let name = regarding.name.as_deref().unwrap_or("object");
        let event = Event {
            metadata: ObjectMeta {
                // client-go's naming: the object's name and the time, in hex nanoseconds.
                name: Some(format!("{name}.{:x}", now.0.as_nanosecond())),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(now),
            type_: Some(request.type_.as_str().to_string()),
            reason: Some(request.reason.clone()),
            action: Some(request.action.clone()),
            note: Some(request.note.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            regarding: Some(regarding.clone()),
            ..Default::default()
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let created = events.create(&PostParams::default(), &event).await?;
        let name = created.metadata.name.unwrap_or_default();
        self.series.begin(key, Series { namespace, name, count: 1, first_seen: Instant::now() });
        Ok(())
    }
}

/// Event notes are limited to 1 kB by the apiserver.
fn truncate(note: &str, max: usize) -> String {
    if note.len() <= max {
        return note.to_string();
    }
    let mut end = max;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(reason: &str) -> SeriesKey {
        SeriesKey {
            uid: "uid-1".into(),
            type_: EventType::Warning,
            reason: reason.into(),
            action: "Reconcile".into(),
            note: "the apiserver refused".into(),
        }
    }

    fn series(first_seen: Instant) -> Series {
        Series { namespace: "ns".into(), name: "db.1".into(), count: 1, first_seen }
    }

    #[test]
    fn a_repeat_within_the_window_finds_its_series_and_a_later_one_does_not() {
        let start = Instant::now();
        let mut cache = SeriesCache::default();
        cache.begin(key("Failed"), series(start));

        let within = cache.live(&key("Failed"), start + SERIES_WINDOW - Duration::from_secs(1));
        within.expect("a repeat inside the window").count += 1;
        assert_eq!(cache.open[&key("Failed")].count, 2);
        assert!(cache.live(&key("Other"), start).is_none());
        assert!(cache.live(&key("Failed"), start + SERIES_WINDOW).is_none(), "six minutes later: a new event");
        assert_eq!(cache.open.len(), 0, "the expired series is forgotten");
    }

    #[test]
    fn a_series_begun_again_is_not_forgotten_with_its_predecessor() {
        let start = Instant::now();
        let mut cache = SeriesCache::default();
        cache.begin(key("Failed"), series(start));
        let again = start + SERIES_WINDOW;
        assert!(cache.live(&key("Failed"), again).is_none());
        cache.begin(key("Failed"), series(again));
        cache.begin(key("Other"), series(again + Duration::from_secs(1)));

        // The stale queue entry of the first series must not remove the second.
        assert!(cache.live(&key("Failed"), again + Duration::from_secs(2)).is_some());
        assert_eq!(cache.open.len(), 2);
        assert!(cache.live(&key("Other"), again + SERIES_WINDOW + Duration::from_secs(1)).is_none());
        assert_eq!(cache.open.len(), 0);
        assert!(cache.started.is_empty());
    }

    #[test]
    fn young_series_all_stay_open() {
        let start = Instant::now();
        let mut cache = SeriesCache::default();
        for i in 0..10_000 {
            cache.begin(key(&format!("r{i}")), series(start));
            assert!(cache.live(&key("absent"), start).is_none());
        }
        assert_eq!(cache.open.len(), 10_000);
    }

    /// An object to publish events about (any kind does: the recorder is generic).
    fn object(name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube_core::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A recorder whose writer never gets to run: the test never yields on a current-thread
    /// runtime, so whatever is published stays queued.
    fn stalled() -> Recorder {
        let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
        let (recorder, _task) = Recorder::new(Client::try_from(config).unwrap(), "test", "test-0");
        recorder
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_queue_drops_and_counts_instead_of_growing() {
        let recorder = stalled();
        // Many objects, one event each: the spam filter lets every one through.
        for i in 0..QUEUE_LENGTH + 100 {
            recorder.publish(&object(&format!("db-{i}")), EventType::Warning, "Failed", "Reconcile", "note");
        }
        assert_eq!(recorder.dropped("queue_full"), 100);
        assert_eq!(recorder.dropped("spam"), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn one_object_publishing_in_a_loop_is_cut_off_after_its_burst_and_others_are_not() {
        let recorder = stalled();
        let (noisy, quiet) = (object("noisy"), object("quiet"));
        for i in 0..SPAM_BURST + 10 {
            recorder.publish(&noisy, EventType::Warning, &format!("Reason{i}"), "Reconcile", "note");
        }
        recorder.publish(&quiet, EventType::Warning, "Failed", "Reconcile", "note");
        assert_eq!(recorder.dropped("spam"), 10);
        assert_eq!(recorder.queue.max_capacity() - recorder.queue.capacity(), SPAM_BURST as usize + 1);
        let mut registry = Registry::default();
        recorder.register_metrics(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("events_dropped_total{cause=\"spam\"} 10"), "{text}");
        assert!(text.contains("events_dropped_total{cause=\"queue_full\"} 0"), "{text}");
    }

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = "é".repeat(600);
        let cut = truncate(&note, 1024);
        assert!(cut.len() <= 1024);
        assert!(note.starts_with(&cut));
    }

    fn notes(writes: &[(&str, &str, &Wrote)]) -> Vec<(String, String)> {
        let mut report = Report::default();
        report.writes("Database", writes);
        report.events().map(|(_, reason, note)| (reason.to_string(), note.to_string())).collect()
    }

    #[test]
    fn one_event_names_every_object_created_and_one_every_object_updated() {
        let image = Wrote::Updated("spec.template.spec.containers[database].image".into());
        assert_eq!(
            notes(&[("Deployment", "orders", &Wrote::Created), ("Service", "orders", &Wrote::Created)]),
            [("Created".to_string(), "created Deployment orders and Service orders".to_string())]
        );
        assert_eq!(
            notes(&[("Deployment", "orders", &image), ("Service", "orders", &Wrote::Nothing)]),
            [(
                "Updated".to_string(),
                "updated Deployment orders (spec.template.spec.containers[database].image differed) to match the \
                 Database spec"
                    .to_string()
            )]
        );
        assert_eq!(
            notes(&[("Deployment", "orders", &image), ("Service", "orders", &Wrote::Created)]).len(),
            2,
            "a created object and an updated one: one event each"
        );
        assert!(notes(&[("Deployment", "orders", &Wrote::Nothing), ("Service", "orders", &Wrote::Nothing)]).is_empty());
    }
}
