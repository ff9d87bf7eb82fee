//! Prometheus metrics for work queues, with client-go's names and meanings.
//!
//! [`Metrics::register`] adds the families to a registry once; every named queue built with a
//! clone of the handle reports under its own `name` label. Per-operation metrics (depth, adds,
//! queue and work duration, retries) are children resolved once per queue, so an operation costs
//! an atomic increment or a histogram observation, and nothing at all without metrics.
//!
//! The two gauges about work in progress (`workqueue_unfinished_work_seconds`,
//! `workqueue_longest_running_processor_seconds`) are computed at scrape time by a
//! [`Collector`]: client-go refreshes them every 500ms from a goroutine per queue, which costs a
//! timer forever and is up to 500ms stale. A scrape walks each live queue's entries under its lock
//! (microseconds for thousands of keys), and a dropped queue simply stops reporting them.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use super::priority::Priority;

/// A queue that can say how much work it has in progress.
pub(crate) trait UnfinishedWork: Send + Sync {
    /// Seconds of work in progress summed over processing keys, and the longest one, at `now`.
    fn unfinished_work(&self, now: Instant) -> (f64, f64);
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

/// `workqueue_depth`'s labels: the queue and the priority the keys wait at.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    name: String,
    priority: &'static str,
}

type HistogramFamily = Family<QueueLabels, Histogram, fn() -> Histogram>;

/// Buckets for both durations: 10ns to 1000s by factors of 10, as controller-runtime uses
/// (client-go's own example stops at 10s, which hides slow reconciles in `+Inf`).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

#[derive(Debug)]
struct TrackedQueue {
    name: String,
    queue: Weak<dyn UnfinishedWork>,
}

/// The work queue metric families, registered once and shared by every named queue.
///
/// Clone it into each queue's [`Config::metrics`](super::Config::metrics). Queues report under
/// the `name` label; a queue without a name reports nothing.
///
/// | metric | type | meaning |
/// | --- | --- | --- |
/// | `workqueue_depth` | gauge | keys waiting to be processed, by `priority` (`normal`, `low`) |
/// | `workqueue_adds_total` | counter | adds that made a key dirty (deduplicated adds are not counted) |
/// | `workqueue_queue_duration_seconds` | histogram | from add to `get` |
/// | `workqueue_work_duration_seconds` | histogram | from `get` to `done` |
/// | `workqueue_unfinished_work_seconds` | gauge | seconds of work in progress not yet observed by the work duration; growing steadily means stuck workers |
/// | `workqueue_longest_running_processor_seconds` | gauge | the longest running worker's seconds |
/// | `workqueue_retries_total` | counter | `add_after` / `add_rate_limited` calls |
///
/// ```
/// use operator_runtime::workqueue::{Config, Metrics, RateLimitingQueue};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let metrics = Metrics::register(&mut registry);
/// let queue: RateLimitingQueue<String> =
///     RateLimitingQueue::with_config(Config::default().name("databases").metrics(metrics));
/// ```
#[derive(Clone, Debug)]
pub struct Metrics {
    depth: Family<DepthLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: HistogramFamily,
    work_duration: HistogramFamily,
    retries: Family<QueueLabels, Counter>,
    queues: Arc<Mutex<Vec<TrackedQueue>>>,
}

const UNFINISHED_HELP: &str = "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.";
const LONGEST_HELP: &str = "How many seconds has the longest running processor for workqueue been running.";

impl Metrics {
    /// Registers the work queue families in `registry` and returns the handle to give queues.
    ///
    /// Call it once per registry: registering twice would export every family twice.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Metrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            retries: Family::default(),
            queues: Arc::default(),
        };
        // Counters get their `_total` suffix from the encoder.
        registry.register("workqueue_depth", "Current depth of workqueue", metrics.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", metrics.adds.clone());
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            metrics.work_duration.clone(),
        );
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", metrics.retries.clone());
        registry.register_collector(Box::new(UnfinishedWorkCollector { queues: Arc::clone(&metrics.queues) }));
        metrics
    }

    /// The per-queue children for `name`, resolved once.
    pub(crate) fn queue(&self, name: &str) -> QueueMetrics {
        let labels = QueueLabels { name: name.to_owned() };
        let depth = |priority: Priority| {
            self.depth.get_or_create_owned(&DepthLabels { name: name.to_owned(), priority: priority.label() })
        };
        QueueMetrics {
            depth_normal: depth(Priority::Normal),
            depth_low: depth(Priority::Low),
            adds: self.adds.get_or_create_owned(&labels),
            queue_duration: self.queue_duration.get_or_create_owned(&labels),
            work_duration: self.work_duration.get_or_create_owned(&labels),
            retries: self.retries.get_or_create_owned(&labels),
        }
    }

    /// Reports `queue`'s work in progress under `name` for as long as it lives.
    pub(crate) fn track(&self, name: &str, queue: Weak<dyn UnfinishedWork>) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues.retain(|tracked| tracked.queue.strong_count() > 0);
        queues.push(TrackedQueue { name: name.to_owned(), queue });
    }
}

