//! Bad input, generated: 200 Database specs and 40 DatabaseBackup specs, each a valid one with
//! one to three hostile or malformed values (drawn by proptest from a fixed seed, so every run
//! tries the same ones), sent with `kubectl apply --server-side` to the real apiserver while an
//! operator watches the namespace. Each is either refused at apply, with a message naming the
//! field or the rule, or stored and then reported by the operator (a Degraded status with a
//! Warning event, or a Pending one that says what it waits for, with an event). Meanwhile the
//! operator never stops, does not loop (its writes in a quiet minute stay under one per stored
//! Database), and writes nothing but the stored Databases' own objects.

use std::collections::BTreeMap;
use std::time::Duration;

use database_operator::api::{Database, Phase};
use database_operator::operator::{self, Options};
use http::Method;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube_client::api::{Api, ListParams};
use kube_core::Resource;
use operator_runtime::client::{self, Limits, RequestMetrics};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{TestNamespace, client, install_crd, wait_until};

/// What a hostile value leads to.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Refused at apply, the message containing this (a field's path, or a rule's words).
    Refused(&'static str),
    /// Stored, then reported by the operator with one of these condition reasons.
    Reported(&'static [&'static str]),
}

/// One hostile value: where it goes in the object ("metadata.name", "spec.storage.size"; an
/// absent value removes the field), and what it leads to.
struct Mutation {
    path: &'static str,
    value: Option<Value>,
    expect: Expect,
}

fn refused(path: &'static str, value: Value, because: &'static str) -> Mutation {
    Mutation { path, value: Some(value), expect: Expect::Refused(because) }
}

/// The hostile values of a Database (engine postgres, with storage).
fn database_mutations() -> Vec<Mutation> {
    let long = |n: usize| Value::from("x".repeat(n));
    vec![
        refused("spec.size", json!("huge"), "spec.size"),
        refused("spec.size", json!("SMALL"), "spec.size"),
        refused("spec.size", json!(1), "spec.size"),
        Mutation { path: "spec.size", value: None, expect: Expect::Refused("spec.size") },
        refused("spec.image", json!(""), "spec.image"),
        refused("spec.image", long(1025), "spec.image"),
        refused("spec.image", json!(17), "spec.image"),
        Mutation { path: "spec.image", value: None, expect: Expect::Refused("spec.image") },
        refused("spec.engine", json!("oracle"), "spec.engine"),
        refused("spec.engine", json!("Postgres"), "spec.engine"),
        refused("spec.storage.size", json!("-1Gi"), "spec.storage.size must be a positive quantity"),
        refused("spec.storage.size", json!("lots"), "spec.storage.size must be a positive quantity"),
        refused("spec.storage.size", json!("0"), "spec.storage.size must be a positive quantity"),
        refused("spec.storage.size", long(65), "spec.storage.size"),
        refused("spec.storage.reclaimPolicy", json!("Keep"), "spec.storage.reclaimPolicy"),
        refused("spec.storage.storageClassName", json!(""), "spec.storage.storageClassName"),
        refused("spec.storage.storageClassName", long(254), "spec.storage.storageClassName"),
        refused("spec.credentials.secretName", json!("../etc"), "spec.credentials.secretName"),
        refused("spec.credentials.secretName", json!("Orders"), "spec.credentials.secretName"),
        refused("spec.credentials.secretName", long(254), "spec.credentials.secretName"),
        refused("spec.backup.schedule", json!("every night"), "spec.backup.schedule must have five fields"),
        refused("spec.backup.schedule", json!("* * *"), "spec.backup.schedule must have five fields"),
        refused("spec.backup.schedule", long(129), "spec.backup.schedule"),
        refused("spec.backup.keep", json!(0), "spec.backup.keep"),
        refused("spec.backup.keep", json!(1001), "spec.backup.keep"),
        refused("spec.backup.keep", json!("seven"), "spec.backup.keep"),
        refused("spec.upgrade.timeout", json!("forever"), "spec.upgrade.timeout"),
        refused("spec.upgrade.timeout", json!("-1s"), "spec.upgrade.timeout"),
        refused("spec.upgrade.timeout", json!("1s".repeat(17)), "spec.upgrade.timeout"),
        refused("spec.upgrade.policy", json!("Sideways"), "spec.upgrade.policy"),
        refused("spec.restoreFrom.backup", json!(""), "spec.restoreFrom.backup"),
        refused("spec.restoreFrom.backup", long(254), "spec.restoreFrom.backup"),
        refused("spec.deletionProtection", json!("yes"), "spec.deletionProtection"),
        refused("spec.instances", json!(0), "spec.instances"),
        refused("spec.instances", json!(10), "spec.instances"),
        refused("spec.instances", json!("three"), "spec.instances"),
        refused("spec.replication.synchronous", json!("yes"), "spec.replication.synchronous"),
        refused("spec.replication.synchronous", json!(true), "spec.replication needs spec.instances above 1"),
        refused("spec.favouriteColour", json!("blue"), ".spec.favouriteColour: field not declared in schema"),
        refused("metadata.name", json!("Orders"), "must be a DNS-1035 label"),
        refused("metadata.name", json!("orders.v2"), "must be a DNS-1035 label"),
        refused("metadata.name", json!("1orders"), "must be a DNS-1035 label"),
        refused("metadata.name", Value::from(format!("o{}", "x".repeat(63))), "must be a DNS-1035 label"),
        // A generic Database (no engine) with what only an engine has.
        Mutation { path: "spec.engine", value: None, expect: Expect::Refused("needs spec.engine") },
        // Accepted by the schema; the cluster refuses, or the operator waits.
        // The Deployment takes it; its pods are refused (the ReplicaSet's FailedCreate).
        Mutation {
            path: "spec.image",
            value: Some(json!(" postgres:17")),
            expect: Expect::Reported(&["FailedCreate", "InvalidSpec"]),
        },
        Mutation {
            path: "spec.storage.storageClassName",
            value: Some(json!("no-such-class")),
            expect: Expect::Reported(&["StorageClassNotFound"]),
        },
        Mutation {
            path: "spec.storage.storageClassName",
            value: Some(json!("Not_A_Name")),
            expect: Expect::Reported(&["InvalidSpec", "StorageClassNotFound"]),
        },
        Mutation {
            path: "spec.restoreFrom.backup",
            value: Some(json!("no-such-backup")),
            expect: Expect::Reported(&["WaitingForBackup"]),
        },
    ]
}

