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

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// How long a published event absorbs its repeats (client-go's isomorphic-event window).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

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
    queue: mpsc::UnboundedSender<Request>,
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
        let (queue, mut requests) = mpsc::unbounded_channel::<Request>();
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
        (Self { queue }, task)
    }

    /// Queues an event about `regarding`; it is published, or counted into the series of an
    /// identical recent one, in the background. Never fails and never waits.
    pub fn publish<K>(&self, regarding: &K, type_: EventType, reason: &str, action: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        let meta = regarding.meta();
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
        // Closed only when the writer task is gone (the runtime shuts down): nothing to do.
        let _ = self.queue.send(request);
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

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = "é".repeat(600);
        let cut = truncate(&note, 1024);
        assert!(cut.len() <= 1024);
        assert!(note.starts_with(&cut));
    }
}
