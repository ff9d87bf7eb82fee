//! The plain work queue, client-go's `queue.go`: fair, stingy, one worker per key; plus two
//! priorities (see [`super::priority`]).
//!
//! Everything lives under one mutex: one FIFO per priority of keys ready for a worker and one
//! map entry per key that is dirty (waiting to be processed) or processing. An entry exists
//! exactly while its key is dirty or processing, so one hash lookup answers both questions, and
//! a key re-added while processing is queued again by `done`. A key moved to the normal FIFO
//! leaves a stale copy in the low one: each FIFO entry carries a ticket, and only the entry
//! whose ticket the key's map entry holds is live. Getters wait on a [`Notify`]; the lock is
//! never held across an `.await`.

use std::collections::VecDeque;
use std::collections::hash_map::{Entry, HashMap};
use std::fmt::Debug;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Poll;

use foldhash::fast::RandomState;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::metrics::{QueueMetrics, UnfinishedWork};
use super::priority::{Priority, next_lane};

/// What a work queue key must be: cheap to clone (it is stored twice), hashable, and shareable
/// between worker tasks. Implemented for every type that qualifies.
pub trait Key: Clone + Eq + Hash + Send + Sync + Debug + 'static {}

impl<T: Clone + Eq + Hash + Send + Sync + Debug + 'static> Key for T {}

/// Where one key stands. The entry exists only while `dirty || processing`.
#[derive(Debug, Default)]
struct ItemState {
    /// Waiting to be processed (queued, or processing and to be queued again by `done`).
    dirty: bool,
    /// A worker holds it.
    processing: bool,
    /// While dirty: the highest priority it was added with since it last became dirty.
    priority: Priority,
    /// While queued: the ticket of its live FIFO entry.
    ticket: u64,
    /// When it became dirty; kept only with metrics (queue duration).
    queued_at: Option<Instant>,
    /// When a worker got it; kept only with metrics (work duration, unfinished work).
    started_at: Option<Instant>,
}

/// One FIFO per priority, and how many of each one's entries are live.
#[derive(Debug)]
struct Lanes<K> {
    normal: VecDeque<(u64, K)>,
    low: VecDeque<(u64, K)>,
    live_normal: usize,
    live_low: usize,
    /// Normal keys handed out in a row while low keys waited.
    normal_streak: u32,
    next_ticket: u64,
}

impl<K> Lanes<K> {
    fn lane(&mut self, priority: Priority) -> (&mut VecDeque<(u64, K)>, &mut usize) {
        match priority {
            Priority::Normal => (&mut self.normal, &mut self.live_normal),
            Priority::Low => (&mut self.low, &mut self.live_low),
        }
    }

    /// Queues `key` at `priority`; returns its ticket.
    fn push(&mut self, key: K, priority: Priority) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let (fifo, live) = self.lane(priority);
        fifo.push_back((ticket, key));
        *live += 1;
        ticket
    }

    /// One live entry of `priority`'s FIFO went stale (its key moved or was taken).
    fn forget_one(&mut self, priority: Priority) {
        let (fifo, live) = self.lane(priority);
        *live -= 1;
        if *live == 0 {
            // Whatever is left is stale: free it now rather than when the FIFO is next used.
            fifo.clear();
        }
    }

    fn len(&self) -> usize {
        self.live_normal + self.live_low
    }
}

#[derive(Debug)]
struct State<K> {
    /// Keys ready for a worker; each live entry's key is dirty and not processing.
    lanes: Lanes<K>,
    items: HashMap<K, ItemState, RandomState>,
    /// How many entries of `items` are processing.
    processing: usize,
    shutting_down: bool,
    /// A `shut_down_with_drain` is waiting for `processing` to reach zero.
    drain: bool,
}

