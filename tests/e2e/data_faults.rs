//! The data path's half of the fault suite, on the real node: what happens to the data when
//! the faults a database meets in production happen to it. Each test prints its figure
//! (`[figure] ...`), which docs/reliability.md quotes.
//!
//! - A server killed (SIGKILL) while a client writes one row per transaction: every row the
//!   client was told is committed is there after the restart (one more may be, whose
//!   acknowledgement the kill cut off).
//! - A backup whose dump is killed half-way: that attempt fails, the Job's next attempt dumps
//!   again, and the backup completes only with a dump that restores every row.
//! - The node's container runtime (containerd) killed and started again under a running
//!   Database: the server keeps running (the same container, no restart), the Database stays
//!   Ready, and a new pod starts and reads the rows.

use std::time::Instant;

use database_operator::api::{BackupPhase, Database, DatabaseBackup, DatabaseSpec, EngineKind, Phase};
use database_operator::api::{RestoreFrom, Size};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube_client::api::{Api, ListParams, PostParams};

use crate::common::{
    Nodes, Operator, TestNamespace, client, client_pod, images, install_crd, psql, psql_as, wait_until,
};
use crate::data::signal_container;
use crate::data::{CONVERGE, PG_READ, PG_WRITE, database_container, database_pod, processes_of, reaching, ready};

/// Rows inserted one transaction at a time until the server goes away (at most 20,000); prints
/// the last row the server acknowledged.
const PG_WRITE_UNTIL_KILLED: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c 'create table acked (id int primary key)'
acked=0
for i in $(seq 1 20000); do
  psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c "insert into acked values ($i)" > /dev/null 2>&1 || break
  acked=$i
done
echo "$acked""#;

/// A postgres Database `name` in `ns`, Ready.
async fn postgres(databases: &Api<Database>, name: &str, from: Option<&str>) -> Database {
    let mut db =
        Database::new(name, DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    db.spec.restore_from = from.map(|backup| Box::new(RestoreFrom { backup: backup.into() }));
    databases.create(&PostParams::default(), &db).await.unwrap();
    ready(databases, name).await
}

#[tokio::test]
async fn every_row_a_client_was_told_is_committed_survives_a_server_killed_while_it_writes() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "killed-writing", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    postgres(&databases, "orders", None).await;

    let writer = tokio::spawn({
        let (client, ns) = (client.clone(), ns.name.clone());
        async move {
            let script = reaching(PG_WRITE_UNTIL_KILLED);
            client_pod(&client, &ns, "writer", images::POSTGRES, "orders-credentials", &script).await
        }
    });
    // Killed in the middle of the writes: once 200 rows are in.
    wait_until("200 rows written", CONVERGE, || async {
        let count = psql_as(&ns.name, "orders", "app", "select count(*) from acked").ok()?;
        (count.parse::<u32>().ok()? >= 200).then_some(())
    })
    .await;
    let (id, restarts) = database_container(&database_pod(&pods, "orders").await).unwrap();
    assert!(signal_container(&id, "KILL") > 0, "no process of the server on this node");
    let acked: u32 = writer.await.unwrap().parse().expect("the writer prints the last acknowledged row");
    assert!(acked >= 200, "{acked}");

    wait_until("the server to be back after SIGKILL", CONVERGE, || async {
        let pod = database_pod(&pods, "orders").await;
        let (_, now) = database_container(&pod)?;
        let status = pod.status?.container_statuses?.into_iter().find(|c| c.name == "database")?;
        (now > restarts && status.ready).then_some(())
    })
    .await;
    ready(&databases, "orders").await;
    let counts =
        psql(&ns.name, "orders", &format!("select count(*) filter (where id <= {acked}), count(*) from acked"));
    let (told, all) = counts.split_once('|').unwrap();
    assert_eq!(told.parse::<u32>().unwrap(), acked, "every acknowledged row is there");
    let all: u32 = all.parse().unwrap();
    assert!(all == acked || all == acked + 1, "at most the one row whose acknowledgement the kill cut off: {all}");
    eprintln!(
        "[figure] killed while writing: {acked} rows acknowledged, {told} of them there after the restart, {all} in all"
    );
}

