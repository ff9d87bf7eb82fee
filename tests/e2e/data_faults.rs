//! The data path's half of the fault suite, on the real node: what happens to the data when
//! the faults a database meets in production happen to it. Each test prints its figure
//! (`[figure] ...`), which docs/reliability.md quotes.
//!
//! - A server killed (SIGKILL) while a client writes one row per transaction (one key per
//!   command, for redis): every row the client was told is committed is there after the
//!   restart (one more may be, whose acknowledgement the kill cut off); postgres, MariaDB,
//!   redis.
//! - A backup whose dump is killed half-way: that attempt fails, the Job's next attempt dumps
//!   again, and the backup completes only with a dump that restores every row.
//! - The node's container runtime (containerd) killed and started again under running
//!   Databases: each server keeps running (the same container, no restart), each Database
//!   stays Ready, and new pods start and read the rows; postgres, MariaDB, redis.
//! - A data volume that fills (a tmpfs of 96 or 192 MiB behind a local PersistentVolume): the client
//!   is refused in the engine's words; postgres's Database says `VolumeFull` with the
//!   engine's line; once the file system grows, every engine accepts writes again with every
//!   acknowledged row; postgres, MariaDB, redis.

use std::time::Instant;

use database_operator::api::{BackupPhase, Database, DatabaseBackup, DatabaseSpec, EngineKind, Phase};
use database_operator::api::{RestoreFrom, Size, Storage};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube_client::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::common::{
    Nodes, Operator, TestNamespace, client, client_pod, images, install_crd, psql, psql_as, wait_until,
};
use crate::data::write_and_read;
use crate::data::{CONVERGE, PG_READ, PG_WRITE, database_container, database_pod, processes_of, reaching, ready};
use crate::data::{back_after_kill, kill_database_container, signal_container};

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

/// The same for MariaDB (autocommit: one transaction per statement).
const MARIADB_WRITE_UNTIL_KILLED: &str = r#"export MYSQL_PWD="$DATABASE_PASSWORD"
reachable mariadb --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" -e 'select 1'
mariadb --host="$DATABASE_HOST" --user="$DATABASE_USER" app -e 'create table acked (id int primary key)'
acked=0
for i in $(seq 1 20000); do
  mariadb --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" app -e "insert into acked values ($i)" > /dev/null 2>&1 || break
  acked=$i
done
echo "$acked""#;

/// The same for redis: one key per command (append-only, fsync every second: a write is in
/// the kernel before the server answers, which a killed process does not lose).
const REDIS_WRITE_UNTIL_KILLED: &str = r#"export REDISCLI_AUTH="$DATABASE_PASSWORD"
reachable sh -c 'redis-cli -h "$DATABASE_HOST" PING | grep -q PONG'
acked=0
for i in $(seq 1 20000); do
  [ "$(redis-cli -h "$DATABASE_HOST" SET "acked:$i" 1 2> /dev/null)" = OK ] || break
  acked=$i
done
echo "$acked""#;

/// Runs `script` (`sh -c`) inside Database `database`'s `database` container, where the
/// engine's own credentials are in the environment; its output, or none while it fails.
fn in_container(namespace: &str, database: &str, script: &str) -> Option<String> {
    let output = std::process::Command::new("kubectl")
        .args(["exec", "-n", namespace, &format!("deployment/{database}"), "-c", "database", "--"])
        .args(["sh", "-c", script])
        .output()
        .ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// How many rows (keys) are in, inside the container, for each engine; and the script that
/// prints how many of rows 1..=N are there and how many there are in all.
fn counting(engine: EngineKind) -> (&'static str, fn(u32) -> String) {
    match engine {
        EngineKind::Postgres => ("psql -U app -d app -Atq -c 'select count(*) from acked'", |n| {
            format!("psql -U app -d app -Atq -F ' ' -c 'select count(*) filter (where id <= {n}), count(*) from acked'")
        }),
        EngineKind::Redis => (r#"REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli DBSIZE"#, |n| {
            format!(
                r#"export REDISCLI_AUTH="$REDIS_PASSWORD"; echo "$(seq 1 {n} | sed 's/^/EXISTS acked:/' | redis-cli | grep -cx 1) $(redis-cli DBSIZE)""#
            )
        }),
        _ => (r#"MYSQL_PWD="$MARIADB_ROOT_PASSWORD" mariadb -uroot app -N -B -e 'select count(*) from acked'"#, |n| {
            format!(
                r#"MYSQL_PWD="$MARIADB_ROOT_PASSWORD" mariadb -uroot app -N -B -e 'select count(case when id <= {n} then 1 end), count(*) from acked' | tr '\t' ' '"#
            )
        }),
    }
}