impl<K: Key> State<K> {
    /// Marks `key` dirty at `priority`. Returns whether a key was pushed onto a FIFO (so a getter
    /// must be woken).
    fn mark_dirty(&mut self, key: K, priority: Priority, metrics: Option<&QueueMetrics>) -> bool {
        match self.items.entry(key) {
            Entry::Occupied(mut entry) => {
                let item = entry.get_mut();
                if !item.dirty {
                    // Not dirty, so processing: `done` will queue it again.
                    item.dirty = true;
                    item.priority = priority;
                    if let Some(metrics) = metrics {
                        metrics.added(priority);
                        item.queued_at = Some(Instant::now());
                    }
                    return false;
                }
                if priority <= item.priority {
                    return false;
                }
                let was = std::mem::replace(&mut item.priority, priority);
                if let Some(metrics) = metrics {
                    metrics.moved(was, priority);
                }
                if item.processing {
                    return false;
                }
                // Waiting in the lower FIFO: move it up, leaving the old entry stale.
                let ticket = self.lanes.push(entry.key().clone(), priority);
                entry.get_mut().ticket = ticket;
                self.lanes.forget_one(was);
                true
            }
            Entry::Vacant(entry) => {
                let ticket = self.lanes.push(entry.key().clone(), priority);
                let queued_at = metrics.map(|metrics| {
                    metrics.added(priority);
                    Instant::now()
                });
                entry.insert(ItemState { dirty: true, priority, ticket, queued_at, ..ItemState::default() });
                true
            }
        }
    }

    /// Takes the next live key off the FIFO the share rule picks, dropping stale entries.
    fn pop(&mut self) -> Option<(K, Priority)> {
        let lanes = &mut self.lanes;
        let priority = next_lane(lanes.live_normal, lanes.live_low, lanes.normal_streak)?;
        lanes.normal_streak = match priority {
            Priority::Low => 0,
            Priority::Normal if lanes.live_low > 0 => lanes.normal_streak + 1,
            Priority::Normal => 0,
        };
        loop {
            let (ticket, key) = self.lanes.lane(priority).0.pop_front().expect("a FIFO with live entries is not empty");
            let live = self.items.get(&key).is_some_and(|item| item.ticket == ticket && item.dirty && !item.processing);
            if live {
                self.lanes.forget_one(priority);
                return Some((key, priority));
            }
        }
    }
}

/// The plain work queue (see the module docs). Shared by reference; the delaying layer owns it.
#[derive(Debug)]
pub(crate) struct Queue<K> {
    state: Mutex<State<K>>,
    /// Mirrors `State::shutting_down` for lock-free reads.
    shutting_down: AtomicBool,
    /// Wakes getters: one per queued key, all on shutdown.
    ready: Notify,
    /// Wakes `shut_down_with_drain` when the last processing key is done.
    idle: Notify,
    metrics: Option<QueueMetrics>,
    /// Whether priorities are honoured; without, every key is normal (one FIFO, client-go's).
    prioritized: bool,
}

impl<K: Key> Queue<K> {
    pub(crate) fn new(metrics: Option<QueueMetrics>, prioritized: bool) -> Self {
        Queue {
            state: Mutex::new(State {
                lanes: Lanes {
                    normal: VecDeque::new(),
                    low: VecDeque::new(),
                    live_normal: 0,
                    live_low: 0,
                    normal_streak: 0,
                    next_ticket: 0,
                },
                items: HashMap::default(),
                processing: 0,
                shutting_down: false,
                drain: false,
            }),
            shutting_down: AtomicBool::new(false),
            ready: Notify::new(),
            idle: Notify::new(),
            metrics,
            prioritized,
        }
    }

    /// The lock guards no invariant a panicking holder could break halfway that we then rely on,
    /// so a poisoned lock is used as is.
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn metrics(&self) -> Option<&QueueMetrics> {
        self.metrics.as_ref()
    }

    fn effective(&self, priority: Priority) -> Priority {
        if self.prioritized { priority } else { Priority::Normal }
    }

    pub(crate) fn add(&self, key: K) {
        self.add_with_priority(key, Priority::Normal);
    }

    pub(crate) fn add_with_priority(&self, key: K, priority: Priority) {
        let priority = self.effective(priority);
        let queued = {
            let mut state = self.lock();
            !state.shutting_down && state.mark_dirty(key, priority, self.metrics.as_ref())
        };
        if queued {
            self.ready.notify_one();
        }
    }

