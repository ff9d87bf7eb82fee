//! The informer cache's memory per object, next to the object's JSON size.
//!
//! A binary of its own because it installs a counting global allocator (`stats_alloc`), which
//! would slow every other benchmark. It is not a timing benchmark, so it does not use criterion:
//! it builds caches of realistic Deployments (`benches/fixtures`) and prints one table.
//!
//! Columns, per object:
//!
//! - JSON: `serde_json::to_vec(obj).len()`, the object as the apiserver sends it (without
//!   managedFields, which the informer strips).
//! - object: the heap bytes of a `Deployment` value (its struct and everything it owns).
//! - `Store::from_objects`: a store with the namespace index only.
//! - informer store: an informer's store after its list, with the namespace and controller-uid
//!   indices, handlers done.
//! - view: the same objects decoded from their JSON as `DeploymentView` (what the operator
//!   caches of its Deployments since it keeps only the fields it sets or reads), alone and in
//!   `Store::from_objects`.
//!
//! Bytes are the sizes the program asked the allocator for, live at the end; the allocator's
//! own rounding and headers (glibc: 8 to 16 bytes per allocation) come on top, so the live
//! allocation count is shown too.
//!
//! `cargo bench --bench memory` measures 10,000 and 100,000 objects; `cargo test --all-targets`
//! runs it on 1,000.

use std::alloc::System;
use std::sync::Arc;

use database_operator::desired::DeploymentView;
use k8s_openapi::api::apps::v1::Deployment;
use operator_runtime::informer::{EventHandler, Store};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::runtime::Builder;
use tokio_util::sync::CancellationToken;

use support::Countdown;

mod fixtures;
mod support;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// What a region of the program left allocated.
#[derive(Clone, Copy)]
struct Live {
    bytes: f64,
    allocations: f64,
}

impl Live {
    fn of(region: &Region<'_, System>) -> Self {
        let change = region.change();
        Live {
            bytes: change.bytes_allocated as f64 - change.bytes_deallocated as f64,
            allocations: change.allocations as f64 - change.deallocations as f64,
        }
    }

    fn per(self, count: usize) -> Self {
        Live { bytes: self.bytes / count as f64, allocations: self.allocations / count as f64 }
    }
}

struct Counter(Arc<Countdown>);

impl EventHandler<Deployment> for Counter {
    fn on_add(&self, _obj: &Arc<Deployment>, _: bool) {
        self.0.tick();
    }
    fn on_update(&self, _old: &Arc<Deployment>, _new: &Arc<Deployment>) {}
    fn on_delete(&self, _obj: &Arc<Deployment>) {}
}

struct Row {
    count: usize,
    json: f64,
    object: Live,
    from_objects: Live,
    informer: Live,
    view: Live,
    view_store: Live,
}

/// What a `BTreeMap<String, String>` with one entry asks of the allocator (one leaf node).
fn btree_leaf_bytes() -> usize {
    let region = Region::new(GLOBAL);
    let map = std::collections::BTreeMap::from([(String::new(), String::new())]);
    let bytes = region.change().bytes_allocated;
    drop(map);
    bytes
}

fn measure(count: usize) -> Row {
    let json = fixtures::deployments(count)
        .iter()
        .map(|obj| serde_json::to_vec(obj).expect("a Deployment serializes").len() as f64)
        .sum::<f64>()
        / count as f64;

    let object = {
        let region = Region::new(GLOBAL);
        let objects = fixtures::deployments(count);
        let live = Live::of(&region).per(count);
        drop(objects);
        live
    };

    let from_objects = {
        let region = Region::new(GLOBAL);
        let store = Store::from_objects(fixtures::deployments(count));
        let live = Live::of(&region).per(count);
        assert_eq!(store.len(), count);
        drop(store);
        live
    };

    // The runtime's own threads and buffers are made before the region starts.
    let runtime = Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a Tokio runtime starts");
    let (informer, live) = {
        let region = Region::new(GLOBAL);
        let (informer, _sender) = fixtures::informer(fixtures::deployments(count));
        let added = Arc::new(Countdown::new());
        informer.add_event_handler(Arc::new(Counter(added.clone())));
        added.start(count);
        let cancel = CancellationToken::new();
        runtime.spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        added.wait();
        assert_eq!(informer.store().len(), count);
        let live = Live::of(&region).per(count);
        cancel.cancel();
        (informer, live)
    };
    drop(runtime);
    drop(informer);

    // Views are decoded from the JSON, as the informer decodes a watch event; the JSON is
    // made before the region starts.
    let documents: Vec<Vec<u8>> =
        fixtures::deployments(count).iter().map(|obj| serde_json::to_vec(obj).expect("serializes")).collect();
    let decode = || -> Vec<DeploymentView> {
        documents.iter().map(|json| serde_json::from_slice(json).expect("a view decodes")).collect()
    };
    let view = {
        let region = Region::new(GLOBAL);
        let views = decode();
        let live = Live::of(&region).per(count);
        drop(views);
        live
    };
    let view_store = {
        let region = Region::new(GLOBAL);
        let store = Store::from_objects(decode());
        let live = Live::of(&region).per(count);
        assert_eq!(store.len(), count);
        live
    };

    Row { count, json, object, from_objects, informer: live, view, view_store }
}

fn main() {
    // As the operator does before its informers start: the views' common strings are shared.
    database_operator::desired::share_words();
    let counts: &[usize] = if support::testing() { &[1_000] } else { &[10_000, 100_000] };
    let rows: Vec<Row> = counts.iter().map(|&count| measure(count)).collect();

    println!("{}", support::machine());
    println!("$ {}", support::command("memory"));
    println!();
    println!(
        "| objects | JSON bytes | object bytes (allocations) | Store::from_objects bytes (allocations) | informer store bytes (allocations) | informer store / JSON | view bytes (allocations) | view in Store::from_objects (allocations) | view store / JSON |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        println!(
            "| {} | {:.0} | {:.0} ({:.1}) | {:.0} ({:.1}) | {:.0} ({:.1}) | {:.2} | {:.0} ({:.1}) | {:.0} ({:.1}) | {:.2} |",
            row.count,
            row.json,
            row.object.bytes,
            row.object.allocations,
            row.from_objects.bytes,
            row.from_objects.allocations,
            row.informer.bytes,
            row.informer.allocations,
            row.informer.bytes / row.json,
            row.view.bytes,
            row.view.allocations,
            row.view_store.bytes,
            row.view_store.allocations,
            row.view_store.bytes / row.json,
        );
    }
    println!();
    println!(
        "All figures are per object; bytes are what was asked of the allocator and is still live. Of the object's bytes, {} are the `Deployment` struct itself (inline, in the `Arc`), {} each `BTreeMap` node (labels twice, selector, annotations, requests, limits: 6 maps).",
        std::mem::size_of::<Deployment>(),
        btree_leaf_bytes(),
    );
}