/// A postgres Database `name` in `ns`, Ready.
async fn postgres(databases: &Api<Database>, name: &str, from: Option<&str>) -> Database {
    let mut db =
        Database::new(name, DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    db.spec.restore_from = from.map(|backup| Box::new(RestoreFrom { backup: backup.into(), bucket: None }));
    databases.create(&PostParams::default(), &db).await.unwrap();
    ready(databases, name).await
}

#[tokio::test]
async fn every_row_a_client_was_told_is_committed_survives_a_server_killed_while_it_writes() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "killed-writing", Nodes::Real(3)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let engines = [
        ("postgres", EngineKind::Postgres, images::POSTGRES, PG_WRITE_UNTIL_KILLED),
        ("mariadb", EngineKind::Mariadb, images::MARIADB, MARIADB_WRITE_UNTIL_KILLED),
        ("redis", EngineKind::Redis, images::REDIS, REDIS_WRITE_UNTIL_KILLED),
    ];
    for (name, engine, image, _) in engines {
        let db = Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(engine));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }
    let (client, databases, pods, ns) = (&client, &databases, &pods, &ns.name);
    futures::future::join_all(engines.into_iter().map(|(name, engine, image, write)| async move {
        ready(databases, name).await;
        let (count, verify) = counting(engine);
        let writer = tokio::spawn({
            let (client, ns) = (client.clone(), ns.clone());
            async move {
                let secret = format!("{name}-credentials");
                client_pod(&client, &ns, &format!("{name}-writer"), image, &secret, &reaching(write)).await
            }
        });
        // Killed in the middle of the writes: once 200 rows are in.
        wait_until(&format!("{name}: 200 rows written"), CONVERGE, || async {
            (in_container(ns, name, count)?.parse::<u32>().ok()? >= 200).then_some(())
        })
        .await;
        let restarts = kill_database_container(pods, name).await;
        let acked: u32 = writer.await.unwrap().parse().expect("the writer prints the last acknowledged row");
        assert!(acked >= 200, "{name}: {acked}");
        back_after_kill(pods, name, restarts).await;
        ready(databases, name).await;
        let counts = wait_until(&format!("{name}: the rows counted"), CONVERGE, || async {
            in_container(ns, name, &verify(acked))
        })
        .await;
        let (told, all) = counts.split_once(' ').unwrap_or_else(|| panic!("{name}: {counts}"));
        assert_eq!(told.parse::<u32>().unwrap(), acked, "{name}: every acknowledged row is there");
        let all: u32 = all.trim().parse().unwrap();
        assert!(all == acked || all == acked + 1, "{name}: at most the one row whose acknowledgement the kill cut off: {all}");
        eprintln!(
            "[figure] {name} killed while writing: {acked} rows acknowledged, {told} of them there after the restart, {all} in all"
        );
    }))
    .await;
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
async fn every_engine_keeps_running_and_serving_its_rows_when_the_container_runtime_restarts() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "runtime", Nodes::Real(8)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let engines = [
        ("postgres", EngineKind::Postgres, images::POSTGRES),
        ("mariadb", EngineKind::Mariadb, images::MARIADB),
        ("redis", EngineKind::Redis, images::REDIS),
    ]
    .map(|(name, engine, image)| {
        let (write, read) = write_and_read(engine);
        (name, engine, image, write, read)
    });
    for (name, engine, image, ..) in &engines {
        let db = Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(*engine));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }
    let (client, databases, pods, ns) = (&client, &databases, &pods, &ns.name);
    let before = futures::future::join_all(engines.iter().map(|(name, _, image, write, read)| async move {
        ready(databases, name).await;
        let secret = format!("{name}-credentials");
        client_pod(client, ns, &format!("{name}-write"), image, &secret, &reaching(write)).await;
        let written = client_pod(client, ns, &format!("{name}-read"), image, &secret, &reaching(read)).await;
        assert!(written.starts_with("1000"), "{name}: {written}");
        (written, database_container(&database_pod(pods, name).await).unwrap())
    }))
    .await;

    let restarted_at = Instant::now();
    let restart = std::process::Command::new("hack/control-plane.sh")
        .args(["restart", "containerd"])
        .env("PLANE", plane())
        .output()
        .unwrap();
    assert!(restart.status.success(), "{}", String::from_utf8_lossy(&restart.stderr));

    // New pods run (the runtime serves the kubelet again) and read every row, from the same
    // servers.
    let engines_before = engines.iter().zip(before);
    futures::future::join_all(engines_before.map(|((name, _, image, _, read), (written, container))| async move {
        let secret = format!("{name}-credentials");
        let read_again = client_pod(client, ns, &format!("{name}-read-again"), image, &secret, &reaching(read)).await;
        let new_pod_after = restarted_at.elapsed();
        assert_eq!(read_again, written, "{name}: the rows, from the same server");
        let after = database_container(&database_pod(pods, name).await).unwrap();
        assert_eq!(after, container, "{name}: the same container, never restarted");
        let db = databases.get(name).await.unwrap();
        assert_eq!(db.status.unwrap().phase, Some(Phase::Ready), "{name}");
        eprintln!(
            "[figure] containerd restarted: {name}'s container the same (restarts {}), a new pod read {} rows {:.0} s \
             after the restart",
            after.1,
            read_again.split(['|', ' ', '\t']).next().unwrap_or_default(),
            new_pod_after.as_secs_f64()
        );
    }))
    .await;
}

