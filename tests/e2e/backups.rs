//! DatabaseBackups on the real plane, by the operator's second controller: a Job dumps a
//! Database with its engine's tool into a claim of the backup's own (kube-controller-manager's
//! job controller runs it, kwok completes its pod), and the backup says Completed; a Database
//! without an engine cannot be backed up; a backup cannot change.

use std::time::Duration;

use database_operator::backup::{self, BackupPhase, DatabaseBackup};
use database_operator::database::{Database, DatabaseSpec, EngineKind, Phase, Size};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::common::{TestNamespace, client, install_crd, wait_until};

const CONVERGE: Duration = Duration::from_secs(90);

/// An operator in this process for one namespace, stopped when dropped.
pub(crate) struct Operator(CancellationToken);

impl Operator {
    pub(crate) fn start(client: &Client, namespace: &str) -> Self {
        let cancel = CancellationToken::new();
        let options = database_operator::operator::Options::new(Some(namespace.to_string()), 2);
        tokio::spawn(database_operator::operator::run(client.clone(), options, cancel.clone()));
        Self(cancel)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

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
    let ns = TestNamespace::create_restricted(&client, "backup").await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    // Created at once: the backup waits for its Database to be Ready.
    backups.create(&PostParams::default(), &backup::backup("orders-1", "orders")).await.unwrap();

    let done = finished(&backups, "orders-1").await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Completed), "{:?}", status.message);
    assert_eq!((status.engine, status.image.as_deref()), (Some(EngineKind::Postgres), Some("postgres:17")));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    assert_eq!(databases.get("orders").await.unwrap().status.unwrap().phase, Some(Phase::Ready));

    let job = Api::<Job>::namespaced(client.clone(), &ns.name).get("orders-1").await.unwrap();
    assert_eq!(job.metadata.owner_references.unwrap()[0].name, "orders-1", "owned by its backup");
    let pod = job.spec.unwrap().template.spec.unwrap();
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some("postgres:17"), "the Database's own image has its dump tool");
    assert!(container.command.as_ref().unwrap()[2].starts_with("pg_dump "), "{:?}", container.command);
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