#[tokio::test]
async fn a_backup_killed_half_way_fails_that_attempt_and_completes_only_with_a_whole_dump() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "killed-dump", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    postgres(&databases, "orders", None).await;
    let read = reaching(PG_READ);
    client_pod(&client, &ns.name, "write", images::POSTGRES, "orders-credentials", &reaching(PG_WRITE)).await;
    let written = client_pod(&client, &ns.name, "read", images::POSTGRES, "orders-credentials", &read).await;

    // The table locked by another session: pg_dump waits for it, half-way through its work.
    let mut locker = std::process::Command::new("kubectl")
        .args(["exec", "-n", &ns.name, "deployment/orders", "-c", "database", "--"])
        .args(["psql", "--username=app", "--dbname=app", "-v", "ON_ERROR_STOP=1"])
        .args(["-c", "begin; lock table items in access exclusive mode; select pg_sleep(600); commit"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the lock to be held", CONVERGE, || async {
        let locks = "select count(*) from pg_locks where mode = 'AccessExclusiveLock' and relation = 'items'::regclass";
        let held = psql_as(&ns.name, "orders", "app", locks).ok()?;
        (held == "1").then_some(())
    })
    .await;
    backups.create(&PostParams::default(), &database_operator::api::backup("orders-1", "orders")).await.unwrap();
    let dumping = wait_until("pg_dump to be waiting for the lock", CONVERGE, || async {
        let listed = pods.list(&ListParams::default().labels("job-name")).await.ok()?.items;
        listed.iter().find_map(|pod| {
            let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
            let id = status.container_id.as_ref()?.rsplit("://").next()?.to_string();
            processes_of(&id).iter().any(|(_, comm)| comm == "pg_dump").then_some(id)
        })
    })
    .await;
    let killed_at = Instant::now();
    assert!(signal_container(&dumping, "KILL") > 0);
    // The lock goes with the session that held it: the next attempt can dump.
    let unlock = "select pg_terminate_backend(pid) from pg_locks where mode = 'AccessExclusiveLock' and relation = 'items'::regclass";
    assert_eq!(psql(&ns.name, "orders", unlock), "t");
    let _ = locker.wait();
    let done = crate::backups::finished(&backups, "orders-1").await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Completed), "the Job's next attempt dumps again: {:?}", status.message);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns.name);
    let job = jobs.list(&ListParams::default()).await.unwrap().items.into_iter().next().expect("the backup's Job");
    let failed = job.status.and_then(|s| s.failed).unwrap_or(0);
    assert!(failed >= 1, "the killed attempt counts as failed");
    let completed_after = killed_at.elapsed();

    let restored = postgres(&databases, "copy", Some("orders-1")).await;
    assert_eq!(restored.status.unwrap().restored_from.as_deref(), Some("orders-1"));
    let copied = client_pod(&client, &ns.name, "read-copy", images::POSTGRES, "copy-credentials", &read).await;
    assert_eq!(copied, written, "the completed dump holds every row");
    eprintln!(
        "[figure] dump killed half-way: {failed} failed attempt(s), Completed {:.0} s after the kill, {} rows restored",
        completed_after.as_secs_f64(),
        copied.split('|').next().unwrap_or_default()
    );
}

/// The plane the tests run on: the directory of `KUBECONFIG` (`.../planes/<plane>/kubeconfig`).
fn plane() -> String {
    let kubeconfig = std::env::var("KUBECONFIG").expect("the tests run with KUBECONFIG set");
    let dir = std::path::Path::new(&kubeconfig).parent().expect("the kubeconfig is in its plane's directory");
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// Every place on the real node: no other test's pod starts while containerd is down.
#[tokio::test]
async fn a_database_keeps_running_and_serving_its_rows_when_the_container_runtime_restarts() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "runtime", Nodes::Real(8)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    postgres(&databases, "orders", None).await;
    let read = reaching(PG_READ);
    client_pod(&client, &ns.name, "write", images::POSTGRES, "orders-credentials", &reaching(PG_WRITE)).await;
    let written = client_pod(&client, &ns.name, "read", images::POSTGRES, "orders-credentials", &read).await;
    let before = database_container(&database_pod(&pods, "orders").await).unwrap();

    let restarted_at = Instant::now();
    let restart = std::process::Command::new("hack/control-plane.sh")
        .args(["restart", "containerd"])
        .env("PLANE", plane())
        .output()
        .unwrap();
    assert!(restart.status.success(), "{}", String::from_utf8_lossy(&restart.stderr));

    // A new pod runs (the runtime serves the kubelet again) and reads every row.
    let read_again = client_pod(&client, &ns.name, "read-again", images::POSTGRES, "orders-credentials", &read).await;
    let new_pod_after = restarted_at.elapsed();
    assert_eq!(read_again, written, "the rows, from the same server");
    let after = database_container(&database_pod(&pods, "orders").await).unwrap();
    assert_eq!(after, before, "the same container, never restarted");
    let db = databases.get("orders").await.unwrap();
    assert_eq!(db.status.unwrap().phase, Some(Phase::Ready));
    eprintln!(
        "[figure] containerd restarted: the server's container the same (restarts {}), a new pod read {} rows {:.0} s after the restart",
        after.1,
        read_again.split('|').next().unwrap_or_default(),
        new_pod_after.as_secs_f64()
    );
}
