//! Work queue micro-benchmarks, one criterion group per scenario. Each reports keys processed per
//! second; `benches/peers/client-go-workqueue` does the same work with client-go's queue and
//! `hack/bench/workqueue-vs-client-go.sh` prints the two side by side.
//!
//! - `add_get_done/workers=W/keys=N`: a producer adds N distinct keys; W workers loop
//!   `get` -> `done` (a controller's worker with an empty reconcile) until all N are processed.
//!   The queue and its workers live for the whole benchmark (a controller's steady state); one
//!   iteration is one batch of N keys. Workers are Tokio tasks on a multi-thread runtime with 2
//!   worker threads (this machine has 2 cores). The producer is a task on the same runtime, as
//!   the informer's handler task is in the operator and the producer goroutine is in client-go's
//!   benchmark; it calls `tokio::task::consume_budget` after each add, so it hands its thread back
//!   every 128 adds, the budget Tokio gives a task reading a channel (a producer that never
//!   yields would keep woken workers queued behind it on its thread).
//! - `add_get_done_arc_str`: the same with `Arc<str>` keys instead of `String`. A Go string is an
//!   immutable shared pointer, so this is the like-for-like key type; `String` is what the
//!   operator's controller queues, and costs an allocation per clone (the queue keeps one copy
//!   while the worker holds another).
//! - `add_get_done_from_thread`: the producer is a plain thread instead of a task (three busy
//!   threads on two cores).
//! - `current_thread/workers=W/keys=N`: the operator's own configuration. Its binary runs on a
//!   current-thread Tokio runtime (`--runtime-threads`, default 1) and queues `Arc<str>` keys
//!   (`controller::ObjectKey`), so here the W workers, the producer task (the same producer as
//!   above, yielding every 128 adds) and the benchmark's wait for the batch all run on one
//!   current-thread runtime: a wake-up is a task put on the thread's own run queue, never a
//!   thread woken. Compare it with client-go's `add_get_done` (its goroutines on every core, or
//!   with `GOMAXPROCS=1` on one thread, like for like).
//! - `single_thread/keys=N`: one thread adds N keys, then gets and dones them all; no waiting, no
//!   wake-ups: the cost of the queue's data structures alone (`single_thread_arc_str`: with
//!   `Arc<str>` keys).
//! - `rate_limited/workers=1/keys=N`: a fresh queue with the default controller rate limiter
//!   (client-go's `DefaultControllerRateLimiter`); `add_rate_limited` for N keys, then one worker
//!   loops `get` -> `forget` -> `done`. The limiter makes every key wait (5 ms, and past a burst
//!   of 100, 100 ms more per key: 990 s for 10,000 keys), so the runtime runs on Tokio's paused
//!   clock and the clock is advanced past every deadline at once: what is measured is the CPU cost
//!   of the limiter, the delay heap, the timer and the queue, not the waiting. client-go's side
//!   steps a fake clock the same way.
//!
//! Keys are `namespace-I/database-J`, like the controller's `namespace/name`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use futures::FutureExt;
use operator_runtime::workqueue::{Key, RateLimitingQueue};
use tokio::runtime::{Builder, Runtime};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use support::Countdown;

mod support;

/// How many distinct keys one iteration processes.
const KEY_COUNTS: [usize; 2] = [100, 10_000];
/// How many workers get keys concurrently (a controller's `--workers`).
const WORKER_COUNTS: [usize; 5] = [1, 2, 4, 8, 16];
/// Tokio worker threads: one per core of the 2-core machine the figures are taken on.
const RUNTIME_THREADS: usize = 2;

/// `count` distinct keys shaped like the controller's (`namespace/name`), over 100 namespaces.
fn keys<K: From<String>>(count: usize) -> Vec<K> {
    (0..count).map(|i| K::from(format!("namespace-{}/database-{i}", i % 100))).collect()
}

/// A controller's worker loop with an empty reconcile; `tick` once per key done.
async fn worker<K: Key>(queue: RateLimitingQueue<K>, tick: impl Fn()) {
    while let Some(key) = queue.get().await {
        queue.done(&key);
        tick();
    }
}

