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

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
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
    series: Arc<DashMap<SeriesKey, Series>>,
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
        let writer = Writer {
            client,
            controller: controller.to_string(),
            instance: instance.to_string(),
            series: Arc::new(DashMap::new()),
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
    async fn write(&self, request: &Request) -> Result<(), kube_client::Error> {
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

        let repeat = self.series.get(&key).filter(|s| s.first_seen.elapsed() < SERIES_WINDOW).map(|s| s.clone());
        if let Some(mut series) = repeat {
            series.count += 1;
            let events: Api<Event> = Api::namespaced(self.client.clone(), &series.namespace);
            let patch = serde_json::json!({
                "series": EventSeries { count: series.count, last_observed_time: now },
            });
            events.patch(&series.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            self.series.insert(key, series);
            return Ok(());
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
        self.series.retain(|_, s| s.first_seen.elapsed() < SERIES_WINDOW);
        self.series.insert(key, Series { namespace, name, count: 1, first_seen: Instant::now() });
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

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = "é".repeat(600);
        let cut = truncate(&note, 1024);
        assert!(cut.len() <= 1024);
        assert!(note.starts_with(&cut));
    }
}
