//! DatabaseBackups on the real plane, by the operator's second controller: a Job dumps a
//! Database with its engine's tool into a claim of the backup's own (kube-controller-manager's
//! job controller makes its pod, which the real node runs: the dump is real), and the backup
//! says Completed; a restore loads it into a new Database, where the rows written before the
//! backup are read back; a Database without an engine cannot be backed up (on kwok: no pod
//! runs); a backup cannot change; a backup whose Database is deleted before its dump
//! completed fails and says why.

use std::time::Duration;

use database_operator::api::{self as backup, BackupPhase, DatabaseBackup};
use database_operator::api::{Database, DatabaseSpec, EngineKind, Phase, Size};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::events::v1::Event;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{Nodes, Operator, TestNamespace, client, images, install_crd, psql, wait_until};

/// Long enough for a real database's first start and a real dump on a busy two-core machine.
const CONVERGE: Duration = Duration::from_secs(180);

pub(crate) async fn finished(backups: &Api<DatabaseBackup>, name: &str) -> DatabaseBackup {
    wait_until(&format!("DatabaseBackup {name} to finish"), CONVERGE, || async {
        let backup = backups.get(name).await.ok()?;
        backup.status.as_ref()?.phase?.is_finished().then_some(backup)
    })
    .await
}

#[tokio::test]
async fn a_backup_dumps_its_database_with_the_engines_tool_into_its_own_claim() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "backup", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    // Created at once: the backup waits for its Database to be Ready.
    backups.create(&PostParams::default(), &backup::backup("orders-1", "orders")).await.unwrap();

    let done = finished(&backups, "orders-1").await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Completed), "{:?}", status.message);
    assert_eq!((status.engine, status.image.as_deref()), (Some(EngineKind::Postgres), Some(images::POSTGRES)));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    assert_eq!(databases.get("orders").await.unwrap().status.unwrap().phase, Some(Phase::Ready));

    let job = Api::<Job>::namespaced(client.clone(), &ns.name).get("orders-1").await.unwrap();
    assert_eq!(job.metadata.owner_references.unwrap()[0].name, "orders-1", "owned by its backup");
    let pod = job.spec.unwrap().template.spec.unwrap();
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some(images::POSTGRES), "the Database's own image has its dump tool");
    assert!(container.command.as_ref().unwrap()[2].contains("pg_dump "), "{:?}", container.command);
    let password = container.env.iter().flatten().find(|e| e.name == "PGPASSWORD").unwrap();
    assert_eq!(password.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap().name, "orders-credentials");
    assert_eq!(pod.volumes.unwrap()[0].persistent_volume_claim.as_ref().unwrap().claim_name, "orders-1");
    let claim = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns.name).get("orders-1").await.unwrap();
    assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));
    assert_eq!(claim.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0, "1Gi", "the Database's size");

    // A backup cannot change once created.
    let change = json!({"spec": {"database": "another"}});
    let err = backups.patch("orders-1", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap_err();
    assert!(err.to_string().contains("a DatabaseBackup cannot change"), "{err}");
}

#[tokio::test]
async fn a_backup_of_a_database_without_an_engine_fails_and_says_why() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "backup-generic").await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    databases
        .create(&PostParams::default(), &Database::new("web", DatabaseSpec::new(Size::Small, "web:1")))
        .await
        .unwrap();
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    backups.create(&PostParams::default(), &backup::backup("web-1", "web")).await.unwrap();
    let done = finished(&backups, "web-1").await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Failed));
    assert!(status.message.unwrap().contains("has no engine"));
    assert!(Api::<Job>::namespaced(client, &ns.name).get_opt("web-1").await.unwrap().is_none(), "no Job");
}

/// A backup whose name is another object's (here the data claim of its own Database) never
/// writes into it: on kwok, as nothing needs to run.
#[tokio::test]
async fn a_backup_named_like_a_databases_data_claim_fails_and_leaves_the_claim_alone() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "backup-claim").await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns.name);
    let data =
        wait_until("the Database's data claim", CONVERGE, || async { claims.get_opt("orders-data").await.ok()? }).await;

    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    backups.create(&PostParams::default(), &backup::backup("orders-data", "orders")).await.unwrap();
    let done = finished(&backups, "orders-data").await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Failed));
    let message = status.message.unwrap();
    assert!(message.contains("PersistentVolumeClaim \"orders-data\" exists and is not this backup's"), "{message}");
    assert!(Api::<Job>::namespaced(client.clone(), &ns.name).get_opt("orders-data").await.unwrap().is_none(), "no Job");
    let after = claims.get("orders-data").await.unwrap();
    assert_eq!(after.metadata.owner_references, data.metadata.owner_references, "still the Database's alone");
}

