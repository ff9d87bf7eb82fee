//! The delaying layer, client-go's `delaying_queue.go`: `add_after` holds a key back until a
//! deadline, then adds it to the [`Queue`].
//!
//! Waiting keys sit in a min-heap of deadlines plus a map of each key's earliest deadline (the
//! dedup: a key waits once, and a sooner deadline replaces a later one). The heap cannot move an
//! entry, so a replaced deadline stays in it as a stale entry and is skipped when it comes up.
//!
//! One timer task per queue sleeps until the earliest deadline (Tokio's clock, so paused-time
//! tests drive it) and moves every due key to the queue under one lock. It is spawned by the
//! first `add_after` with a non-zero delay, holds only a weak reference to the queue, and stops
//! on shutdown or when the queue is dropped. No task is spawned per `add_after`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::collections::binary_heap::PeekMut;
use std::collections::hash_map::{Entry, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Once, PoisonError, Weak};
use std::time::Duration;

use foldhash::fast::RandomState;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::metrics::{QueueMetrics, UnfinishedWork};
use super::queue::{Key, Queue};

/// A deadline far enough away to mean "never" when `now + delay` overflows (about 30 years,
/// as Tokio itself uses for its far future).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

#[derive(Debug)]
struct Waiting<K> {
    key: K,
    ready_at: Instant,
    /// Insertion order, so keys due at the same instant are added in the order they came.
    seq: u64,
}

impl<K> PartialEq for Waiting<K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K> Eq for Waiting<K> {}

impl<K> PartialOrd for Waiting<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for Waiting<K> {
    /// Reversed, so the max-heap `BinaryHeap` pops the earliest deadline first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

#[derive(Debug)]
struct WaitingSet<K> {
    heap: BinaryHeap<Waiting<K>>,
    /// Each waiting key's earliest deadline; a heap entry with another deadline is stale.
    deadlines: HashMap<K, Instant, RandomState>,
    next_seq: u64,
}

impl<K: Key> WaitingSet<K> {
    /// Makes `key` wait until `ready_at` unless it already waits for a sooner or equal deadline.
    /// Returns whether the timer must wake up because this is now the earliest deadline.
    fn insert(&mut self, key: K, ready_at: Instant) -> bool {
        let earliest = self.heap.peek().is_none_or(|top| ready_at < top.ready_at);
        let key = match self.deadlines.entry(key) {
            Entry::Occupied(mut entry) => {
                if *entry.get() <= ready_at {
                    return false;
                }
                entry.insert(ready_at);
                entry.key().clone()
            }
            Entry::Vacant(entry) => {
                let key = entry.key().clone();
                entry.insert(ready_at);
                key
            }
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Waiting { key, ready_at, seq });
        earliest
    }

    /// Removes and returns the keys due at `now`, and the next deadline, if any.
    fn take_due(&mut self, now: Instant) -> (Vec<K>, Option<Instant>) {
        let mut due = Vec::new();
        while let Some(top) = self.heap.peek_mut() {
            if top.ready_at > now {
                break;
            }
            let waiting = PeekMut::pop(top);
            if let Entry::Occupied(entry) = self.deadlines.entry(waiting.key)
                && *entry.get() == waiting.ready_at
            {
                due.push(entry.remove_entry().0);
            }
        }
        (due, self.heap.peek().map(|top| top.ready_at))
    }

    fn clear(&mut self) {
        self.heap.clear();
        self.deadlines.clear();
    }
}

#[derive(Debug)]
struct Timer {
    /// Wakes the timer task when a sooner deadline arrives (a stored permit is never lost).
    wake: Arc<Notify>,
    stop: CancellationToken,
    started: Once,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// A [`Queue`] with `add_after`. Lives in an `Arc` so the timer task can hold a `Weak` to it.
#[derive(Debug)]
pub(crate) struct DelayingQueue<K> {
    queue: Queue<K>,
    waiting: Mutex<WaitingSet<K>>,
    timer: Timer,
}

impl<K: Key> DelayingQueue<K> {
    pub(crate) fn new(metrics: Option<QueueMetrics>, prioritized: bool) -> Self {
        DelayingQueue {
            queue: Queue::new(metrics, prioritized),
            waiting: Mutex::new(WaitingSet { heap: BinaryHeap::new(), deadlines: HashMap::default(), next_seq: 0 }),
            timer: Timer {
                wake: Arc::new(Notify::new()),
                stop: CancellationToken::new(),
                started: Once::new(),
                task: Mutex::new(None),
            },
        }
    }