/// The hostile values of a DatabaseBackup (of a Database that need not exist).
fn backup_mutations() -> Vec<Mutation> {
    vec![
        refused("spec.database", json!(""), "spec.database"),
        refused("spec.database", Value::from("x".repeat(64)), "spec.database"),
        Mutation { path: "spec.database", value: None, expect: Expect::Refused("spec.database") },
        refused("spec.storage.size", json!("-5Gi"), "spec.storage.size must be a positive quantity"),
        refused("spec.storage.size", json!("big"), "spec.storage.size must be a positive quantity"),
        refused("spec.storage.storageClassName", json!(""), "spec.storage.storageClassName"),
        refused("spec.schedule", json!("daily"), ".spec.schedule: field not declared in schema"),
        refused("metadata.labels.app", json!("not a label value!"), "metadata.labels"),
    ]
}

/// Sets (or, with `None`, removes) the field at `path` ("spec.storage.size") of `object`.
fn set(object: &mut Value, path: &str, value: Option<&Value>) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap();
    let mut at = object;
    for part in parts {
        if !at[part].is_object() {
            at[part] = json!({});
        }
        at = &mut at[part];
    }
    match value {
        Some(value) => at[last] = value.clone(),
        None => {
            at.as_object_mut().unwrap().remove(last);
        }
    }
}

/// `count` objects, each `base` with one to three of `mutations` (distinct paths), from a fixed
/// seed; each with what it should lead to.
fn generate(base: &Value, mutations: &[Mutation], count: usize, seed: u8) -> Vec<(Value, Vec<Expect>)> {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let picks = proptest::collection::vec(0..mutations.len(), 1..=3);
    (0..count)
        .map(|i| {
            let mut object = base.clone();
            object["metadata"]["name"] = Value::from(format!("bad-{seed}-{i}"));
            let mut expects = Vec::new();
            let mut paths = Vec::new();
            for pick in picks.new_tree(&mut runner).unwrap().current() {
                let mutation = &mutations[pick];
                if paths.contains(&mutation.path) {
                    continue;
                }
                paths.push(mutation.path);
                set(&mut object, mutation.path, mutation.value.as_ref());
                expects.push(mutation.expect);
            }
            (object, expects)
        })
        .collect()
}

/// `kubectl apply --server-side` of `object` in `namespace`: Ok, or Err with what it said.
fn apply(namespace: &str, object: &Value) -> Result<(), String> {
    use std::io::Write;
    let mut child = std::process::Command::new("kubectl")
        .args(["apply", "--server-side", "--field-manager=e2e", "-n", namespace, "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(object.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    if output.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&output.stderr).into_owned()) }
}

/// What one object came to.
#[derive(Debug, Default)]
struct Tally {
    refused: usize,
    stored: Vec<(String, Vec<Expect>)>,
    wrong: Vec<String>,
}

fn try_all(namespace: &str, cases: Vec<(Value, Vec<Expect>)>, tally: &mut Tally) {
    for (object, expects) in cases {
        let name = object["metadata"]["name"].as_str().unwrap_or("?").to_string();
        let must_refuse: Vec<&str> =
            expects.iter().filter_map(|e| if let Expect::Refused(why) = e { Some(*why) } else { None }).collect();
        match (apply(namespace, &object), must_refuse.is_empty()) {
            (Err(said), false) if must_refuse.iter().any(|why| said.contains(why)) => tally.refused += 1,
            (Err(said), false) => tally.wrong.push(format!("{name}: refused without naming {must_refuse:?}: {said}")),
            (Err(said), true) => tally.wrong.push(format!("{name}: refused, though the schema allows it: {said}")),
            (Ok(()), false) => tally.wrong.push(format!("{name}: stored, though {must_refuse:?} should refuse it")),
            (Ok(()), true) => tally.stored.push((name, expects)),
        }
    }
}

/// Every object of kind `K` in `namespace`.
async fn items<K>(client: &kube_client::Client, namespace: &str) -> Vec<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), namespace).list(&ListParams::default()).await.unwrap().items
}