/// A Database deleted while its backup's Job is under way takes its server, Service and
/// credentials along (the Job's pod then never starts: its Secret is gone): the backup fails
/// and says why, unless the Job completed first; it never waits for a Database that is gone.
#[tokio::test]
async fn a_backup_whose_database_is_deleted_before_its_dump_completed_fails_and_says_why() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "backup-orphan", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    ready_postgres(&databases, "orders").await;
    backups.create(&PostParams::default(), &backup::backup("orders-1", "orders")).await.unwrap();
    wait_until("the dump Job", CONVERGE, || async { jobs.get_opt("orders-1").await.ok()? }).await;
    databases.delete("orders", &Default::default()).await.unwrap();

    let status = finished(&backups, "orders-1").await.status.unwrap();
    let job = jobs.get("orders-1").await.unwrap().status.unwrap();
    let job_says = |type_: &str| job.conditions.iter().flatten().any(|c| c.type_ == type_ && c.status == "True");
    let message = status.message.clone().unwrap_or_default();
    eprintln!("the backup ended {:?}: {message}", status.phase);
    match status.phase {
        Some(BackupPhase::Failed) => {
            assert!(!job_says("Complete"), "the Job did not complete: {job:?}");
            assert!(message.starts_with("Database \"orders\" was deleted before the dump completed"), "{message}");
            assert_eq!(status.conditions[0].reason, "DatabaseDeleted");
            let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
            wait_until("the backup's Warning event", CONVERGE, || async {
                let said = events.list(&Default::default()).await.ok()?.items.into_iter().any(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("orders-1")
                        && e.type_.as_deref() == Some("Warning")
                        && e.note.as_deref().is_some_and(|note| note.contains("was deleted before the dump completed"))
                });
                said.then_some(())
            })
            .await;
        }
        Some(BackupPhase::Completed) => assert!(job_says("Complete"), "completed as its Job did: {job:?}"),
        other => panic!("a finished backup is Completed or Failed, not {other:?}"),
    }
    assert_eq!(status.engine, Some(EngineKind::Postgres), "the engine dumped, without its Database");
    assert_eq!(status.image.as_deref(), Some(images::POSTGRES));
}

async fn ready_postgres(databases: &Api<Database>, name: &str) {
    let db = Database::new(name, DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    wait_until(&format!("{name} to be Ready"), CONVERGE, || async {
        (databases.get(name).await.ok()?.status?.phase? == Phase::Ready).then_some(())
    })
    .await;
}

fn restored_from(name: &str, engine: EngineKind, image: &str, backup: &str) -> Database {
    let mut db = Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(engine));
    db.spec.restore_from = Some(Box::new(database_operator::api::RestoreFrom { backup: backup.into(), bucket: None }));
    db
}