/// Rows of 64 KiB of random hex inserted one transaction at a time (keys, for redis) until
/// the server refuses one (at most 3,000); each prints the last row acknowledged and the
/// server's words. Then the one more write that shows writes accepted again.
const PG_FILL_UNTIL_FULL: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c 'create table filler (id int primary key, payload text)'
acked=0
for i in $(seq 1 3000); do
  psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c "insert into filler select $i, string_agg(md5(random()::text), '') from generate_series(1, 2048)" > /dev/null 2> /tmp/error || break
  acked=$i
done
echo "$acked"
head -n 1 /tmp/error"#;
const PG_COUNT_FILLED: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c 'insert into filler values (0, null)' -c 'select count(*) - 1 from filler'"#;

const MARIADB_FILL_UNTIL_FULL: &str = r#"export MYSQL_PWD="$DATABASE_PASSWORD"
reachable mariadb --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" -e 'select 1'
mariadb --host="$DATABASE_HOST" --user="$DATABASE_USER" app -e 'create table filler (id int primary key, payload longtext)'
acked=0
for i in $(seq 1 3000); do
  mariadb --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" app -e "insert into filler select $i, group_concat(md5(rand()) separator '') from seq_1_to_2048" > /dev/null 2> /tmp/error || break
  acked=$i
done
echo "$acked"
grep -m 1 "^ERROR" /tmp/error"#;
const MARIADB_COUNT_FILLED: &str = r#"export MYSQL_PWD="$DATABASE_PASSWORD"
reachable mariadb --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" -e 'select 1'
mariadb --host="$DATABASE_HOST" --user="$DATABASE_USER" app -N -B -e 'insert into filler values (0, null); select count(*) - 1 from filler'"#;