    /// The plain queue underneath, for `add`, `get`, `done` and `len`.
    pub(crate) fn queue(&self) -> &Queue<K> {
        &self.queue
    }

    fn waiting(&self) -> MutexGuard<'_, WaitingSet<K>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `key` once `delay` has passed; see the module docs.
    ///
    /// # Panics
    ///
    /// If this is the queue's first non-zero delay and it is called outside a Tokio runtime
    /// (the timer task cannot be spawned).
    pub(crate) fn add_after(self: &Arc<Self>, key: K, delay: Duration) {
        if self.queue.is_shutting_down() {
            return;
        }
        if let Some(metrics) = self.queue.metrics() {
            metrics.retried();
        }
        if delay.is_zero() {
            self.queue.add(key);
            return;
        }
        let now = Instant::now();
        let ready_at = now.checked_add(delay).unwrap_or_else(|| now + FAR_FUTURE);
        let earliest = self.waiting().insert(key, ready_at);
        self.start_timer();
        if earliest {
            self.timer.wake.notify_one();
        }
    }

    fn start_timer(self: &Arc<Self>) {
        self.timer.started.call_once(|| {
            let task =
                tokio::spawn(run_timer(Arc::downgrade(self), Arc::clone(&self.timer.wake), self.timer.stop.clone()));
            *self.timer.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
        });
    }

    /// Moves due keys to the queue; returns the next deadline, or `None` to stop the timer.
    fn fire(&self) -> Option<Option<Instant>> {
        if self.queue.is_shutting_down() {
            self.waiting().clear();
            return None;
        }
        let (due, next) = self.waiting().take_due(Instant::now());
        if !due.is_empty() {
            self.queue.add_all(due);
        }
        Some(next)
    }

    fn stop_timer(&self) {
        self.timer.stop.cancel();
        self.waiting().clear();
    }

    pub(crate) fn shut_down(&self) {
        self.queue.shut_down();
        self.stop_timer();
    }

    pub(crate) async fn shut_down_with_drain(&self) {
        // Waiting keys are dropped at once, as in client-go; in-flight keys are waited for.
        self.queue.begin_shut_down(true);
        self.stop_timer();
        self.queue.wait_for_drain().await;
        let task = self.timer.task.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(task) = task
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "work queue timer task failed");
        }
    }
}

impl<K> Drop for DelayingQueue<K> {
    fn drop(&mut self) {
        self.timer.stop.cancel();
    }
}

impl<K: Key> UnfinishedWork for DelayingQueue<K> {
    fn unfinished_work(&self, now: Instant) -> (f64, f64) {
        self.queue.unfinished_work(now)
    }
}