    /// Adds several keys at normal priority under one lock (the delaying timer firing).
    pub(crate) fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        let queued = {
            let mut state = self.lock();
            if state.shutting_down {
                return;
            }
            keys.into_iter()
                .map(|key| state.mark_dirty(key, Priority::Normal, self.metrics.as_ref()))
                .filter(|&pushed| pushed)
                .count()
        };
        for _ in 0..queued {
            self.ready.notify_one();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().lanes.len()
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Takes the next key if there is one; `Ready(None)` once shut down and empty.
    fn try_get(&self) -> Poll<Option<K>> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some((key, priority)) = state.pop() else {
            return if state.shutting_down { Poll::Ready(None) } else { Poll::Pending };
        };
        let item = state.items.get_mut(&key).expect("a live queued key has an entry");
        item.dirty = false;
        item.processing = true;
        state.processing += 1;
        if let Some(metrics) = &self.metrics {
            let now = Instant::now();
            metrics.got(priority, item.queued_at.take().map(|at| now - at));
            item.started_at = Some(now);
        }
        Poll::Ready(Some(key))
    }

    pub(crate) async fn get(&self) -> Option<K> {
        loop {
            if let Poll::Ready(key) = self.try_get() {
                return key;
            }
            // Register before looking again, so an `add` between the look and the wait wakes us.
            let mut notified = pin!(self.ready.notified());
            notified.as_mut().enable();
            if let Poll::Ready(key) = self.try_get() {
                return key;
            }
            notified.await;
        }
    }

    pub(crate) fn done(&self, key: &K) {
        let (queued, idle) = {
            let mut guard = self.lock();
            let state = &mut *guard;
            // One lookup on the common path: take the entry out, put it back only if still dirty.
            let Some((key, mut item)) = state.items.remove_entry(key) else {
                return;
            };
            if !item.processing {
                state.items.insert(key, item);
                return;
            }
            item.processing = false;
            state.processing -= 1;
            if let (Some(metrics), Some(started_at)) = (&self.metrics, item.started_at.take()) {
                metrics.finished(started_at.elapsed());
            }
            let queued = item.dirty;
            if queued {
                item.ticket = state.lanes.push(key.clone(), item.priority);
                state.items.insert(key, item);
            }
            (queued, state.processing == 0 && state.drain)
        };
        if queued {
            self.ready.notify_one();
        }
        if idle {
            self.idle.notify_waiters();
        }
    }

    /// Marks the queue shutting down and wakes every waiter; `drain` makes `wait_for_drain` wait.
    pub(crate) fn begin_shut_down(&self, drain: bool) {
        {
            let mut state = self.lock();
            state.shutting_down = true;
            state.drain = drain;
            self.shutting_down.store(true, Ordering::Release);
        }
        self.ready.notify_waiters();
        self.idle.notify_waiters();
    }

    pub(crate) fn shut_down(&self) {
        self.begin_shut_down(false);
    }

    #[cfg(test)]
    pub(crate) async fn shut_down_with_drain(&self) {
        self.begin_shut_down(true);
        self.wait_for_drain().await;
    }

    /// Waits until no key is processing, or until a plain `shut_down` cancels the drain.
    pub(crate) async fn wait_for_drain(&self) {
        loop {
            let mut notified = pin!(self.idle.notified());
            notified.as_mut().enable();
            {
                let state = self.lock();
                if state.processing == 0 || !state.drain {
                    return;
                }
            }
            notified.await;
        }
    }
}

