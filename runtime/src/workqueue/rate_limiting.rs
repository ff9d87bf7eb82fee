//! The rate-limiting queue, client-go's `rate_limiting_queue.go`: the queue the controller uses.
//!
//! It is the delaying queue plus a [`RateLimiter`]: `add_rate_limited` waits as long as the
//! limiter says, `forget` and `num_requeues` ask the limiter. It is a cheap handle: clones share
//! one queue, and the queue (with its timer task) goes away with the last clone.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::delaying::DelayingQueue;
use super::metrics::{Metrics, UnfinishedWork};
use super::priority::Priority;
use super::queue::Key;
use super::rate_limiter::{RateLimiter, default_controller_rate_limiter};

/// How to build a [`RateLimitingQueue`].
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use operator_runtime::workqueue::{Config, ItemExponentialFailureRateLimiter, RateLimitingQueue};
///
/// let config = Config::default().name("databases").rate_limiter(
///     ItemExponentialFailureRateLimiter::new(Duration::from_millis(10), Duration::from_secs(60)),
/// );
/// let queue: RateLimitingQueue<String> = RateLimitingQueue::with_config(config);
/// ```
pub struct Config<K> {
    /// The queue's name: the `name` label of its metrics. Unnamed queues report no metrics.
    pub name: Option<String>,
    /// Decides the delays of `add_rate_limited`. Default: [`default_controller_rate_limiter`].
    pub rate_limiter: Arc<dyn RateLimiter<K>>,
    /// Where to report metrics, if anywhere (and if the queue has a name).
    pub metrics: Option<Metrics>,
    /// Whether [`add_with_priority`](RateLimitingQueue::add_with_priority) is honoured
    /// (default). Without, every key is normal: one FIFO, as client-go's queue.
    pub prioritized: bool,
}

impl<K: Key> Default for Config<K> {
    fn default() -> Self {
        Config {
            name: None,
            rate_limiter: Arc::new(default_controller_rate_limiter()),
            metrics: None,
            prioritized: true,
        }
    }
}

impl<K> Config<K> {
    /// Sets the queue's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the rate limiter (pass an `Arc` to share one limiter between queues).
    pub fn rate_limiter(mut self, rate_limiter: impl RateLimiter<K> + 'static) -> Self {
        self.rate_limiter = Arc::new(rate_limiter);
        self
    }

    /// Reports the queue's metrics in `metrics`.
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Honours priorities (`true`, the default) or treats every key as normal (`false`).
    pub fn prioritized(mut self, prioritized: bool) -> Self {
        self.prioritized = prioritized;
        self
    }
}

impl<K> fmt::Debug for Config<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("name", &self.name)
            .field("metrics", &self.metrics.is_some())
            .field("prioritized", &self.prioritized)
            .finish_non_exhaustive()
    }
}

/// A work queue with client-go's semantics (see the [module docs](super)): deduplicating, one
/// worker per key, with delayed and rate-limited adds. Clones share the same queue.
pub struct RateLimitingQueue<K> {
    queue: Arc<DelayingQueue<K>>,
    rate_limiter: Arc<dyn RateLimiter<K>>,
    name: Arc<str>,
}

impl<K> Clone for RateLimitingQueue<K> {
    fn clone(&self) -> Self {
        RateLimitingQueue {
            queue: Arc::clone(&self.queue),
            rate_limiter: Arc::clone(&self.rate_limiter),
            name: Arc::clone(&self.name),
        }
    }
}

impl<K> fmt::Debug for RateLimitingQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue").field("name", &self.name).finish_non_exhaustive()
    }
}

impl<K: Key> RateLimitingQueue<K> {
    /// A queue named `name` with client-go's default rate limiter and no metrics.
    pub fn new(name: &str) -> Self {
        Self::with_config(Config::default().name(name))
    }

    /// A queue built from `config`.
    pub fn with_config(config: Config<K>) -> Self {
        let name = config.name.unwrap_or_default();
        let metrics = config.metrics.filter(|_| !name.is_empty());
        let queue =
            Arc::new(DelayingQueue::new(metrics.as_ref().map(|metrics| metrics.queue(&name)), config.prioritized));
        if let Some(metrics) = &metrics {
            let weak = Arc::downgrade(&queue);
            metrics.track(&name, weak as std::sync::Weak<dyn UnfinishedWork>);
        }
        RateLimitingQueue { queue, rate_limiter: config.rate_limiter, name: name.into() }
    }

    /// Marks `key` as needing processing. A no-op if it already waits, or after shutdown; if a
    /// worker has it, it is queued again when that worker calls [`done`](Self::done).
    pub fn add(&self, key: K) {
        self.queue.queue().add(key);
    }

    /// [`add`](Self::add) at `priority`: a [`Priority::Low`] key waits while normal keys do,
    /// except for its share (see [`Priority`]). A waiting key keeps the highest priority it was
    /// added with. Without priorities ([`Config::prioritized`]) the same as `add`.
    pub fn add_with_priority(&self, key: K, priority: Priority) {
        self.queue.queue().add_with_priority(key, priority);
    }

    /// Waits for the next key to process; `None` once the queue is shut down and empty.
    ///
    /// The caller owns the key until it calls [`done`](Self::done) with it; no other `get`
    /// returns it meanwhile.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: a dropped `get` has taken no key, and passes on a wake-up it received.
    pub async fn get(&self) -> Option<K> {
        self.queue.queue().get().await
    }

    /// Marks `key` done. If it was added while being processed, it is queued again.
    /// A key that is not being processed is ignored.
    pub fn done(&self, key: &K) {
        self.queue.queue().done(key);
    }

    /// How many keys are queued for a worker (not counting delayed or processing keys).
    pub fn len(&self) -> usize {
        self.queue.queue().len()
    }