/// The timer loop: fire what is due, sleep until the next deadline or a wake-up, repeat.
/// It never holds the queue alive across an `.await`.
async fn run_timer<K: Key>(queue: Weak<DelayingQueue<K>>, wake: Arc<Notify>, stop: CancellationToken) {
    loop {
        let Some(next) = queue.upgrade().and_then(|queue| queue.fire()) else {
            return;
        };
        let sleep = async {
            match next {
                Some(ready_at) => tokio::time::sleep_until(ready_at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = wake.notified() => {}
            () = sleep => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn queue() -> Arc<DelayingQueue<&'static str>> {
        Arc::new(DelayingQueue::new(None, true))
    }

    /// Gets the next key and how long (on the paused clock) it took to come.
    async fn next(queue: &DelayingQueue<&'static str>) -> (Option<&'static str>, Duration) {
        let start = Instant::now();
        let key = queue.queue().get().await;
        (key, start.elapsed())
    }

    /// Whether nothing arrives within an hour of paused time.
    async fn nothing_more(queue: &DelayingQueue<&'static str>) -> bool {
        tokio::time::timeout(Duration::from_secs(3600), queue.queue().get()).await.is_err()
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_is_added_when_its_delay_has_passed() {
        let queue = queue();
        queue.add_after("a", 10 * MS);
        assert_eq!(queue.queue().len(), 0);
        assert_eq!(next(&queue).await, (Some("a"), 10 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_delay_adds_at_once() {
        let queue = queue();
        queue.add_after("a", Duration::ZERO);
        assert_eq!(queue.queue().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_earliest_deadline_wins_for_a_waiting_key() {
        let queue = queue();
        queue.add_after("a", 50 * MS);
        queue.add_after("a", 10 * MS);
        queue.add_after("a", 30 * MS);
        assert_eq!(next(&queue).await, (Some("a"), 10 * MS));
        queue.queue().done(&"a");
        assert!(nothing_more(&queue).await, "the later deadlines were dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_key_delayed_again_is_added_once() {
        let queue = queue();
        for _ in 0..3 {
            queue.add_after("a", 10 * MS);
        }
        assert_eq!(next(&queue).await, (Some("a"), 10 * MS));
        queue.queue().done(&"a");
        assert!(nothing_more(&queue).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_deadline_equal_to_a_new_one_adds_the_key_once() {
        let queue = queue();
        queue.add_after("a", 50 * MS);
        queue.add_after("a", 10 * MS);
        assert_eq!(next(&queue).await, (Some("a"), 10 * MS));
        queue.queue().done(&"a");
        // Due at 50ms again, exactly when the stale entry comes up.
        queue.add_after("a", 40 * MS);
        assert_eq!(next(&queue).await, (Some("a"), 40 * MS));
        queue.queue().done(&"a");
        assert!(nothing_more(&queue).await);
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_keys_come_out_in_deadline_order() {
        let queue = queue();
        queue.add_after("late", 20 * MS);
        queue.add_after("early", 10 * MS);
        queue.add_after("same-as-late", 20 * MS);
        assert_eq!(next(&queue).await, (Some("early"), 10 * MS));
        assert_eq!(next(&queue).await, (Some("late"), 10 * MS));
        assert_eq!(next(&queue).await, (Some("same-as-late"), Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_already_queued_is_not_queued_twice() {
        let queue = queue();
        queue.queue().add("a");
        queue.add_after("a", 10 * MS);
        tokio::time::sleep(20 * MS).await;
        assert_eq!(queue.queue().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_due_while_processing_is_handed_out_again_after_done() {
        let queue = queue();
        queue.queue().add("a");
        assert_eq!(queue.queue().get().await, Some("a"));
        queue.add_after("a", 10 * MS);
        tokio::time::sleep(20 * MS).await;
        assert_eq!(queue.queue().len(), 0);
        queue.queue().done(&"a");
        assert_eq!(queue.queue().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_huge_delay_waits_without_overflowing() {
        let queue = queue();
        queue.add_after("a", Duration::MAX);
        assert!(nothing_more(&queue).await);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_after_shut_down_is_ignored() {
        let queue = queue();
        queue.shut_down();
        queue.add_after("a", 10 * MS);
        queue.add_after("b", Duration::ZERO);
        assert_eq!(next(&queue).await, (None, Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_drops_waiting_keys_and_stops_the_timer() {
        let queue = queue();
        queue.add_after("a", 10 * MS);
        let task = queue.timer.task.lock().unwrap().take().unwrap();
        queue.shut_down();
        tokio::time::timeout(Duration::from_secs(1), task).await.expect("the timer stops").unwrap();
        assert_eq!(next(&queue).await, (None, Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_stops_when_the_queue_is_dropped() {
        let queue = queue();
        queue.add_after("a", 10 * MS);
        let task = queue.timer.task.lock().unwrap().take().unwrap();
        drop(queue);
        tokio::time::timeout(Duration::from_secs(1), task).await.expect("the timer stops").unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn many_delayed_keys_share_one_timer_task() {
        let queue = Arc::new(DelayingQueue::new(None, true));
        for key in 0..1000u32 {
            queue.add_after(key, MS * (key % 7 + 1));
        }
        assert_eq!(tokio::runtime::Handle::current().metrics().num_alive_tasks(), 1);
        tokio::time::sleep(10 * MS).await;
        assert_eq!(queue.queue().len(), 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_with_drain_drops_waiting_keys_and_joins_the_timer() {
        let queue = queue();
        queue.add_after("a", 10 * MS);
        tokio::time::timeout(Duration::from_secs(1), queue.shut_down_with_drain())
            .await
            .expect("nothing is processing");
        assert!(queue.timer.task.lock().unwrap().is_none(), "joined");
        assert_eq!(next(&queue).await, (None, Duration::ZERO));
    }
}