impl<K: Key> UnfinishedWork for Queue<K> {
    fn unfinished_work(&self, now: Instant) -> (f64, f64) {
        let state = self.lock();
        state
            .items
            .values()
            .filter_map(|item| item.started_at)
            .map(|started_at| (now - started_at).as_secs_f64())
            .fold((0.0, 0.0), |(total, longest), seconds| (total + seconds, f64::max(longest, seconds)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn queue() -> Queue<&'static str> {
        Queue::new(None, true)
    }

    /// `get` when the test knows a key is ready: no waiting.
    fn get_now(queue: &Queue<&'static str>) -> Option<&'static str> {
        match queue.try_get() {
            Poll::Ready(key) => key,
            Poll::Pending => panic!("expected a key to be ready"),
        }
    }

    #[test]
    fn keys_come_out_in_the_order_they_were_added() {
        let queue = queue();
        for key in ["a", "b", "c"] {
            queue.add(key);
        }
        assert_eq!([get_now(&queue), get_now(&queue), get_now(&queue)], [Some("a"), Some("b"), Some("c")]);
    }

    #[test]
    fn a_key_added_twice_while_waiting_is_queued_once() {
        let queue = queue();
        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!(queue.len(), 2);
        assert_eq!(get_now(&queue), Some("a"));
        assert_eq!(get_now(&queue), Some("b"));
        assert_eq!(queue.try_get(), Poll::Pending);
    }

    #[test]
    fn a_key_added_while_processing_is_not_handed_out_until_done() {
        let queue = queue();
        queue.add("a");
        assert_eq!(get_now(&queue), Some("a"));
        queue.add("a");
        assert_eq!(queue.len(), 0, "a processing key is not queued");
        assert_eq!(queue.try_get(), Poll::Pending);
        queue.done(&"a");
        assert_eq!(queue.len(), 1);
        assert_eq!(get_now(&queue), Some("a"));
    }

    #[test]
    fn a_done_key_that_was_not_re_added_is_forgotten() {
        let queue = queue();
        queue.add("a");
        get_now(&queue);
        queue.done(&"a");
        assert_eq!(queue.len(), 0);
        assert!(queue.lock().items.is_empty());
    }

    #[test]
    fn done_for_a_key_that_is_not_processing_is_ignored() {
        let queue = queue();
        queue.done(&"never-added");
        queue.add("a");
        queue.done(&"a");
        assert_eq!(queue.len(), 1, "still queued once");
        assert_eq!(get_now(&queue), Some("a"));
        assert_eq!(queue.try_get(), Poll::Pending);
    }

    #[test]
    fn an_add_after_shut_down_is_ignored() {
        let queue = queue();
        queue.shut_down();
        queue.add("a");
        assert_eq!(queue.len(), 0);
        assert!(queue.is_shutting_down());
    }

    #[tokio::test]
    async fn get_hands_out_queued_keys_after_shut_down_then_returns_none() {
        let queue = queue();
        queue.add("a");
        queue.shut_down();
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test]
    async fn a_key_re_added_while_processing_before_shut_down_is_handed_out_again() {
        let queue = queue();
        queue.add("a");
        assert_eq!(queue.get().await, Some("a"));
        queue.add("a");
        queue.shut_down();
        queue.done(&"a");
        assert_eq!(queue.get().await, Some("a"));
        queue.done(&"a");
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test]
    async fn a_waiting_get_returns_the_next_added_key() {
        let queue = Arc::new(queue());
        let getter = tokio::spawn({
            let queue = Arc::clone(&queue);
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.add("a");
        assert_eq!(getter.await.unwrap(), Some("a"));
    }

    #[tokio::test]
    async fn shut_down_wakes_every_waiting_get_with_none() {
        let queue = Arc::new(queue());
        let getters: Vec<_> = (0..3)
            .map(|_| {
                let queue = Arc::clone(&queue);
                tokio::spawn(async move { queue.get().await })
            })
            .collect();
        tokio::task::yield_now().await;
        queue.shut_down();
        for getter in getters {
            assert_eq!(getter.await.unwrap(), None);
        }
    }

    #[tokio::test]
    async fn a_cancelled_get_passes_its_wake_up_to_another_getter() {
        let queue = Arc::new(queue());
        let mut cancelled = Box::pin(queue.get());
        assert!(futures::poll!(cancelled.as_mut()).is_pending());
        let waiting = tokio::spawn({
            let queue = Arc::clone(&queue);
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.add("a");
        drop(cancelled);
        assert_eq!(waiting.await.unwrap(), Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_with_drain_waits_for_processing_keys_to_be_done() {
        let queue = Arc::new(queue());
        queue.add("a");
        assert_eq!(queue.get().await, Some("a"));
        let drain = tokio::spawn({
            let queue = Arc::clone(&queue);
            async move { queue.shut_down_with_drain().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!drain.is_finished(), "a key is still processing");
        queue.done(&"a");
        tokio::time::timeout(Duration::from_secs(1), drain).await.expect("drain returns once the key is done").unwrap();
    }

    #[tokio::test]
    async fn shut_down_with_drain_returns_at_once_when_nothing_is_processing() {
        let queue = queue();
        queue.add("a");
        queue.shut_down_with_drain().await;
        assert_eq!(queue.get().await, Some("a"), "queued keys are still handed out");
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_ends_a_drain_that_waits_for_a_key_never_done() {
        let queue = Arc::new(queue());
        queue.add("a");
        queue.get().await;
        let drain = tokio::spawn({
            let queue = Arc::clone(&queue);
            async move { queue.shut_down_with_drain().await }
        });
        tokio::task::yield_now().await;
        queue.shut_down();
        tokio::time::timeout(Duration::from_secs(1), drain).await.expect("shut_down ends the drain").unwrap();
    }

    /// Keys handed out until the queue is empty, each done at once.
    fn drain(queue: &Queue<&'static str>) -> Vec<&'static str> {
        let mut order = Vec::new();
        while let Poll::Ready(Some(key)) = queue.try_get() {
            queue.done(&key);
            order.push(key);
        }
        order
    }

    #[test]
    fn normal_keys_are_handed_out_before_low_ones_added_earlier() {
        let queue = queue();
        queue.add_with_priority("low-1", Priority::Low);
        queue.add_with_priority("low-2", Priority::Low);
        queue.add("new");
        assert_eq!(queue.len(), 3);
        assert_eq!(drain(&queue), ["new", "low-1", "low-2"]);
    }

    #[test]
    fn low_keys_get_one_turn_in_five_while_normal_keys_keep_coming() {
        // Regression for controller-runtime #3496: a steady stream of normal work must not
        // starve what the initial list queued.
        let queue = queue();
        queue.add_with_priority("low-1", Priority::Low);
        queue.add_with_priority("low-2", Priority::Low);
        let normal: Vec<&'static str> = vec!["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"];
        for key in &normal {
            queue.add(key);
        }
        let order = drain(&queue);
        assert_eq!(order, ["n0", "n1", "n2", "n3", "low-1", "n4", "n5", "n6", "n7", "low-2", "n8", "n9"]);
    }

    #[test]
    fn a_waiting_low_key_added_at_normal_moves_up_once() {
        let queue = queue();
        queue.add_with_priority("a", Priority::Low);
        queue.add_with_priority("b", Priority::Low);
        queue.add("c");
        queue.add("b");
        assert_eq!(queue.len(), 3, "moved, not duplicated");
        assert_eq!(drain(&queue), ["c", "b", "a"]);
        assert!(queue.lock().lanes.low.is_empty() && queue.lock().lanes.normal.is_empty(), "no stale entry is left");
    }

    #[test]
    fn a_waiting_normal_key_added_at_low_stays_normal() {
        let queue = queue();
        queue.add_with_priority("a", Priority::Low);
        queue.add("b");
        queue.add_with_priority("b", Priority::Low);
        assert_eq!(queue.len(), 2);
        assert_eq!(drain(&queue), ["b", "a"]);
    }

    #[test]
    fn a_key_re_added_while_processing_is_queued_again_at_the_highest_priority_it_got() {
        let queue = queue();
        queue.add("a");
        assert_eq!(get_now(&queue), Some("a"));
        queue.add_with_priority("b", Priority::Low);
        queue.add_with_priority("a", Priority::Low);
        queue.add("a");
        queue.done(&"a");
        assert_eq!(drain(&queue), ["a", "b"]);

        queue.add("a");
        assert_eq!(get_now(&queue), Some("a"));
        queue.add_with_priority("b", Priority::Low);
        queue.add_with_priority("a", Priority::Low);
        queue.done(&"a");
        assert_eq!(drain(&queue), ["b", "a"], "low and re-added low: behind b, which came first");
    }

    #[test]
    fn without_priorities_every_key_is_normal_and_one_fifo_keeps_the_order() {
        let queue = Queue::new(None, false);
        queue.add_with_priority("low", Priority::Low);
        queue.add("normal");
        assert_eq!(drain(&queue), ["low", "normal"]);
    }

    #[test]
    fn a_processing_key_is_never_handed_out_through_a_stale_entry() {
        let queue = queue();
        queue.add_with_priority("a", Priority::Low);
        queue.add_with_priority("z", Priority::Low);
        queue.add("a");
        assert_eq!(get_now(&queue), Some("a"));
        // "a"'s stale low entry comes first in the low FIFO; "a" is processing.
        assert_eq!(get_now(&queue), Some("z"));
        assert_eq!(queue.try_get(), Poll::Pending);
        queue.done(&"a");
        queue.done(&"z");
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn unfinished_work_is_zero_without_metrics() {
        let queue = queue();
        queue.add("a");
        get_now(&queue);
        assert_eq!(queue.unfinished_work(Instant::now()), (0.0, 0.0));
    }
}
