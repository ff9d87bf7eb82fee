//! Kubernetes Events (events.k8s.io/v1) about the objects the operator manages, as
//! `kubectl describe` and `kubectl events` show them.
//!
//! Repeats are merged into a series, the way client-go's events library does: an event with
//! the same object, type, reason, action and note as one published within the last six
//! minutes updates that event's `series` (count and last observed time) instead of creating
//! another object. A failing object reconciled again and again therefore costs one Event
//! and one small patch per retry, never a flood of new objects.
//!
//! Publishing is best effort: a failure is logged and never fails a reconcile.

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
    client: Client,
    controller: String,
    instance: String,
    series: Arc<DashMap<SeriesKey, Series>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("controller", &self.controller)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder whose events name `controller` (e.g. `example.com/database-operator`) as
    /// the reporting controller and `instance` (e.g. the pod name) as its instance.
    pub fn new(client: Client, controller: &str, instance: &str) -> Self {
        Self {
            client,
            controller: controller.to_string(),
            instance: instance.to_string(),
            series: Arc::new(DashMap::new()),
        }
    }

    /// Publishes an event about `regarding`, or counts it into the series of an identical
    /// recent one. Never fails: errors are logged.
    pub async fn publish<K>(&self, regarding: &K, type_: EventType, reason: &str, action: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        if let Err(err) = self.try_publish(regarding, type_, reason, action, note).await {
            warn!(error = %err, reason, "could not publish an event");
        }
    }

    async fn try_publish<K>(
        &self,
        regarding: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<(), kube_client::Error>
    where
        K: Resource<DynamicType = ()>,
    {
        let meta = regarding.meta();
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".to_string());
        let key = SeriesKey {
            uid: meta.uid.clone().unwrap_or_default(),
            type_,
            reason: reason.to_string(),
            action: action.to_string(),
            note: note.to_string(),
        };
        let now = MicroTime(Timestamp::now());

        // Take the repeat out of the map before awaiting: no map guard is held across I/O.
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

        let event = Event {
            metadata: ObjectMeta {
                // client-go's naming: the object's name and the time, in hex nanoseconds.
                name: Some(format!("{}.{:x}", meta.name.as_deref().unwrap_or("object"), now.0.as_nanosecond())),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(now),
            type_: Some(type_.as_str().to_string()),
            reason: Some(reason.to_string()),
            action: Some(action.to_string()),
            note: Some(truncate(note, 1024)),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            regarding: Some(ObjectReference {
                api_version: Some(K::api_version(&()).to_string()),
                kind: Some(K::kind(&()).to_string()),
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                ..Default::default()
            }),
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