    /// Whether no key is queued for a worker; see [`len`](Self::len).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `key` after `delay`. While it waits, further calls keep the earliest deadline; a zero
    /// delay adds at once. Ignored after shutdown.
    ///
    /// # Panics
    ///
    /// If this is the queue's first non-zero delay and there is no Tokio runtime to spawn the
    /// queue's timer task on.
    pub fn add_after(&self, key: K, delay: Duration) {
        self.queue.add_after(key, delay);
    }

    /// Adds `key` after the delay the rate limiter gives it (counting one more failure).
    /// Ignored after shutdown, without counting the failure.
    ///
    /// # Panics
    ///
    /// As [`add_after`](Self::add_after).
    pub fn add_rate_limited(&self, key: K) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.rate_limiter.when(&key);
        self.queue.add_after(key, delay);
    }

    /// Tells the rate limiter `key` succeeded: its backoff starts over. It does not remove `key`
    /// from the queue.
    pub fn forget(&self, key: &K) {
        self.rate_limiter.forget(key);
    }

    /// How many times `key` was rate limited since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.rate_limiter.num_requeues(key)
    }

    /// Shuts the queue down: adds are ignored, delayed keys dropped, and `get` returns `None`
    /// once the queued keys are handed out. Idempotent.
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// Shuts the queue down like [`shut_down`](Self::shut_down), then waits until every key
    /// handed out by `get` is [`done`](Self::done).
    ///
    /// Workers must keep calling `done`, or this waits forever; a `shut_down` from elsewhere
    /// ends the wait early.
    ///
    /// # Cancellation safety
    ///
    /// The shutdown happens on the first poll; dropping the future after that only stops the
    /// waiting.
    pub async fn shut_down_with_drain(&self) {
        self.queue.shut_down_with_drain().await;
    }

    /// Whether [`shut_down`](Self::shut_down) or [`shut_down_with_drain`](Self::shut_down_with_drain)
    /// was called.
    pub fn is_shutting_down(&self) -> bool {
        self.queue.queue().is_shutting_down()
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::workqueue::ItemExponentialFailureRateLimiter;

    const MS: Duration = Duration::from_millis(1);

    /// Gets the next key and how long (on the paused clock) it took to come.
    async fn next(queue: &RateLimitingQueue<&'static str>) -> (Option<&'static str>, Duration) {
        let start = Instant::now();
        let key = queue.get().await;
        (key, start.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_key_is_retried_with_exponential_backoff() {
        let queue = RateLimitingQueue::new("test");
        queue.add("a");
        let mut waits = Vec::new();
        for _ in 0..4 {
            let (key, waited) = next(&queue).await;
            waits.push(waited);
            queue.add_rate_limited(key.unwrap());
            queue.done(&"a");
        }
        assert_eq!(waits, [Duration::ZERO, 5 * MS, 10 * MS, 20 * MS]);
        assert_eq!(queue.num_requeues(&"a"), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn forget_makes_the_next_failure_wait_the_first_delay_again() {
        let queue = RateLimitingQueue::new("test");
        for _ in 0..3 {
            queue.add_rate_limited("a");
            next(&queue).await;
            queue.done(&"a");
        }
        queue.forget(&"a");
        assert_eq!(queue.num_requeues(&"a"), 0);
        queue.add_rate_limited("a");
        assert_eq!(next(&queue).await, (Some("a"), 5 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn a_custom_rate_limiter_decides_the_delay() {
        let queue = RateLimitingQueue::with_config(
            Config::default()
                .rate_limiter(ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(2))),
        );
        for expected in [1, 2, 2] {
            queue.add_rate_limited("a");
            assert_eq!(next(&queue).await, (Some("a"), Duration::from_secs(expected)));
            queue.done(&"a");
        }
    }

    #[tokio::test]
    async fn add_rate_limited_after_shut_down_counts_no_failure() {
        let queue = RateLimitingQueue::new("test");
        queue.shut_down();
        queue.add_rate_limited("a");
        assert_eq!(queue.num_requeues(&"a"), 0);
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test]
    async fn clones_share_one_queue() {
        let queue = RateLimitingQueue::new("test");
        let clone = queue.clone();
        clone.add("a");
        assert_eq!(queue.len(), 1);
        assert!(!queue.is_empty());
        queue.shut_down();
        assert!(clone.is_shutting_down());
    }

    #[tokio::test]
    async fn get_returns_none_after_shut_down_once_the_queue_is_empty() {
        let queue = RateLimitingQueue::new("test");
        queue.add("a");
        queue.add("b");
        queue.shut_down();
        queue.add("c");
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, Some("b"));
        assert_eq!(queue.get().await, None);
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn shut_down_with_drain_returns_once_in_flight_keys_are_done() {
        use std::sync::atomic::{AtomicBool, Ordering};

        let queue = RateLimitingQueue::new("test");
        queue.add("a");
        let key = queue.get().await.unwrap();
        let finished = Arc::new(AtomicBool::new(false));
        tokio::spawn({
            let (queue, finished) = (queue.clone(), Arc::clone(&finished));
            async move {
                tokio::task::yield_now().await;
                finished.store(true, Ordering::SeqCst);
                queue.done(&key);
            }
        });
        queue.shut_down_with_drain().await;
        assert!(finished.load(Ordering::SeqCst));
        assert!(queue.is_shutting_down());
    }

    #[test]
    fn a_queue_can_be_built_and_used_without_a_runtime_until_it_delays() {
        let queue = RateLimitingQueue::<u32>::with_config(Config::default());
        queue.add(1);
        queue.add_after(2, Duration::ZERO);
        assert_eq!(queue.len(), 2);
        assert!(format!("{queue:?}").contains("RateLimitingQueue"));
    }
}