const REDIS_FILL_UNTIL_FULL: &str = r#"export REDISCLI_AUTH="$DATABASE_PASSWORD"
reachable sh -c 'redis-cli -h "$DATABASE_HOST" PING | grep -q PONG'
head -c 32768 /dev/urandom | od -An -tx1 | tr -d ' \n' > /tmp/blob
acked=0
for i in $(seq 1 3000); do
  said=$(redis-cli -h "$DATABASE_HOST" -x SET "filler:$i" < /tmp/blob 2>&1)
  [ "$said" = OK ] || { echo "$said" > /tmp/error; break; }
  acked=$i
done
echo "$acked"
head -n 1 /tmp/error"#;
const REDIS_COUNT_FILLED: &str = r#"export REDISCLI_AUTH="$DATABASE_PASSWORD"
reachable sh -c 'redis-cli -h "$DATABASE_HOST" PING | grep -q PONG'
for _ in $(seq 60); do [ "$(redis-cli -h "$DATABASE_HOST" SET filler:0 x)" = OK ] && break; sleep 1; done
redis-cli -h "$DATABASE_HOST" --scan --pattern 'filler:*' | grep -vcx 'filler:0'"#;

/// A file system of `size` (a tmpfs) mounted for a test's volume, with the PersistentVolume
/// that offers it to one claim; both gone when dropped.
struct SizedVolume {
    dir: std::path::PathBuf,
    volume: String,
}

impl SizedVolume {
    /// A local PersistentVolume of `size` (`96Mi`) on the real node, bound ahead to claim
    /// `claim` in `ns`, of StorageClass [`SIZED`] (which it makes if missing).
    async fn create(client: &kube_client::Client, ns: &str, claim: &str, size: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{ns}-{claim}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={}", size.trim_end_matches("i")), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(mounted.success(), "mount a tmpfs on {dir:?}");
        let volume = SizedVolume { dir, volume: format!("{ns}-{claim}") };
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": SIZED},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }))
        .unwrap();
        match Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await {
            Ok(_) => {}
            Err(kube_client::Error::Api(status)) if status.code == 409 => {}
            Err(e) => panic!("StorageClass {SIZED}: {e}"),
        }
        let node = Api::<Node>::all(client.clone())
            .list(&ListParams::default().labels("type=real"))
            .await
            .unwrap()
            .items
            .into_iter()
            .next()
            .expect("a real node")
            .metadata
            .name
            .unwrap();
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": volume.volume},
            "spec": {
                "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": SIZED,
                "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": ns, "name": claim},
                "local": {"path": volume.dir},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
            },
        }))
        .unwrap();
        Api::<PersistentVolume>::all(client.clone()).create(&PostParams::default(), &pv).await.unwrap();
        volume
    }

    /// Gives the file system `size` (`192M`): space returns, as when an administrator grows
    /// or frees a volume.
    fn grow(&self, size: &str) {
        let grown = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(grown.success(), "remount {:?} with {size}", self.dir);
    }
}

