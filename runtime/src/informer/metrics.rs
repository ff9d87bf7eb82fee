//! Prometheus counters of what the informers did, labelled `resource`.
//!
//! | name | counts |
//! | --- | --- |
//! | `informer_lists_total` | full lists started, paginated or streamed |
//! | `informer_list_errors_total` | full lists that failed |
//! | `informer_watches_total` | watch requests made (a streaming list is one) |
//! | `informer_relists_total` | lists made again because the watch's resourceVersion was gone (410) |
//! | `informer_watch_errors_total` | watches that could not start or ended with an error, 410 included |
//! | `informer_undecodable_objects_total` | list items and watch events left out of the cache because they do not decode |
//! | `informer_events_total` | watch events received, labelled `type` too: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR` (a streaming list's objects are `ADDED` events) |
//! | `informer_received_bytes_total` | bytes of list and watch bodies read, before decoding (what the apiserver sent, uncompressed) |
//!
//! and one gauge, labelled `resource` and `handler`: `informer_handler_queue_depth`, the
//! changes waiting in a handler's lane.

use kube_core::WatchEvent;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = [(&'static str, String); 1];
type HandlerLabels = [(&'static str, String); 2];
type EventLabels = [(&'static str, String); 2];

/// The watch event types, in the order of [`ResourceMetrics::events`].
const EVENT_TYPES: [&str; 5] = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"];

/// The informer counters, registered once and shared by every informer (clone it into each
/// [`Config`](super::Config)).
///
/// ```
/// use operator_runtime::informer::{Config, Metrics};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let config = Config { metrics: Some(Metrics::new(&mut registry)), ..Config::default() };
/// # let _ = config;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    lists: Family<Labels, Counter>,
    list_errors: Family<Labels, Counter>,
    watches: Family<Labels, Counter>,
    relists: Family<Labels, Counter>,
    watch_errors: Family<Labels, Counter>,
    undecodable: Family<Labels, Counter>,
    events: Family<EventLabels, Counter>,
    received_bytes: Family<Labels, Counter>,
    handler_depth: Family<HandlerLabels, Gauge>,
}

impl Metrics {
    /// Creates the counters and registers them in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Metrics::default();
        // The text encoder appends `_total` to counter names.
        registry.register("informer_lists", "Full lists started, paginated or streamed", metrics.lists.clone());
        registry.register("informer_list_errors", "Full lists that failed", metrics.list_errors.clone());
        registry.register("informer_watches", "Watch requests made", metrics.watches.clone());
        registry.register("informer_relists", "Lists made again after 410 Gone", metrics.relists.clone());
        registry.register(
            "informer_watch_errors",
            "Watches that failed to start or ended with an error",
            metrics.watch_errors.clone(),
        );
        registry.register(
            "informer_undecodable_objects",
            "List items and watch events left out of the cache because they do not decode",
            metrics.undecodable.clone(),
        );
        registry.register("informer_events", "Watch events received, by type", metrics.events.clone());
        registry.register(
            "informer_received_bytes",
            "Bytes of list and watch bodies read, before decoding",
            metrics.received_bytes.clone(),
        );
        registry.register(
            "informer_handler_queue_depth",
            "Changes waiting for an event handler",
            metrics.handler_depth.clone(),
        );
        metrics
    }

    /// The counters of one resource.
    pub(crate) fn for_resource(&self, resource: &str) -> ResourceMetrics {
        let labels: Labels = [("resource", resource.to_string())];
        ResourceMetrics {
            lists: self.lists.get_or_create(&labels).clone(),
            list_errors: self.list_errors.get_or_create(&labels).clone(),
            watches: self.watches.get_or_create(&labels).clone(),
            relists: self.relists.get_or_create(&labels).clone(),
            watch_errors: self.watch_errors.get_or_create(&labels).clone(),
            undecodable: self.undecodable.get_or_create(&labels).clone(),
            events: EVENT_TYPES.map(|kind| {
                let labels: EventLabels = [("resource", resource.to_string()), ("type", kind.to_string())];
                self.events.get_or_create(&labels).clone()
            }),
            handler_depth: self.handler_depth.clone(),
            resource: resource.to_string(),
        }
    }

    /// The counter of bytes received for one resource: the [list and watch](super::ListWatch)
    /// count into it as they read.
    pub(crate) fn received_bytes(&self, resource: &str) -> Counter {
        self.received_bytes.get_or_create(&[("resource", resource.to_string())]).clone()
    }
}

/// The counters of one resource; a default one counts into the void.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResourceMetrics {
    pub(crate) lists: Counter,
    pub(crate) list_errors: Counter,
    pub(crate) watches: Counter,
    pub(crate) relists: Counter,
    pub(crate) watch_errors: Counter,
    pub(crate) undecodable: Counter,
    /// Indexed as [`EVENT_TYPES`]: created once, so counting an event looks nothing up.
    events: [Counter; 5],
    handler_depth: Family<HandlerLabels, Gauge>,
    resource: String,
}

impl ResourceMetrics {
    /// Counts one watch event by its type.
    pub(crate) fn event<K>(&self, event: &WatchEvent<K>) {
        let index = match event {
            WatchEvent::Added(_) => 0,
            WatchEvent::Modified(_) => 1,
            WatchEvent::Deleted(_) => 2,
            WatchEvent::Bookmark(_) => 3,
            WatchEvent::Error(_) => 4,
        };
        self.events[index].inc();
    }

    /// The queue depth gauge of the handler called `handler`.
    pub(crate) fn handler_depth(&self, handler: &str) -> Gauge {
        let labels: HandlerLabels = [("resource", self.resource.clone()), ("handler", handler.to_string())];
        self.handler_depth.get_or_create(&labels).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn counters_are_exposed_with_total_suffix_and_resource_label() {
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        let configmaps = metrics.for_resource("configmaps");
        configmaps.lists.inc();
        configmaps.relists.inc();
        configmaps.watches.inc_by(2);
        configmaps.watch_errors.inc();
        let event = |e: WatchEvent<()>| configmaps.event(&e);
        event(WatchEvent::Added(()));
        event(WatchEvent::Modified(()));
        event(WatchEvent::Modified(()));
        let bookmark = serde_json::json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": "1"}}});
        event(serde_json::from_value(bookmark).unwrap());
        metrics.received_bytes("configmaps").inc_by(1234);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "informer_lists_total{resource=\"configmaps\"} 1",
            "informer_watches_total{resource=\"configmaps\"} 2",
            "informer_relists_total{resource=\"configmaps\"} 1",
            "informer_watch_errors_total{resource=\"configmaps\"} 1",
            "informer_list_errors_total{resource=\"configmaps\"} 0",
            "informer_events_total{resource=\"configmaps\",type=\"ADDED\"} 1",
            "informer_events_total{resource=\"configmaps\",type=\"MODIFIED\"} 2",
            "informer_events_total{resource=\"configmaps\",type=\"BOOKMARK\"} 1",
            "informer_events_total{resource=\"configmaps\",type=\"DELETED\"} 0",
            "informer_received_bytes_total{resource=\"configmaps\"} 1234",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
