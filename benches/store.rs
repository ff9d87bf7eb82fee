//! Informer cache micro-benchmarks, one criterion group per scenario, each at 10,000 and 100,000
//! cached Deployments (`benches/fixtures`: realistic objects with labels, a controller
//! ownerReference and a pod template) and with 0, 1 and 4 concurrent readers.
//!
//! The store is written only by its informer, so writes are measured through the public path a
//! watch event takes: a real [`Informer`] over an in-process fake apiserver
//! (`fixtures::FakeApi`), with the namespace and controller-uid indices. One "apply" is one watch
//! event: transform (drop managedFields), store and both indices updated under the write lock,
//! the delta queued and handed to an event handler. An iteration sends a batch of 1,000 events
//! and waits until the handler has seen the last one.
//!
//! - `store_apply_update`: MODIFIED for cached objects (a new resourceVersion and status, the
//!   labels and owner unchanged, so no index moves), the common event.
//! - `store_apply_insert`: ADDED for new objects; the same objects are deleted again, untimed,
//!   so the store stays at its size.
//! - `store_get`: `Store::get` by key.
//! - `store_by_namespace`: `Store::by_index(NAMESPACE_INDEX, ns)`: 100 (or 1,000) objects.
//! - `store_by_controller_uid`: `Store::by_index(CONTROLLER_UID_INDEX, uid)`: one object, what a
//!   reconcile does to find its children.
//!
//! Concurrent readers are plain threads looping `get` + `by_index(controller-uid)` on random
//! objects as fast as they can (a worst case: reconciles do much else between reads). On a
//! 2-core machine, 4 spinning readers also take CPU from the benchmark thread, so their figures
//! measure contention and CPU share together.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use k8s_openapi::api::apps::v1::Deployment;
use kube_core::{ObjectMeta, WatchEvent};
use operator_runtime::informer::{CONTROLLER_UID_INDEX, EventHandler, Informer, NAMESPACE_INDEX, Store};
use tokio::runtime::{Builder, Runtime};
use tokio_util::sync::CancellationToken;

use fixtures::EventSender;
use support::Countdown;

mod fixtures;
mod support;

/// Cache sizes measured; criterion's test mode (`cargo test --all-targets`, unoptimized) runs
/// every benchmark once on a small cache instead.
fn object_counts() -> &'static [usize] {
    if support::testing() { &[1_000] } else { &[10_000, 100_000] }
}
const READER_COUNTS: [usize; 3] = [0, 1, 4];
/// Watch events per iteration of the apply benchmarks.
const BATCH: usize = 1_000;
/// A prime stride through the objects, so consecutive reads hit unrelated memory.
const STRIDE: usize = 7_919;

/// Ticks a countdown for every change the informer reports.
struct Counter(Arc<Countdown>);

impl EventHandler<Deployment> for Counter {
    fn on_add(&self, _obj: &Arc<Deployment>, _: bool) {
        self.0.tick();
    }
    fn on_update(&self, _old: &Arc<Deployment>, _new: &Arc<Deployment>) {
        self.0.tick();
    }
    fn on_delete(&self, _obj: &Arc<Deployment>) {
        self.0.tick();
    }
}

/// A running informer over `count` Deployments, and what the benchmarks need to drive and read it.
struct Fixture {
    count: usize,
    /// Runs the informer task; dropped after `cancel` fires, it waits for the task to end.
    _runtime: Runtime,
    informer: Arc<Informer<Deployment>>,
    sender: EventSender,
    applied: Arc<Countdown>,
    cancel: CancellationToken,
    keys: Vec<String>,
    uids: Vec<String>,
    namespaces: Vec<String>,
    next_resource_version: u64,
    next_update: usize,
}

impl Fixture {
    fn new(count: usize) -> Self {
        // The informer is one task (reflector and dispatcher are polled together).
        let runtime =
            Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a Tokio runtime starts");
        let (informer, sender) = fixtures::informer(fixtures::deployments(count));
        let applied = Arc::new(Countdown::new());
        informer.add_event_handler(Arc::new(Counter(applied.clone())));
        let cancel = CancellationToken::new();
        applied.start(count);
        runtime.spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        applied.wait();
        assert_eq!(informer.store().len(), count, "the informer listed every object");
        Fixture {
            count,
            _runtime: runtime,
            informer,
            sender,
            applied,
            cancel,
            keys: (0..count).map(fixtures::key).collect(),
            uids: (0..count).map(fixtures::owner_uid).collect(),
            namespaces: (0..fixtures::NAMESPACES).map(fixtures::namespace).collect(),
            next_resource_version: 2,
            next_update: 0,
        }
    }

    fn store(&self) -> Store<Deployment> {
        self.informer.store()
    }

    /// Sends `events` as one batch and waits until the handler has seen them all; returns how
    /// long that took.
    fn apply(&self, events: Vec<WatchEvent<Deployment>>) -> Duration {
        let start = Instant::now();
        self.applied.start(events.len());
        self.sender.send(events).expect("the informer is running");
        self.applied.wait();
        start.elapsed()
    }