/// One queue's metric children.
#[derive(Clone, Debug)]
pub(crate) struct QueueMetrics {
    depth_normal: Gauge,
    depth_low: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
}

impl QueueMetrics {
    fn depth(&self, priority: Priority) -> &Gauge {
        match priority {
            Priority::Normal => &self.depth_normal,
            Priority::Low => &self.depth_low,
        }
    }

    /// A key became dirty at `priority`.
    pub(crate) fn added(&self, priority: Priority) {
        self.adds.inc();
        self.depth(priority).inc();
    }

    /// A dirty key was added again at a higher priority.
    pub(crate) fn moved(&self, from: Priority, to: Priority) {
        self.depth(from).dec();
        self.depth(to).inc();
    }

    /// A worker got a key that had waited `queued_for` at `priority`.
    pub(crate) fn got(&self, priority: Priority, queued_for: Option<Duration>) {
        self.depth(priority).dec();
        if let Some(queued_for) = queued_for {
            self.queue_duration.observe(queued_for.as_secs_f64());
        }
    }

    /// A worker finished a key it had for `worked_for`.
    pub(crate) fn finished(&self, worked_for: Duration) {
        self.work_duration.observe(worked_for.as_secs_f64());
    }

    /// `add_after` was called.
    pub(crate) fn retried(&self) {
        self.retries.inc();
    }
}

#[derive(Debug)]
struct UnfinishedWorkCollector {
    queues: Arc<Mutex<Vec<TrackedQueue>>>,
}