impl Drop for SizedVolume {
    fn drop(&mut self) {
        crate::common::delete_when_dropped(&[&format!("persistentvolume/{}", self.volume)]);
        // Lazily: the pod may still be stopping.
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The StorageClass of [`SizedVolume`]s: volumes made by the test, not by a provisioner.
const SIZED: &str = "e2e-sized";

/// Each engine's volume fills (a file system of 96 MiB, 192 for MariaDB) under a client that writes 64 KiB rows
/// until one is refused: the client is told why in the engine's words. postgres, which cannot
/// write its WAL to recover, keeps exiting and the Database says `VolumeFull` with the engine's
/// line; MariaDB and redis refuse the write and keep serving. Once the file system grows, each
/// accepts writes again and holds every acknowledged row and the 1,000 written before.
#[tokio::test]
async fn a_full_volume_is_reported_in_the_engines_words_and_loses_nothing_once_space_returns() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "full-volume", Nodes::Real(6)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let engines = [
        ("postgres", EngineKind::Postgres, images::POSTGRES, 96, PG_FILL_UNTIL_FULL, PG_COUNT_FILLED),
        // InnoDB's redo log alone takes 96 MiB.
        ("mariadb", EngineKind::Mariadb, images::MARIADB, 192, MARIADB_FILL_UNTIL_FULL, MARIADB_COUNT_FILLED),
        ("redis", EngineKind::Redis, images::REDIS, 96, REDIS_FILL_UNTIL_FULL, REDIS_COUNT_FILLED),
    ];
    let (client, databases, ns) = (&client, &databases, &ns.name);
    futures::future::join_all(engines.into_iter().map(|(name, engine, image, mib, fill, count)| async move {
        let size = format!("{mib}Mi");
        let volume = SizedVolume::create(client, ns, &format!("{name}-data"), &size).await;
        let mut db = Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(engine));
        let sized = Storage { size: Some(size), storage_class_name: Some(SIZED.into()), ..Default::default() };
        db.spec.storage = Some(Box::new(sized));
        databases.create(&PostParams::default(), &db).await.unwrap();
        ready(databases, name).await;
        let (write, read) = write_and_read(engine);
        let secret = format!("{name}-credentials");
        client_pod(client, ns, &format!("{name}-write"), image, &secret, &reaching(&write)).await;
        let written = client_pod(client, ns, &format!("{name}-read"), image, &secret, &reaching(&read)).await;

        let filled = client_pod(client, ns, &format!("{name}-fill"), image, &secret, &reaching(fill)).await;
        let (acked, refused) = filled.split_once('\n').unwrap_or((&filled, ""));
        let acked: u32 = acked.trim().parse().unwrap_or_else(|_| panic!("{name}: {filled}"));
        assert!(acked > 0 && acked < 3000, "{name}: the volume filled after {acked} rows: {refused}");
        // The client is told why: ENOSPC's words, or InnoDB's for a table that cannot grow.
        let cause = if engine == EngineKind::Mariadb { "is full" } else { "No space left on device" };
        assert!(refused.contains(cause), "{name}: {refused}");
        let full_at = Instant::now();
        let reported = if engine == EngineKind::Postgres {
            let degraded = wait_until("the Database to say its volume is full", CONVERGE, || async {
                let status = databases.get(name).await.ok()?.status?;
                let mut conditions = status.conditions.into_iter();
                conditions.find(|c| c.type_ == "Degraded" && c.status == "True" && c.reason == "VolumeFull")
            })
            .await;
            assert!(degraded.message.contains("No space left on device"), "{}", degraded.message);
            format!("VolumeFull {:.0} s later ({:?})", full_at.elapsed().as_secs_f64(), degraded.message)
        } else {
            let phase = databases.get(name).await.unwrap().status.and_then(|s| s.phase);
            format!("the Database {phase:?}")
        };

        volume.grow(&format!("{}M", mib + 96));
        let grown_at = Instant::now();
        ready(databases, name).await;
        let there = client_pod(client, ns, &format!("{name}-count"), image, &secret, &reaching(count)).await;
        let writable_after = grown_at.elapsed();
        let there: u32 = there.trim().parse().unwrap_or_else(|_| panic!("{name}: {there}"));
        assert!(there == acked || there == acked + 1, "{name}: {acked} rows acknowledged, {there} there");
        let read_again = client_pod(client, ns, &format!("{name}-read-again"), image, &secret, &reaching(&read)).await;
        // (Redis's read starts with the number of keys, now with the filler's.)
        let checksum = |read: &str| read.split_once(' ').map_or(read.to_string(), |(_, sum)| sum.to_string());
        assert_eq!(checksum(&read_again), checksum(&written), "{name}: the rows written before the volume filled");
        eprintln!(
            "[figure] full volume, {name}: {acked} rows acknowledged, then {refused:?}; {reported}; writes accepted \
             {:.0} s after space returned, with {there} rows and the 1,000 before",
            writable_after.as_secs_f64()
        );
    }))
    .await;
}
