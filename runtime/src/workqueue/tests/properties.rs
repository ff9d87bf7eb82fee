//! Property tests of the queue invariants, with real concurrency: several workers on a
//! multi-threaded runtime, random adds, delays and processing times.
//!
//! 1. No two workers ever hold the same key at once.
//! 2. Every key is processed after its last add.
//! 3. `shut_down_with_drain` returns only when every key in flight at the shutdown is done.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;

use crate::workqueue::{Priority, RateLimitingQueue};

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    /// An add at low priority: the same guarantees hold across priorities.
    AddLow(u8),
    /// A delayed add of a few milliseconds, as noise: it may fire after the last `Add`.
    AddAfter(u8, u8),
    /// Let the workers run.
    Yield,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..8u8).prop_map(Op::Add),
        2 => (0..8u8).prop_map(Op::AddLow),
        1 => (0..8u8, 0..3u8).prop_map(|(key, ms)| Op::AddAfter(key, ms)),
        2 => Just(Op::Yield),
    ]
}

/// What the workers saw. One counter orders adds and gets globally.
#[derive(Default)]
struct Record {
    clock: AtomicU64,
    /// Keys a worker holds right now.
    holding: Mutex<HashSet<u8>>,
    /// Tickets (the clock when a worker got a key) not yet done.
    in_flight: Mutex<HashSet<u64>>,
    last_add: Mutex<HashMap<u8, u64>>,
    last_get: Mutex<HashMap<u8, u64>>,
    violations: Mutex<Vec<String>>,
}

impl Record {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }
}

async fn worker(queue: RateLimitingQueue<u8>, record: Arc<Record>, work: Vec<u8>) {
    let mut work = work.into_iter().cycle();
    while let Some(key) = queue.get().await {
        let ticket = record.tick();
        if !record.holding.lock().unwrap().insert(key) {
            record.violations.lock().unwrap().push(format!("two workers hold {key}"));
        }
        record.last_get.lock().unwrap().insert(key, ticket);
        record.in_flight.lock().unwrap().insert(ticket);
        for _ in 0..work.next().unwrap_or(0) {
            tokio::task::yield_now().await;
        }
        record.in_flight.lock().unwrap().remove(&ticket);
        record.holding.lock().unwrap().remove(&key);
        queue.done(&key);
    }
}

async fn produce(queue: &RateLimitingQueue<u8>, record: &Record, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Add(key) => {
                record.last_add.lock().unwrap().insert(key, record.tick());
                queue.add(key);
            }
            Op::AddLow(key) => {
                record.last_add.lock().unwrap().insert(key, record.tick());
                queue.add_with_priority(key, Priority::Low);
            }
            Op::AddAfter(key, ms) => queue.add_after(key, Duration::from_millis(ms.into())),
            Op::Yield => tokio::task::yield_now().await,
        }
    }
}

/// Runs `ops` against `workers` workers, shutting down with drain after `drain_after` ops
/// (or after all of them), and returns the record once every worker has exited.
fn run(ops: Vec<Op>, work: Vec<Vec<u8>>, drain_after: Option<usize>) -> Arc<Record> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let record = Arc::new(Record::default());
    let scenario = {
        let record = Arc::clone(&record);
        async move {
            let queue = RateLimitingQueue::new("property");
            let workers: Vec<_> =
                work.into_iter().map(|work| tokio::spawn(worker(queue.clone(), Arc::clone(&record), work))).collect();
            let split = drain_after.unwrap_or(ops.len()).min(ops.len());
            produce(&queue, &record, &ops[..split]).await;
            // Shutdown begins on the first poll; the tickets in flight then must all be done
            // when the drain returns. The snapshot is taken just before that poll: a ticket in it
            // is held by a worker (a worker records its ticket after `get` and removes it before
            // `done`). A snapshot taken after the poll would also catch a key a worker got after
            // a drain that returned at once (`get` still hands out queued keys while shutting
            // down), which no drain promises to wait for.
            let at_shutdown: Vec<u64> = record.in_flight.lock().unwrap().iter().copied().collect();
            let mut drain = std::pin::pin!(queue.shut_down_with_drain());
            let drained = futures::poll!(drain.as_mut()).is_ready();
            produce(&queue, &record, &ops[split..]).await; // all ignored
            if !drained {
                drain.await;
            }
            let unfinished: Vec<u64> = {
                let in_flight = record.in_flight.lock().unwrap();
                at_shutdown.into_iter().filter(|ticket| in_flight.contains(ticket)).collect()
            };
            for ticket in unfinished {
                let violation = format!("ticket {ticket} still in flight after the drain");
                record.violations.lock().unwrap().push(violation);
            }
            for worker in workers {
                worker.await.unwrap();
            }
        }
    };
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), scenario)
            .await
            .expect("the scenario finishes (no lost wake-up, no stuck drain)");
    });
    record
}

fn scenario() -> impl Strategy<Value = (Vec<Op>, Vec<Vec<u8>>)> {
    (prop::collection::vec(op(), 1..150), prop::collection::vec(prop::collection::vec(0..4u8, 1..8), 1..5))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn no_two_workers_ever_hold_the_same_key((ops, work) in scenario()) {
        let record = run(ops, work, None);
        prop_assert_eq!(record.violations.lock().unwrap().clone(), Vec::<String>::new());
    }

    #[test]
    fn every_key_is_processed_after_its_last_add((ops, work) in scenario()) {
        let record = run(ops, work, None);
        let last_get = record.last_get.lock().unwrap();
        for (key, added) in record.last_add.lock().unwrap().iter() {
            let got = last_get.get(key).copied();
            prop_assert!(
                got.is_some_and(|got| got > *added),
                "key {} added at {} but last got at {:?}", key, added, got
            );
        }
    }

    #[test]
    fn shut_down_with_drain_loses_nothing_in_flight(
        (ops, work) in scenario(),
        drain_after in 0..150usize,
    ) {
        let record = run(ops, work, Some(drain_after));
        prop_assert_eq!(record.violations.lock().unwrap().clone(), Vec::<String>::new());
        prop_assert!(record.in_flight.lock().unwrap().is_empty());
    }
}