#[tokio::test]
async fn generated_hostile_specs_are_refused_naming_the_rule_or_reported_and_nothing_loops() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "bad-input").await;
    // The operator, in this process, with a client that counts its writes.
    let metrics = RequestMetrics::default();
    let config = kube_client::Config::infer().await.expect("the plane's kubeconfig");
    let operator_client = client::from_config(config, Limits { qps: 50.0, burst: 100 }, &metrics).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(operator::run(operator_client, Options::new(Some(ns.name.clone()), 2), cancel.clone()));

    let database = json!({"apiVersion": "example.com/v1", "kind": "Database", "metadata": {},
                          "spec": {"size": "small", "image": "postgres:17", "engine": "postgres",
                                   "storage": {"size": "1Gi"}}});
    let backup = json!({"apiVersion": "example.com/v1", "kind": "DatabaseBackup", "metadata": {},
                        "spec": {"database": "orders"}});
    let mut tally = Tally::default();
    try_all(&ns.name, generate(&database, &database_mutations(), 200, 1), &mut tally);
    let backups = generate(&backup, &backup_mutations(), 40, 2);
    try_all(&ns.name, backups, &mut tally);
    assert!(tally.wrong.is_empty(), "{} of 240 went wrong:\n{}", tally.wrong.len(), tally.wrong.join("\n"));
    eprintln!("240 generated specs: {} refused at apply, {} stored", tally.refused, tally.stored.len());

    // Each stored one is reported with a reason its hostile values lead to, and an event.
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let mut reasons = BTreeMap::<String, usize>::new();
    for (name, expects) in &tally.stored {
        let wanted: Vec<&str> =
            expects.iter().flat_map(|e| if let Expect::Reported(r) = e { r.to_vec() } else { vec![] }).collect();
        let reason = wait_until(&format!("{name} to be reported ({wanted:?})"), Duration::from_secs(120), || async {
            let status = databases.get(name).await.ok()?.status?;
            let (type_, phase) = match status.phase? {
                Phase::Degraded => ("Degraded", Phase::Degraded),
                Phase::Pending => ("Progressing", Phase::Pending),
                Phase::Ready => return None,
            };
            let condition = status.conditions.into_iter().find(|c| c.type_ == type_ && c.status == "True")?;
            wanted.contains(&condition.reason.as_str()).then_some((condition.reason, phase))
        })
        .await;
        // Events are published after the status is written: waited for too.
        wait_until(&format!("{name}'s event {}", reason.0), Duration::from_secs(60), || async {
            let said = events.list(&ListParams::default()).await.ok()?.items.into_iter().any(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                    && e.reason.as_deref() == Some(reason.0.as_str())
                    && (reason.1 == Phase::Pending || e.type_.as_deref() == Some("Warning"))
            });
            said.then_some(())
        })
        .await;
        *reasons.entry(reason.0).or_default() += 1;
    }
    eprintln!("stored and reported: {reasons:?}");

    // No hot loop: over a quiet minute, fewer writes than stored Databases.
    let writes = || {
        ["databases.example.com/status", "deployments.apps", "services", "persistentvolumeclaims", "secrets"]
            .iter()
            .map(|resource| [Method::PATCH, Method::POST].iter().map(|m| metrics.writes(m, resource)).sum::<u64>())
            .sum::<u64>()
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = writes();
    assert!(before >= tally.stored.len() as u64, "the count sees the operator's writes ({before})");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let quiet = writes() - before;
    eprintln!("writes in a quiet minute: {quiet} (for {} stored Databases)", tally.stored.len());
    assert!((quiet as usize) < tally.stored.len().max(1), "{quiet} writes in a quiet minute: a loop");
    assert!(!task.is_finished(), "the operator stopped");

    // Nothing but the stored Databases' own objects.
    let stored: Vec<&str> = tally.stored.iter().map(|(name, _)| name.as_str()).collect();
    let owned_by_stored = |kind: &str, meta: &kube_core::ObjectMeta| {
        let owner = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true));
        let ok = owner.is_some_and(|r| r.kind == "Database" && stored.contains(&r.name.as_str()));
        assert!(ok, "{kind} {:?} is not a stored Database's", meta.name);
    };
    for d in items::<Deployment>(&client, &ns.name).await {
        owned_by_stored("Deployment", d.meta());
    }
    for s in items::<Service>(&client, &ns.name).await {
        owned_by_stored("Service", s.meta());
    }
    for c in items::<PersistentVolumeClaim>(&client, &ns.name).await {
        owned_by_stored("PersistentVolumeClaim", c.meta());
    }
    for s in items::<Secret>(&client, &ns.name).await {
        owned_by_stored("Secret", s.meta());
    }
    assert!(items::<Job>(&client, &ns.name).await.is_empty(), "no Job: no backup was stored");
    cancel.cancel();
    task.await.unwrap().expect("the operator stops cleanly");
}