/// One gauge family, one series per queue name.
fn encode_gauges<'a>(
    encoder: &mut DescriptorEncoder,
    metric: &str,
    help: &str,
    series: impl Iterator<Item = (&'a str, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(metric, help, None, MetricType::Gauge)?;
    for (name, value) in series {
        let labels = QueueLabels { name: name.to_owned() };
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for UnfinishedWorkCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        // Queues sharing a name are added up (unfinished) and maxed (longest).
        let mut samples: Vec<(String, f64, f64)> = Vec::new();
        {
            let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
            queues.retain(|tracked| tracked.queue.strong_count() > 0);
            for tracked in queues.iter() {
                let Some(queue) = tracked.queue.upgrade() else {
                    continue;
                };
                let (unfinished, longest) = queue.unfinished_work(now);
                match samples.iter_mut().find(|(name, ..)| *name == tracked.name) {
                    Some((_, total, max)) => {
                        *total += unfinished;
                        *max = max.max(longest);
                    }
                    None => samples.push((tracked.name.clone(), unfinished, longest)),
                }
            }
        }
        samples.sort_by(|a, b| a.0.cmp(&b.0));
        encode_gauges(
            &mut encoder,
            "workqueue_unfinished_work_seconds",
            UNFINISHED_HELP,
            samples.iter().map(|(name, unfinished, _)| (name.as_str(), *unfinished)),
        )?;
        encode_gauges(
            &mut encoder,
            "workqueue_longest_running_processor_seconds",
            LONGEST_HELP,
            samples.iter().map(|(name, _, longest)| (name.as_str(), *longest)),
        )
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;
    use crate::workqueue::{Config, RateLimitingQueue};

    fn setup(name: &str) -> (Registry, RateLimitingQueue<&'static str>) {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let queue = RateLimitingQueue::with_config(Config::default().name(name).metrics(metrics));
        (registry, queue)
    }

    /// The value of the series `series` (name and labels, as printed) in the text exposition.
    fn value(registry: &Registry, series: &str) -> Option<f64> {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_series_move_with_the_queue() {
        let (registry, queue) = setup("test");
        let series = |metric: &str| format!("{metric}{{name=\"test\"}}");
        let at = |metric: &str| value(&registry, &series(metric));
        let depth = || value(&registry, "workqueue_depth{name=\"test\",priority=\"normal\"}");

        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!(at("workqueue_adds_total"), Some(2.0), "deduplicated adds don't count");
        assert_eq!(depth(), Some(2.0));

        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(depth(), Some(1.0));
        assert_eq!(at("workqueue_queue_duration_seconds_count"), Some(1.0));
        assert_eq!(at("workqueue_queue_duration_seconds_sum"), Some(1.0));

        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(at("workqueue_unfinished_work_seconds"), Some(2.0));
        assert_eq!(at("workqueue_longest_running_processor_seconds"), Some(2.0));
        assert_eq!(queue.get().await, Some("b"));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(at("workqueue_unfinished_work_seconds"), Some(4.0), "3s + 1s");
        assert_eq!(at("workqueue_longest_running_processor_seconds"), Some(3.0));

        queue.done(&"a");
        queue.done(&"b");
        assert_eq!(at("workqueue_work_duration_seconds_count"), Some(2.0));
        assert_eq!(at("workqueue_work_duration_seconds_sum"), Some(4.0));
        assert_eq!(at("workqueue_unfinished_work_seconds"), Some(0.0));
        assert_eq!(at("workqueue_longest_running_processor_seconds"), Some(0.0));

        queue.add_after("c", Duration::ZERO);
        queue.add_rate_limited("d");
        assert_eq!(at("workqueue_retries_total"), Some(2.0));
    }

    #[tokio::test]
    async fn a_key_re_added_while_processing_counts_one_more_add_and_depth() {
        let (registry, queue) = setup("test");
        queue.add("a");
        queue.get().await;
        queue.add("a");
        queue.add("a");
        assert_eq!(value(&registry, "workqueue_adds_total{name=\"test\"}"), Some(2.0));
        let depth = "workqueue_depth{name=\"test\",priority=\"normal\"}";
        assert_eq!(value(&registry, depth), Some(1.0));
        queue.done(&"a");
        queue.get().await;
        assert_eq!(value(&registry, depth), Some(0.0));
    }

    #[tokio::test]
    async fn depth_is_reported_by_priority_and_follows_a_key_moved_up() {
        let (registry, queue) = setup("test");
        let depth =
            |priority: &str| value(&registry, &format!("workqueue_depth{{name=\"test\",priority=\"{priority}\"}}"));
        queue.add_with_priority("a", Priority::Low);
        queue.add_with_priority("b", Priority::Low);
        assert_eq!((depth("normal"), depth("low")), (Some(0.0), Some(2.0)));
        queue.add("a");
        assert_eq!((depth("normal"), depth("low")), (Some(1.0), Some(1.0)));
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, Some("b"));
        assert_eq!((depth("normal"), depth("low")), (Some(0.0), Some(0.0)));
    }

    #[test]
    fn an_unnamed_queue_reports_nothing() {
        let (registry, queue) = setup("");
        queue.add("a");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(!text.contains("name="), "{text}");
    }

    #[test]
    fn a_dropped_queue_stops_reporting_work_in_progress() {
        let (registry, queue) = setup("gone");
        let series = "workqueue_unfinished_work_seconds{name=\"gone\"}";
        assert_eq!(value(&registry, series), Some(0.0));
        drop(queue);
        assert_eq!(value(&registry, series), None);
    }

    #[test]
    fn queues_report_under_their_own_names() {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let config = |name| Config::default().name(name).metrics(metrics.clone());
        let one = RateLimitingQueue::with_config(config("one"));
        let two = RateLimitingQueue::with_config(config("two"));
        one.add(1);
        two.add(1);
        two.add(2);
        assert_eq!(value(&registry, "workqueue_depth{name=\"one\",priority=\"normal\"}"), Some(1.0));
        assert_eq!(value(&registry, "workqueue_depth{name=\"two\",priority=\"normal\"}"), Some(2.0));
        assert!(value(&registry, "workqueue_unfinished_work_seconds{name=\"two\"}").is_some());
    }
}