/// The producer task: adds every key, letting the scheduler in every 128 adds.
async fn produce<K: Key>(queue: RateLimitingQueue<K>, keys: Arc<[K]>) {
    for key in keys.iter() {
        queue.add(key.clone());
        tokio::task::consume_budget().await;
    }
}

/// Where the keys are added from.
#[derive(Clone, Copy)]
enum Producer {
    /// A task on the workers' runtime that lets the scheduler in every 128 adds.
    Task,
    /// The benchmark's own thread, outside the runtime.
    Thread,
}

/// A queue with its workers on a 2-thread runtime; the thread that made it waits for batches.
struct Pool<K> {
    runtime: Runtime,
    queue: RateLimitingQueue<K>,
    countdown: Arc<Countdown>,
    workers: Vec<JoinHandle<()>>,
}

impl<K: Key> Pool<K> {
    fn new(workers: usize) -> Self {
        let runtime = Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .enable_all()
            .build()
            .expect("a Tokio runtime starts");
        let queue = RateLimitingQueue::new("bench");
        let countdown = Arc::new(Countdown::new());
        let workers = (0..workers)
            .map(|_| {
                let countdown = countdown.clone();
                runtime.spawn(worker(queue.clone(), move || countdown.tick()))
            })
            .collect();
        Pool { runtime, queue, countdown, workers }
    }

    /// Adds every key from `producer`, then waits until the workers processed them all.
    fn run(&self, keys: &Arc<[K]>, producer: Producer) {
        self.countdown.start(keys.len());
        match producer {
            Producer::Task => {
                self.runtime.spawn(produce(self.queue.clone(), keys.clone()));
            }
            Producer::Thread => {
                for key in keys.iter() {
                    self.queue.add(key.clone());
                }
            }
        }
        self.countdown.wait();
    }

    fn stop(self) {
        self.queue.shut_down();
        self.runtime.block_on(async {
            for worker in self.workers {
                worker.await.expect("a worker does not panic");
            }
        });
    }
}

/// The `add_get_done` scenario with keys of type `K` added from `producer`, as criterion group
/// `name`, for `worker_counts` workers.
fn add_get_done<K: Key + From<String>>(c: &mut Criterion, name: &str, producer: Producer, worker_counts: &[usize]) {
    let mut group = c.benchmark_group(name);
    for count in KEY_COUNTS {
        let keys: Arc<[K]> = keys::<K>(count).into();
        group.throughput(Throughput::Elements(count as u64));
        for &workers in worker_counts {
            let id = BenchmarkId::new(format!("workers={workers}"), format!("keys={count}"));
            // One pool for all of this benchmark's samples, made only if the filter runs it.
            let mut pool = None;
            group.bench_function(id, |b| {
                support::ran(&format!("{name}/workers={workers}/keys={count}"));
                let pool = pool.get_or_insert_with(|| Pool::<K>::new(workers));
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        pool.run(&keys, producer);
                    }
                    start.elapsed()
                });
            });
            if let Some(pool) = pool {
                pool.stop();
            }
        }
    }
    group.finish();
}

/// [`Countdown`] for a waiter that is a task on the workers' current-thread runtime: the last
/// tick wakes it through the runtime, not by unparking a thread.
#[derive(Debug, Default)]
struct TaskCountdown {
    remaining: AtomicUsize,
    finished: Notify,
}

impl TaskCountdown {
    fn start(&self, count: usize) {
        self.remaining.fetch_add(count, Ordering::AcqRel);
    }

    fn tick(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finished.notify_one();
        }
    }

    async fn wait(&self) {
        while self.remaining.load(Ordering::Acquire) != 0 {
            self.finished.notified().await;
        }
    }
}