#[tokio::test]
async fn a_new_database_waits_for_its_backup_then_restores_it_before_it_first_starts() {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "restore", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    ready_postgres(&databases, "orders").await;
    // Rows the restore must bring back.
    psql(&ns.name, "orders", "create table items (id int primary key, name text)");
    psql(&ns.name, "orders", "insert into items select i, 'item ' || i from generate_series(1, 1000) i");
    let written = psql(&ns.name, "orders", "select count(*), md5(string_agg(name, ',' order by id)) from items");

    // Restored from a backup that does not exist yet: it waits, without a pod.
    databases
        .create(&PostParams::default(), &restored_from("copy", EngineKind::Postgres, images::POSTGRES, "orders-1"))
        .await
        .unwrap();
    let waiting = wait_until("the copy to wait for its backup", CONVERGE, || async {
        let db = databases.get("copy").await.ok()?;
        let status = db.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Progressing" && c.reason == "WaitingForBackup")
    })
    .await;
    assert!(waiting.message.contains("orders-1"), "{}", waiting.message);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("copy").await.unwrap().is_none(), "no pod before the backup is there");

    backups.create(&PostParams::default(), &backup::backup("orders-1", "orders")).await.unwrap();
    let restored = wait_until("the copy to be restored and Ready", CONVERGE, || async {
        let db = databases.get("copy").await.ok()?;
        let status = db.status.clone()?;
        (status.restored_from.as_deref() == Some("orders-1") && status.phase == Some(Phase::Ready)).then_some(db)
    })
    .await;
    assert_eq!(restored.status.unwrap().endpoint.as_deref(), Some(format!("copy.{}.svc:5432", ns.name).as_str()));
    // The data, read back from the restored server: the same rows, count and checksum.
    let read = psql(&ns.name, "copy", "select count(*), md5(string_agg(name, ',' order by id)) from items");
    assert_eq!(read, written, "the restored rows");
    assert!(written.starts_with("1000|"), "{written}");
    // The first pod ran the restore before the server: its ReplicaSet's template has it.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns.name);
    let first = replica_sets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|rs| {
            rs.metadata.owner_references.iter().flatten().any(|o| o.name == "copy")
                && rs
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("deployment.kubernetes.io/revision"))
                    .map(String::as_str)
                    == Some("1")
        })
        .expect("the Deployment's first ReplicaSet");
    let pod = first.spec.unwrap().template.unwrap().spec.unwrap();
    let init = &pod.init_containers.as_ref().expect("an init container")[0];
    assert_eq!(init.name, "restore");
    assert!(init.command.as_ref().unwrap()[2].contains("pg_restore"), "{:?}", init.command);
    let claim = pod
        .volumes
        .iter()
        .flatten()
        .find_map(|v| v.persistent_volume_claim.as_ref().filter(|c| c.claim_name == "orders-1"));
    assert!(claim.is_some_and(|c| c.read_only == Some(true)), "the backup's claim, read-only");
    // Once restored, the restore leaves the pod: the backup may go.
    wait_until("the restore to leave the pod template", CONVERGE, || async {
        let deployment = deployments.get("copy").await.ok()?;
        deployment.spec?.template.spec?.init_containers.is_none().then_some(())
    })
    .await;

    // A dump of postgres cannot restore a redis.
    databases
        .create(&PostParams::default(), &restored_from("cache", EngineKind::Redis, images::REDIS, "orders-1"))
        .await
        .unwrap();
    let mismatch = wait_until("the redis restore to be refused", CONVERGE, || async {
        let status = databases.get("cache").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    })
    .await;
    assert_eq!(mismatch.reason, "RestoreEngineMismatch", "{}", mismatch.message);
}

