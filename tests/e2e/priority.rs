//! The work queue's priority lane on the real plane: a Database a user creates while the
//! operator is still working through the Databases it found at its start goes before them;
//! with one FIFO (`--priority-queue=false`) it waits behind all of them. And the follow-ups of
//! the fleet's own reconciles (its new children, their status) wait behind the fleet too.
//!
//! The operator's client is throttled (4 requests/s, burst 1) so that going through the fleet
//! takes many seconds; what is asserted is an order (how much of the fleet was done when the
//! new Database was), not a time.

use std::collections::HashSet;
use std::time::Duration;

use database_operator::api::{Database, DatabaseSpec, Phase, Size};
use database_operator::operator::{self, Options};
use futures::{StreamExt, TryStreamExt};
use kube_client::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use operator_runtime::client::{self, Limits, RequestMetrics};
use tokio_util::sync::CancellationToken;

use crate::common::{TestNamespace, client, install_crd, wait_until};

const FLEET: usize = 24;

fn current(db: &Database) -> bool {
    db.status
        .as_ref()
        .is_some_and(|s| s.observed_generation.is_some() && s.observed_generation == db.metadata.generation)
}

/// How many of the fleet had been reconciled when a Database created after the operator had
/// started on the fleet was, with or without priorities.
async fn fleet_done_before_a_new_database(priority_queue: bool) -> usize {
    let (ns, databases) = fleet(if priority_queue { "priority" } else { "fifo" }, FLEET).await;
    let (cancel, task) = start_throttled(&ns, priority_queue).await;

    wait_until("the operator to start on the fleet", Duration::from_secs(60), || async {
        let list = databases.list(&ListParams::default()).await.ok()?;
        list.items.iter().any(current).then_some(())
    })
    .await;
    let new = Database::new("new", DatabaseSpec::new(Size::Small, "postgres:17"));
    databases.create(&PostParams::default(), &new).await.expect("create the new Database");
    let done = wait_until("the new Database to be reconciled", Duration::from_secs(120), || async {
        let list = databases.list(&ListParams::default()).await.ok()?;
        let new_done = list.items.iter().any(|db| db.metadata.name.as_deref() == Some("new") && current(db));
        new_done
            .then(|| list.items.iter().filter(|db| db.metadata.name.as_deref() != Some("new") && current(db)).count())
    })
    .await;
    cancel.cancel();
    task.await.unwrap().expect("the operator stops cleanly");
    done
}

/// A namespace holding `size` Databases, `fleet-00` and on.
async fn fleet(prefix: &str, size: usize) -> (TestNamespace, Api<Database>) {
    let admin = client().await;
    install_crd(&admin).await;
    let ns = TestNamespace::create(&admin, prefix).await;
    let databases: Api<Database> = Api::namespaced(admin.clone(), &ns.name);
    for i in 0..size {
        let db = Database::new(&format!("fleet-{i:02}"), DatabaseSpec::new(Size::Small, "postgres:17"));
        databases.create(&PostParams::default(), &db).await.expect("create a Database");
    }
    (ns, databases)
}

/// The operator on `ns`, one worker, its client throttled to 4 requests/s (burst 1).
async fn start_throttled(
    ns: &TestNamespace,
    priority_queue: bool,
) -> (CancellationToken, tokio::task::JoinHandle<Result<(), operator::Error>>) {
    let config = kube_client::Config::infer().await.expect("the plane's kubeconfig");
    let throttled =
        client::from_config(config, Limits { qps: 4.0, burst: 1 }, &RequestMetrics::default()).expect("a client");
    let mut options = Options::new(Some(ns.name.clone()), 1);
    options.priority_queue = priority_queue;
    let cancel = CancellationToken::new();
    let task = tokio::spawn(operator::run(throttled, options, cancel.clone()));
    (cancel, task)
}

#[tokio::test]
async fn the_follow_ups_of_the_initial_lists_reconciles_wait_behind_the_list() {
    // Each first reconcile creates a Deployment, whose Added event and status changes (kwok
    // runs its pod, so it goes available) queue the Database again. Queued behind the rest of
    // the list, they fold into one second reconcile, which is the one that can find the
    // Database Ready: so no Database is Ready before every one has had its first. Jumping the
    // list, each would be reconciled until Ready before the next is started.
    const SIZE: usize = 12;
    let (ns, databases) = fleet("follow-ups", SIZE).await;
    let version = databases.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut events = databases.watch(&WatchParams::default().timeout(240), &version).await.unwrap().boxed();
    let (cancel, task) = start_throttled(&ns, true).await;

    let (mut reconciled, mut ready) = (HashSet::new(), HashSet::new());
    let watched = tokio::time::timeout(Duration::from_secs(120), async {
        while reconciled.len() < SIZE {
            let Some(WatchEvent::Modified(db)) = events.try_next().await.expect("the watch") else { continue };
            let name = db.metadata.name.clone().unwrap();
            let status = db.status.as_ref();
            if status.is_some_and(|s| s.observed_generation == db.metadata.generation) {
                reconciled.insert(name.clone());
            }
            if status.is_some_and(|s| s.phase == Some(Phase::Ready)) {
                ready.insert(name);
            }
        }
    })
    .await;
    cancel.cancel();
    task.await.unwrap().expect("the operator stops cleanly");
    assert!(watched.is_ok(), "only {} of {SIZE} Databases were reconciled in 120 s", reconciled.len());
    assert!(ready.is_empty(), "{ready:?} went Ready before every Database of the list had been reconciled once");
}

#[tokio::test]
async fn a_database_created_during_the_initial_list_goes_before_the_fleet_and_waits_behind_it_in_one_fifo() {
    let (prioritized, fifo) =
        tokio::join!(fleet_done_before_a_new_database(true), fleet_done_before_a_new_database(false));
    eprintln!(
        "of {FLEET} Databases found at the start, done before the new one: {prioritized} with priorities, {fifo} in one FIFO"
    );
    assert!(prioritized < FLEET / 2, "with priorities, {prioritized} of {FLEET} went first");
    // One worker, and in one FIFO the new key is queued behind the whole initial list.
    assert!(fifo >= FLEET - 1, "in one FIFO, only {fifo} of {FLEET} went first");
}