    /// The next `BATCH` cached objects with a new resourceVersion and status.
    fn updates(&mut self) -> Vec<WatchEvent<Deployment>> {
        let resource_version = self.next_resource_version;
        self.next_resource_version += 1;
        let events = (0..BATCH)
            .map(|n| {
                let i = (self.next_update + n) % self.count;
                let mut obj = fixtures::deployment(i, resource_version);
                if let Some(status) = obj.status.as_mut() {
                    status.observed_generation = Some(resource_version as i64);
                }
                WatchEvent::Modified(obj)
            })
            .collect();
        self.next_update = (self.next_update + BATCH) % self.count;
        events
    }

    /// Objects not in the store: `count..count + BATCH`.
    fn inserts(&mut self) -> Vec<WatchEvent<Deployment>> {
        let resource_version = self.next_resource_version;
        self.next_resource_version += 1;
        (self.count..self.count + BATCH).map(|i| WatchEvent::Added(fixtures::deployment(i, resource_version))).collect()
    }

    /// Deletes the objects [`inserts`](Self::inserts) added (only the key matters).
    fn deletes(&self) -> Vec<WatchEvent<Deployment>> {
        (self.count..self.count + BATCH)
            .map(|i| {
                let name = fixtures::key(i).split_once('/').map(|(_, name)| name.to_string());
                let metadata = ObjectMeta { namespace: Some(fixtures::namespace(i)), name, ..ObjectMeta::default() };
                WatchEvent::Deleted(Deployment { metadata, ..Deployment::default() })
            })
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // The runtime, dropped next, then waits for the informer task to end.
        self.cancel.cancel();
    }
}

/// Threads reading the store as fast as they can until dropped.
struct Readers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Readers {
    fn start(count: usize, fixture: &Fixture) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..count)
            .map(|reader| {
                let (stop, store) = (stop.clone(), fixture.store());
                let (keys, uids) = (fixture.keys.clone(), fixture.uids.clone());
                std::thread::spawn(move || {
                    let mut i = reader * 104_729;
                    while !stop.load(Ordering::Relaxed) {
                        i = (i + STRIDE) % keys.len();
                        black_box(store.get(&keys[i]));
                        black_box(store.by_index(CONTROLLER_UID_INDEX, &uids[i]));
                    }
                })
            })
            .collect();
        Readers { stop, threads }
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            thread.join().expect("a reader does not panic");
        }
    }
}

#[derive(Clone, Copy)]
enum Scenario {
    Update,
    Insert,
    Get,
    ByNamespace,
    ByControllerUid,
}

impl Scenario {
    const ALL: [Scenario; 5] =
        [Scenario::Update, Scenario::Insert, Scenario::Get, Scenario::ByNamespace, Scenario::ByControllerUid];

    fn group(self) -> &'static str {
        match self {
            Scenario::Update => "store_apply_update",
            Scenario::Insert => "store_apply_insert",
            Scenario::Get => "store_get",
            Scenario::ByNamespace => "store_by_namespace",
            Scenario::ByControllerUid => "store_by_controller_uid",
        }
    }

    /// Elements per iteration: watch events for the apply scenarios, queries for the others.
    fn elements(self) -> u64 {
        match self {
            Scenario::Update | Scenario::Insert => BATCH as u64,
            Scenario::Get | Scenario::ByNamespace | Scenario::ByControllerUid => 1,
        }
    }

    fn run(self, b: &mut criterion::Bencher<'_>, fixture: &mut Fixture) {
        let store = fixture.store();
        let mut i = 0;
        let mut next = |len: usize| {
            i = (i + STRIDE) % len;
            i
        };
        match self {
            Scenario::Update => b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let events = fixture.updates();
                        fixture.apply(events)
                    })
                    .sum()
            }),
            Scenario::Insert => b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let events = fixture.inserts();
                        let took = fixture.apply(events);
                        fixture.apply(fixture.deletes());
                        took
                    })
                    .sum()
            }),
            Scenario::Get => b.iter(|| store.get(&fixture.keys[next(fixture.count)])),
            Scenario::ByNamespace => {
                b.iter(|| store.by_index(NAMESPACE_INDEX, &fixture.namespaces[next(fixtures::NAMESPACES)]))
            }
            Scenario::ByControllerUid => {
                b.iter(|| store.by_index(CONTROLLER_UID_INDEX, &fixture.uids[next(fixture.count)]))
            }
        }
    }
}

fn store(c: &mut Criterion) {
    for &count in object_counts() {
        // One informer per size, made only if the filter runs one of its benchmarks.
        let mut fixture = None;
        for scenario in Scenario::ALL {
            let mut group = c.benchmark_group(scenario.group());
            group.throughput(Throughput::Elements(scenario.elements()));
            for readers in READER_COUNTS {
                let id = BenchmarkId::new(format!("readers={readers}"), format!("objects={count}"));
                group.bench_function(id, |b| {
                    support::ran(&format!("{}/readers={readers}/objects={count}", scenario.group()));
                    let fixture = fixture.get_or_insert_with(|| Fixture::new(count));
                    let _readers = Readers::start(readers, fixture);
                    scenario.run(b, fixture);
                });
            }
            group.finish();
        }
    }
}

fn main() {
    let mut criterion = support::criterion();
    store(&mut criterion);
    criterion.final_summary();
    support::print_table("store");
}