/// `add_get_done` in the operator's configuration (`current_thread/workers=W/keys=N`): `Arc<str>`
/// keys; workers, producer and the wait for each batch on one current-thread runtime, which
/// runs only while the benchmark thread is inside `block_on`, as the operator's thread always is.
fn current_thread(c: &mut Criterion) {
    let name = "current_thread";
    let mut group = c.benchmark_group(name);
    for count in KEY_COUNTS {
        let keys: Arc<[Arc<str>]> = keys::<Arc<str>>(count).into();
        group.throughput(Throughput::Elements(count as u64));
        for workers in WORKER_COUNTS {
            let id = BenchmarkId::new(format!("workers={workers}"), format!("keys={count}"));
            let runtime = Builder::new_current_thread().enable_all().build().expect("a Tokio runtime starts");
            let queue = RateLimitingQueue::<Arc<str>>::new("bench");
            let countdown = Arc::new(TaskCountdown::default());
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let countdown = countdown.clone();
                    runtime.spawn(worker(queue.clone(), move || countdown.tick()))
                })
                .collect();
            group.bench_function(id, |b| {
                support::ran(&format!("{name}/workers={workers}/keys={count}"));
                b.iter_custom(|iters| {
                    runtime.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            countdown.start(keys.len());
                            tokio::spawn(produce(queue.clone(), keys.clone()));
                            countdown.wait().await;
                        }
                        start.elapsed()
                    })
                });
            });
            queue.shut_down();
            runtime.block_on(async {
                for handle in handles {
                    handle.await.expect("a worker does not panic");
                }
            });
        }
    }
    group.finish();
}

/// The `single_thread` scenario with keys of type `K`, as criterion group `name`.
fn single_thread<K: Key + From<String>>(c: &mut Criterion, name: &str) {
    let mut group = c.benchmark_group(name);
    for count in KEY_COUNTS {
        let keys = keys::<K>(count);
        let queue = RateLimitingQueue::<K>::new("bench");
        group.throughput(Throughput::Elements(count as u64));
        group.bench_function(BenchmarkId::from_parameter(format!("keys={count}")), |b| {
            support::ran(&format!("{name}/keys={count}"));
            b.iter(|| {
                for key in &keys {
                    queue.add(key.clone());
                }
                for _ in 0..keys.len() {
                    // A queued key is handed out without waiting.
                    let key = queue.get().now_or_never().flatten().expect("a key is queued");
                    queue.done(&key);
                }
            });
        });
    }
    group.finish();
}

/// One worker: `get` -> (reconcile succeeded) `forget` -> `done`, for `count` keys.
async fn forgetting_worker(queue: RateLimitingQueue<String>, count: usize) {
    for _ in 0..count {
        let key = queue.get().await.expect("the queue is not shut down while keys are due");
        queue.forget(&key);
        queue.done(&key);
    }
}

/// `iters` rounds of: fresh queue, `add_rate_limited` every key, move the paused clock past every
/// deadline, one worker drains. Queue construction and shutdown are not timed.
async fn rate_limited_rounds(keys: &[String], iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let queue = RateLimitingQueue::<String>::new("bench");
        let start = Instant::now();
        let worker = tokio::spawn(forgetting_worker(queue.clone(), keys.len()));
        for key in keys {
            queue.add_rate_limited(key.clone());
        }
        // Past the last deadline: 10,000 keys at 10 per second after a burst of 100 is 990 s.
        tokio::time::advance(Duration::from_secs(3600)).await;
        worker.await.expect("the worker does not panic");
        total += start.elapsed();
        queue.shut_down();
    }
    total
}

fn rate_limited(c: &mut Criterion) {
    let runtime =
        Builder::new_current_thread().enable_time().start_paused(true).build().expect("a Tokio runtime starts");
    let mut group = c.benchmark_group("rate_limited");
    for count in KEY_COUNTS {
        let keys = keys::<String>(count);
        group.throughput(Throughput::Elements(count as u64));
        group.bench_function(BenchmarkId::new("workers=1", format!("keys={count}")), |b| {
            support::ran(&format!("rate_limited/workers=1/keys={count}"));
            b.to_async(&runtime).iter_custom(|iters| rate_limited_rounds(&keys, iters));
        });
    }
    group.finish();
}

fn main() {
    let mut criterion = support::criterion();
    add_get_done::<String>(&mut criterion, "add_get_done", Producer::Task, &WORKER_COUNTS);
    add_get_done::<Arc<str>>(&mut criterion, "add_get_done_arc_str", Producer::Task, &WORKER_COUNTS);
    add_get_done::<String>(&mut criterion, "add_get_done_from_thread", Producer::Thread, &[1, 2, 16]);
    current_thread(&mut criterion);
    single_thread::<String>(&mut criterion, "single_thread");
    single_thread::<Arc<str>>(&mut criterion, "single_thread_arc_str");
    rate_limited(&mut criterion);
    criterion.final_summary();
    support::print_table("workqueue");
}