/// A backup with `reclaimPolicy: Retain` outlives its DatabaseBackup and its Database: its
/// claim stays, owned by nobody, after the garbage collector has deleted the backup's Job and
/// the other backup's claim; a new Database restored from the deleted backup's name loads the
/// kept dump, and the rows are read back.
#[tokio::test]
async fn a_retained_backup_outlives_its_databasebackup_and_restores_under_its_name() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "kept", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns.name);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    ready_postgres(&databases, "orders").await;
    psql(&ns.name, "orders", "create table items (id int primary key, name text)");
    psql(&ns.name, "orders", "insert into items select i, 'item ' || i from generate_series(1, 500) i");
    let written = psql(&ns.name, "orders", "select count(*), md5(string_agg(name, ',' order by id)) from items");

    let mut kept = backup::backup("kept", "orders");
    kept.spec.storage =
        Some(backup::BackupStorage { reclaim_policy: Some(backup::ReclaimPolicy::Retain), ..Default::default() });
    backups.create(&PostParams::default(), &kept).await.unwrap();
    backups.create(&PostParams::default(), &backup::backup("plain", "orders")).await.unwrap();
    for name in ["kept", "plain"] {
        let status = finished(&backups, name).await.status.unwrap();
        assert_eq!(status.phase, Some(BackupPhase::Completed), "{name}: {:?}", status.message);
    }
    let claim = claims.get("kept").await.unwrap();
    assert!(claim.metadata.owner_references.unwrap_or_default().is_empty(), "the kept claim has no owner");
    let labels = claim.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("example.com/engine").map(String::as_str), Some("postgres"));

    // Both backups and the Database deleted: the garbage collector takes both Jobs and the
    // plain backup's claim, and leaves the kept one.
    for name in ["kept", "plain"] {
        backups.delete(name, &Default::default()).await.unwrap();
    }
    databases.delete("orders", &Default::default()).await.unwrap();
    wait_until("the garbage collector to delete both Jobs and the plain backup's claim", CONVERGE, || async {
        let jobs_left = jobs.list(&Default::default()).await.ok()?.items.len();
        let plain = claims.get_opt("plain").await.ok()?;
        (jobs_left == 0 && plain.is_none()).then_some(())
    })
    .await;
    let claim = claims.get_opt("kept").await.unwrap().expect("the kept claim outlives its DatabaseBackup");
    assert!(claim.metadata.deletion_timestamp.is_none());

    databases
        .create(&PostParams::default(), &restored_from("copy", EngineKind::Postgres, images::POSTGRES, "kept"))
        .await
        .unwrap();
    wait_until("the copy to be restored from the kept claim and Ready", CONVERGE, || async {
        let status = databases.get("copy").await.ok()?.status?;
        (status.restored_from.as_deref() == Some("kept") && status.phase == Some(Phase::Ready)).then_some(())
    })
    .await;
    let read = psql(&ns.name, "copy", "select count(*), md5(string_agg(name, ',' order by id)) from items");
    assert_eq!(read, written, "the rows of the kept dump");
    assert!(written.starts_with("500|"), "{written}");
}

#[tokio::test]
async fn a_schedule_takes_backups_and_keeps_only_the_newest() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "schedule", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    ready_postgres(&databases, "orders").await;
    // Every five seconds (six fields: seconds first: a real dump takes a few), keep two.
    let schedule = json!({"spec": {"backup": {"schedule": "*/5 * * * * *", "keep": 2}}});
    databases.patch("orders", &PatchParams::default(), &Patch::Merge(&schedule)).await.unwrap();

    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    wait_until("three scheduled backups, and only two finished ones kept", CONVERGE, || async {
        let list = backups.list(&Default::default()).await.ok()?.items;
        let mut seen = seen.lock().unwrap();
        seen.extend(list.iter().filter_map(|b| b.metadata.name.clone()));
        let finished =
            list.iter().filter(|b| b.status.as_ref().and_then(|s| s.phase).is_some_and(BackupPhase::is_finished));
        (seen.len() >= 3 && finished.count() <= 2).then_some(())
    })
    .await;
    let seen = seen.into_inner().unwrap();
    let db = databases.get("orders").await.unwrap();
    let status = db.status.unwrap();
    assert!(status.last_scheduled_backup.is_some());
    let scheduled = status.conditions.iter().find(|c| c.type_ == "BackupScheduled").unwrap();
    assert_eq!((scheduled.status.as_str(), scheduled.reason.as_str()), ("True", "Scheduled"));
    assert!(seen.iter().all(|name| name.starts_with("orders-")), "{seen:?}");

    // A schedule that passes the schema's field count but is no schedule: said so.
    let invalid = json!({"spec": {"backup": {"schedule": "61 * * * *"}}});
    databases.patch("orders", &PatchParams::default(), &Patch::Merge(&invalid)).await.unwrap();
    let condition = wait_until("the schedule to be reported invalid", CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "BackupScheduled" && c.status == "False")
    })
    .await;
    assert_eq!(condition.reason, "InvalidSchedule");
}

/// A Database that never becomes Ready (its image is on no node) has one scheduled backup
/// waiting for it, however many times pass: the times that come meanwhile are skipped.
#[tokio::test]
async fn a_database_that_is_down_has_one_waiting_scheduled_backup_not_one_per_time() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "schedule-down", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let mut db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::MISSING).with_engine(EngineKind::Postgres));
    db.spec.backup = Some(Box::new(database_operator::api::BackupSchedule {
        schedule: "*/2 * * * * *".into(),
        keep: None,
        bucket: None,
        verify: None,
    }));
    databases.create(&PostParams::default(), &db).await.unwrap();
    let first = wait_until("the first scheduled time", CONVERGE, || async {
        databases.get("orders").await.ok()?.status?.last_scheduled_backup
    })
    .await;
    // Three more times pass, each recorded as dealt with.
    wait_until("three more scheduled times", CONVERGE, || async {
        let last = databases.get("orders").await.ok()?.status?.last_scheduled_backup?;
        (last.0.duration_since(first.0).as_secs() >= 6).then_some(())
    })
    .await;
    let list = backups.list(&Default::default()).await.unwrap().items;
    let names: Vec<_> = list.iter().filter_map(|b| b.metadata.name.clone()).collect();
    assert_eq!(names.len(), 1, "one waiting backup: {names:?}");
    let phase = list[0].status.as_ref().and_then(|s| s.phase);
    assert_eq!(phase, Some(BackupPhase::Pending), "it waits for the Database to be Ready");
}

/// A scheduled backup the cluster refuses (here an admission policy; before, a name too long
/// for its Job) is reported in the Database's status and not retried in a loop; the rest of
/// the status is still written. On kwok.
#[tokio::test]
async fn a_scheduled_backup_the_cluster_refuses_is_reported_and_the_status_goes_on() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "schedule-refused").await;
    let message = "backups are paused in this namespace";
    let _policy = crate::common::AdmissionPolicy::create(
        &ns.name,
        json!({"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["databasebackups"]}),
        "false",
        message,
        json!({"apiVersion": "example.com/v1", "kind": "DatabaseBackup", "metadata": {"name": "probe"},
               "spec": {"database": "orders"}}),
    )
    .await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let mut db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    db.spec.backup = Some(Box::new(database_operator::api::BackupSchedule {
        schedule: "*/2 * * * * *".into(),
        keep: None,
        bucket: None,
        verify: None,
    }));
    databases.create(&PostParams::default(), &db).await.unwrap();
    let (condition, status) = wait_until("the refused backup to be reported", CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        let refused = status.conditions.iter().find(|c| c.type_ == "BackupScheduled" && c.status == "False")?.clone();
        Some((refused, status))
    })
    .await;
    assert_eq!(condition.reason, "BackupRefused", "{}", condition.message);
    assert!(condition.message.contains(message), "the cluster's own words: {}", condition.message);
    assert!(status.phase.is_some() && status.observed_generation == Some(1), "the rest of the status: {status:?}");
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    assert!(backups.list(&Default::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn an_upgrade_with_backup_first_rolls_only_after_its_backup_completed() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "backup-first", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    ready_postgres(&databases, "orders").await;
    let upgrade = json!({"spec": {"image": images::POSTGRES_TRIXIE, "upgrade": {"backupFirst": true}}});
    databases.patch("orders", &PatchParams::default(), &Patch::Merge(&upgrade)).await.unwrap();
    let db = wait_until("the new image to be the current one", CONVERGE, || async {
        let db = databases.get("orders").await.ok()?;
        (db.status.as_ref()?.current_image.as_deref() == Some(images::POSTGRES_TRIXIE)).then_some(db)
    })
    .await;
    let taken = backups.list(&Default::default()).await.unwrap().items;
    let pre = taken.iter().find(|b| b.metadata.name.as_deref().is_some_and(|n| n.starts_with("orders-pre-upgrade-")));
    let pre = pre.expect("a backup taken before the upgrade");
    let status = pre.status.clone().unwrap();
    assert_eq!(
        (status.phase, status.image.as_deref()),
        (Some(BackupPhase::Completed), Some(images::POSTGRES)),
        "of the old image"
    );
    assert!(db.status.unwrap().upgrade.is_none(), "the upgrade is over");
    // The new image's ReplicaSet was made after the backup completed: the rollout waited.
    let replica_sets: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(client.clone(), &ns.name);
    let rolled = replica_sets.list(&Default::default()).await.unwrap().items.into_iter().find(|rs| {
        rs.spec.as_ref().and_then(|s| s.template.as_ref()?.spec.as_ref()?.containers.first()?.image.clone()).as_deref()
            == Some(images::POSTGRES_TRIXIE)
    });
    let created = rolled.expect("the new image's ReplicaSet").metadata.creation_timestamp.unwrap();
    assert!(created.0 >= status.completion_time.unwrap().0, "rolled at {created:?}, before the backup completed");
}
