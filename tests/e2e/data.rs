//! The data path on the real node, proven by reading the data back: clients in pods of their
//! own reach each engine through its Service's DNS name with the credentials Secret's keys
//! and write rows (keys, for redis; a stored function, for the MySQL family); the rows are
//! read back after the server is killed with SIGKILL, and from a new Database restored from a
//! DatabaseBackup of it; a redis Database with a 60-character name takes scheduled backups, a new Database
//! restored from one holds exactly the keys written, and retention never deletes the backup a
//! Database restores from; a postgres 15 dump restores into postgres 17 (the way to a new major
//! version) and a postgres 17 dump is refused by postgres 15 before anything runs; postgres's
//! application user owns its database and is not the superuser; a restore that loads for
//! longer than the liveness probe's budget completes without a restart; a restart the operator
//! rolls (the end of a restore, a new size) reads `Pending`, `Restarting`, never `Degraded`.

use std::time::Duration;

use database_operator::api::{BackupPhase, Database, DatabaseBackup, DatabaseSpec, EngineKind, Phase};
use database_operator::api::{RestoreFrom, Size, VerificationResult};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube_client::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::common::{Nodes, Operator, TestNamespace, client, client_pod, images, install_crd, psql_as, wait_until};
// Shared with the other test binaries that include common.rs.
pub(crate) use crate::common::{CONVERGE, PG_READ, PG_WRITE, reaching, ready};

/// The client scripts of `engine`: one that writes the rows (keys, for redis), one that reads
/// their count and checksum back.
pub(crate) fn write_and_read(engine: EngineKind) -> (String, String) {
    match engine {
        EngineKind::Postgres => (PG_WRITE.into(), PG_READ.into()),
        EngineKind::Mysql => (mysql_write("mysql"), mysql_read("mysql")),
        EngineKind::Mariadb => (mysql_write("mariadb"), mysql_read("mariadb")),
        EngineKind::Redis => (REDIS_WRITE.into(), REDIS_READ.into()),
    }
}

/// Who the application's user is: its name, whether it is a superuser, and the owner of its
/// database (`app|f|app`).
const PG_SUPERUSER: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c "select current_user, rolsuper, pg_get_userbyid(datdba) from pg_roles, pg_database where rolname = current_user and datname = current_database()""#;

/// The same for the MySQL family, whose client takes no URI: host, user and `MYSQL_PWD` (also
/// to see whether the server is reachable: MariaDB 11's client verifies the server's
/// self-signed certificate with the password, so a ping without one fails); with a
/// stored function, which a dump must carry too.
pub(crate) fn mysql_write(tool: &str) -> String {
    format!(
        r#"reachable env MYSQL_PWD="$DATABASE_PASSWORD" {tool} --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" -e 'select 1' 
values=$(seq 1 1000 | sed "s/.*/(&,'item &')/" | paste -sd, -)
printf '%s\n' 'create table items (id int primary key, name text);' "insert into items values $values;" \
  'create function item_count() returns int reads sql data return (select count(*) from items);' |
  MYSQL_PWD="$DATABASE_PASSWORD" {tool} --connect-timeout=10 --host="$DATABASE_HOST" --user="$DATABASE_USER" app"#
    )
}

pub(crate) fn mysql_read(tool: &str) -> String {
    format!(
        r#"reachable env MYSQL_PWD="$DATABASE_PASSWORD" {tool} --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" -e 'select 1' 
printf '%s\n' 'set session group_concat_max_len = 1000000;' "select count(*), md5(group_concat(name order by id separator ',')) from items;" \
  'select item_count();' |
  MYSQL_PWD="$DATABASE_PASSWORD" {tool} --connect-timeout=10 --host="$DATABASE_HOST" --user="$DATABASE_USER" --batch --skip-column-names app"#
    )
}

/// A thousand redis keys `key:i` = `item-i`, and what reads them back: the number of keys and
/// a checksum of every value in order. The password comes from REDISCLI_AUTH.
pub(crate) const REDIS_WRITE: &str = r#"export REDISCLI_AUTH="$DATABASE_PASSWORD"
reachable sh -c 'redis-cli -h "$DATABASE_HOST" PING | grep -q PONG'
seq 1 1000 | sed 's/.*/SET key:& item-&/' | redis-cli -h "$DATABASE_HOST" > /dev/null"#;
pub(crate) const REDIS_READ: &str = r#"export REDISCLI_AUTH="$DATABASE_PASSWORD"
reachable sh -c 'redis-cli -h "$DATABASE_HOST" PING | grep -q PONG'
echo "$(redis-cli -h "$DATABASE_HOST" DBSIZE) $(seq 1 1000 | sed 's/.*/GET key:&/' | redis-cli -h "$DATABASE_HOST" | md5sum)""#;

/// The Database's one pod.
pub(crate) async fn database_pod(pods: &Api<Pod>, name: &str) -> Pod {
    let listed = pods.list(&ListParams::default().labels(&format!("app={name}"))).await.unwrap().items;
    assert_eq!(listed.len(), 1, "one pod of {name}");
    listed.into_iter().next().unwrap()
}

/// The id of `pod`'s `database` container and its restart count, once it has one.
pub(crate) fn database_container(pod: &Pod) -> Option<(String, i32)> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let status = statuses.iter().find(|c| c.name == "database")?;
    let id = status.container_id.as_ref()?.rsplit("://").next()?.to_string();
    Some((id, status.restart_count))
}

/// The processes of container `id` on the node (this machine), found by the container's id
/// in their cgroups: each one's pid and command name.
pub(crate) fn processes_of(id: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if std::fs::read_to_string(entry.path().join("cgroup")).is_ok_and(|c| c.contains(id)) {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.push((pid, comm.trim().to_string()));
        }
    }
    found
}

/// Sends `signal` (`KILL`, `STOP`) to every process of container `id`; how many there were.
pub(crate) fn signal_container(id: &str, signal: &str) -> usize {
    let processes = processes_of(id);
    for (pid, _) in &processes {
        let _ = std::process::Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status();
    }
    processes.len()
}

/// Kills every process of the `database` container of Database `name`'s pod with SIGKILL, as
/// the kernel's OOM killer or a crash would. Returns the container's restart count before.
pub(crate) async fn kill_database_container(pods: &Api<Pod>, name: &str) -> i32 {
    let pod = database_pod(pods, name).await;
    let (id, restarts) = database_container(&pod).expect("a running database container");
    assert!(signal_container(&id, "KILL") > 0, "no process of container {id} ({name}) on this node");
    restarts
}

/// Waits until Database `name`'s `database` container, killed after `restarts` restarts, has
/// restarted and is ready.
pub(crate) async fn back_after_kill(pods: &Api<Pod>, name: &str, restarts: i32) {
    wait_until(&format!("{name}'s server to be back after SIGKILL"), CONVERGE, || async {
        let pod = database_pod(pods, name).await;
        let status = pod.status?.container_statuses?.into_iter().find(|c| c.name == "database")?;
        (status.restart_count > restarts && status.ready).then_some(())
    })
    .await;
}

#[tokio::test]
async fn every_engine_serves_its_clients_keeps_their_rows_when_killed_and_restores_them_from_a_backup() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "data", Nodes::Real(8)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let engines = [
        ("postgres", EngineKind::Postgres, images::POSTGRES),
        ("mysql", EngineKind::Mysql, images::MYSQL),
        ("mariadb", EngineKind::Mariadb, images::MARIADB),
        ("redis", EngineKind::Redis, images::REDIS),
    ]
    .map(|(name, engine, image)| {
        let (write, read) = write_and_read(engine);
        (name, engine, image, reaching(&write), reaching(&read))
    });
    for (name, engine, image, ..) in &engines {
        let db = Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(*engine));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }
    // The engines side by side: each written, read, killed and read again.
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let (client, databases, pods, backups, ns) = (&client, &databases, &pods, &backups, &ns.name);
    futures::future::join_all(engines.iter().map(|(name, engine, image, write, read)| async move {
        ready(databases, name).await;
        let secret = format!("{name}-credentials");
        client_pod(client, ns, &format!("{name}-write"), image, &secret, write).await;
        let written = client_pod(client, ns, &format!("{name}-read"), image, &secret, read).await;
        assert!(written.starts_with("1000"), "{name}: {written}");

        let restarts = kill_database_container(pods, name).await;
        back_after_kill(pods, name, restarts).await;
        ready(databases, name).await;
        let read_back = client_pod(client, ns, &format!("{name}-read-again"), image, &secret, read).await;
        assert_eq!(read_back, written, "{name}: what was committed before the kill");

        // Dumped by a DatabaseBackup, verified (restored into a throwaway and counted with the
        // engine's own client: the thousand rows or keys written), and restored into a new
        // Database: the same data there.
        let dump = format!("{name}-1");
        let mut verified = database_operator::api::backup(&dump, name);
        verified.spec.verify = Some(true);
        backups.create(&PostParams::default(), &verified).await.unwrap();
        let done = crate::backups::finished(backups, &dump).await.status.unwrap();
        assert_eq!(done.phase, Some(BackupPhase::Completed), "{name}: {:?}", done.message);
        let verification = crate::verify::verified(backups, &dump).await;
        println!("[figure] {name}: {verification:?}");
        assert_eq!(verification.result, Some(VerificationResult::Passed), "{name}: {:?}", verification.message);
        assert_eq!(verification.count, Some(1000), "{name}: the rows (keys) written");
        let copy = format!("{name}-copy");
        let mut restored = Database::new(&copy, DatabaseSpec::new(Size::Small, image).with_engine(*engine));
        restored.spec.restore_from = Some(Box::new(RestoreFrom { backup: dump.clone(), bucket: None }));
        databases.create(&PostParams::default(), &restored).await.unwrap();
        let status = ready(databases, &copy).await.status.unwrap();
        assert_eq!(status.restored_from.as_deref(), Some(dump.as_str()), "{name}");
        let copied_secret = format!("{copy}-credentials");
        let copied = client_pod(client, ns, &format!("{copy}-read"), image, &copied_secret, read).await;
        assert_eq!(copied, written, "{name}: the restored data");
    }))
    .await;
}

/// The way to a new major version is a dump and a restore into a new Database: a postgres 15
/// dump loads into postgres 17 with every row; a postgres 17 dump is refused by postgres 15
/// (its `pg_restore` cannot read the archive) before a pod is made, never recorded as restored.
#[tokio::test]
async fn a_postgres_15_dump_restores_into_postgres_17_and_a_17_dump_is_refused_by_15() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "majors", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let postgres = |name: &str, image: &str, from: Option<&str>| {
        let mut db = Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(EngineKind::Postgres));
        db.spec.restore_from = from.map(|backup| Box::new(RestoreFrom { backup: backup.into(), bucket: None }));
        db
    };
    let backed_up = |database: &'static str, backup: &'static str| {
        let backups = backups.clone();
        async move {
            backups.create(&PostParams::default(), &database_operator::api::backup(backup, database)).await.unwrap();
            let done = crate::backups::finished(&backups, backup).await.status.unwrap();
            assert_eq!(done.phase, Some(BackupPhase::Completed), "{backup}: {:?}", done.message);
            done
        }
    };

    databases.create(&PostParams::default(), &postgres("old", images::POSTGRES_15, None)).await.unwrap();
    ready(&databases, "old").await;
    let (read, secret) = (reaching(PG_READ), "old-credentials");
    client_pod(&client, &ns.name, "write", images::POSTGRES_15, secret, &reaching(PG_WRITE)).await;
    let written = client_pod(&client, &ns.name, "read", images::POSTGRES_15, secret, &read).await;
    assert!(written.starts_with("1000"), "{written}");
    // The application's user owns its database and is not the superuser, which logs in
    // through the socket inside the pod.
    let superuser =
        client_pod(&client, &ns.name, "superuser", images::POSTGRES_15, secret, &reaching(PG_SUPERUSER)).await;
    assert_eq!(superuser.trim(), "app|f|app", "user, superuser, owner of the database");
    assert_eq!(
        psql_as(
            &ns.name,
            "old",
            "postgres",
            "select current_user, rolsuper from pg_roles where rolname = current_user"
        )
        .unwrap(),
        "postgres|t"
    );
    let dumped = backed_up("old", "old-1").await;
    assert_eq!(dumped.image.as_deref(), Some(images::POSTGRES_15));

    databases.create(&PostParams::default(), &postgres("new", images::POSTGRES, Some("old-1"))).await.unwrap();
    let status = ready(&databases, "new").await.status.unwrap();
    assert_eq!(status.restored_from.as_deref(), Some("old-1"));
    let copied = client_pod(&client, &ns.name, "read-new", images::POSTGRES, "new-credentials", &read).await;
    assert_eq!(copied, written, "postgres 17 holds the rows postgres 15 dumped");
    let restored_as =
        client_pod(&client, &ns.name, "superuser-new", images::POSTGRES, "new-credentials", &reaching(PG_SUPERUSER))
            .await;
    assert_eq!(restored_as.trim(), "app|f|app", "the restored database is the application user's too");

    backed_up("new", "new-1").await;
    databases.create(&PostParams::default(), &postgres("back", images::POSTGRES_15, Some("new-1"))).await.unwrap();
    let refused = wait_until("postgres 15 to refuse postgres 17's dump", CONVERGE, || async {
        let status = databases.get("back").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    })
    .await;
    assert_eq!(refused.reason, "RestoreFromNewerMajor", "{}", refused.message);
    assert!(refused.message.contains("major version 17") && refused.message.contains("major version 15"));
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    assert!(deployments.get_opt("back").await.unwrap().is_none(), "no server was started to load it");
    assert_eq!(databases.get("back").await.unwrap().status.unwrap().restored_from, None);
}

/// A restart the operator itself rolls (the end of a restore, whose pod is replaced by one
/// without the restore's init container; a new size) stops the old pod before the new one
/// starts (`Recreate`): the Database reads `Pending`, Ready False `Restarting`, Progressing
/// True, and never `Degraded` (a planned restart is no fault), as a watch sees every status it
/// is written with; the rows restored are there after both restarts.
#[tokio::test]
async fn a_restart_the_operator_rolls_reads_as_progressing_never_degraded_and_keeps_the_rows() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "restarts", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let postgres = || DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres);
    databases.create(&PostParams::default(), &Database::new("source", postgres())).await.unwrap();
    ready(&databases, "source").await;
    let (read, secret) = (reaching(PG_READ), "source-credentials");
    client_pod(&client, &ns.name, "write", images::POSTGRES, secret, &reaching(PG_WRITE)).await;
    let written = client_pod(&client, &ns.name, "read", images::POSTGRES, secret, &read).await;
    backups.create(&PostParams::default(), &database_operator::api::backup("source-1", "source")).await.unwrap();
    let done = crate::backups::finished(&backups, "source-1").await.status.unwrap();
    assert_eq!(done.phase, Some(BackupPhase::Completed), "{:?}", done.message);

    // Every status `copy` is written with, from before it exists.
    let version = databases.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let watch = WatchParams::default().fields("metadata.name=copy").timeout(290);
    let mut events = databases.watch(&watch, &version).await.unwrap().boxed();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorder = tokio::spawn({
        let seen = seen.clone();
        async move {
            while let Ok(Some(event)) = events.try_next().await {
                if let WatchEvent::Added(db) | WatchEvent::Modified(db) = event {
                    let status = db.status.unwrap_or_default();
                    let reason = |type_: &str| {
                        let found = status.conditions.iter().find(|c| c.type_ == type_);
                        found.map(|c| format!("{}={}", c.status, c.reason))
                    };
                    let generation = status.observed_generation.unwrap_or_default();
                    let entry = (generation, status.phase, reason("Ready"), reason("Progressing"), reason("Degraded"));
                    seen.lock().unwrap().push(entry);
                }
            }
        }
    });
    let mut copy = Database::new("copy", postgres());
    copy.spec.restore_from = Some(Box::new(RestoreFrom { backup: "source-1".into(), bucket: None }));
    databases.create(&PostParams::default(), &copy).await.unwrap();
    // Ready at `generation`, with the restore's pod replaced by a plain one, rolled out.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let settled = |generation: i64| {
        let (databases, deployments) = (databases.clone(), deployments.clone());
        async move {
            wait_until(&format!("copy to be Ready at generation {generation}"), CONVERGE, || async {
                let deployment = deployments.get("copy").await.ok()?;
                let template = deployment.spec.as_ref()?.template.spec.as_ref()?;
                let restoring = template.init_containers.iter().flatten().any(|c| c.name == "restore");
                let rolled = deployment.status.as_ref().is_some_and(|s| {
                    s.observed_generation == deployment.metadata.generation
                        && s.updated_replicas == Some(1)
                        && s.ready_replicas == Some(1)
                        && s.replicas == Some(1)
                });
                if restoring || !rolled {
                    return None;
                }
                let status = databases.get("copy").await.ok()?.status?;
                let complete =
                    status.conditions.iter().any(|c| c.type_ == "Progressing" && c.reason == "ReconcileComplete");
                (status.phase == Some(Phase::Ready)
                    && status.restored_from.is_some()
                    && status.observed_generation == Some(generation)
                    && complete)
                    .then_some(())
            })
            .await;
        }
    };
    settled(1).await;
    let resize = json!({"spec": {"size": "medium"}});
    databases.patch("copy", &PatchParams::default(), &Patch::Merge(&resize)).await.unwrap();
    settled(2).await;
    let copied = client_pod(&client, &ns.name, "read-copy", images::POSTGRES, "copy-credentials", &read).await;
    assert_eq!(copied, written, "the restored rows, after both restarts");

    recorder.abort();
    let seen = seen.lock().unwrap().clone();
    println!("[figure] the statuses of copy, in order (generation, phase, Ready, Progressing, Degraded): {seen:?}");
    let phases = |generation: i64| -> Vec<_> { seen.iter().filter(|s| s.0 == generation).map(|s| s.1).collect() };
    let (restore, resize) = (phases(1), phases(2));
    assert!(!seen.iter().any(|s| s.1 == Some(Phase::Degraded)), "a planned restart read as a fault: {seen:?}");
    // A restored Database's first Ready is the pod it keeps: Ready once, and for good.
    let first_ready = restore.iter().position(|p| *p == Some(Phase::Ready)).expect("Ready after the restore");
    assert!(restore[first_ready..].iter().all(|p| *p == Some(Phase::Ready)), "Ready, then not: {seen:?}");
    let restarting = |s: &&(i64, Option<Phase>, Option<String>, Option<String>, Option<String>)| {
        s.1 == Some(Phase::Pending)
            && s.2.as_deref() == Some("False=Restarting")
            && s.3.as_deref().is_some_and(|p| p.starts_with("True="))
    };
    assert!(seen.iter().filter(|s| s.0 == 1).any(|s| restarting(&s)), "no restart after the restore: {seen:?}");
    assert!(seen.iter().filter(|s| s.0 == 2).any(|s| restarting(&s)), "no restart for the new size: {seen:?}");
    assert_eq!(resize.last(), Some(&Some(Phase::Ready)), "{seen:?}");
}

/// Redis, whose restore used to come up empty: with append-only persistence the server loads
/// its append-only directory only, so the dump is restored as that directory's base.
#[tokio::test]
async fn a_redis_with_a_60_character_name_backs_up_on_schedule_restores_its_keys_and_keeps_the_restore_source() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "redis-restore", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let name = format!("sessions-{}", "x".repeat(51));
    assert_eq!(name.len(), 60);
    let db = Database::new(&name, DatabaseSpec::new(Size::Small, images::REDIS).with_engine(EngineKind::Redis));
    databases.create(&PostParams::default(), &db).await.unwrap();
    ready(&databases, &name).await;
    let secret = format!("{name}-credentials");
    client_pod(&client, &ns.name, "write", images::REDIS, &secret, &reaching(REDIS_WRITE)).await;
    let written = client_pod(&client, &ns.name, "read", images::REDIS, &secret, &reaching(REDIS_READ)).await;
    assert!(written.starts_with("1000 "), "{written}");

    // Every ten seconds, keeping one Completed backup.
    let schedule = json!({"spec": {"backup": {"schedule": "*/10 * * * * *", "keep": 1}}});
    databases.patch(&name, &PatchParams::default(), &Patch::Merge(&schedule)).await.unwrap();
    let source = wait_until("a scheduled backup to complete", CONVERGE, || async {
        let list = backups.list(&ListParams::default()).await.ok()?.items;
        list.into_iter().find(|b| b.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed))
    })
    .await;
    let source = source.metadata.name.unwrap();
    assert!(source.len() <= 63 && source.starts_with("sessions-xxx"), "{source}");

    let mut copy = Database::new("copy", DatabaseSpec::new(Size::Small, images::REDIS).with_engine(EngineKind::Redis));
    copy.spec.restore_from = Some(Box::new(RestoreFrom { backup: source.clone(), bucket: None }));
    databases.create(&PostParams::default(), &copy).await.unwrap();
    let restored = ready(&databases, "copy").await;
    assert_eq!(restored.status.unwrap().restored_from.as_deref(), Some(source.as_str()));
    let read =
        client_pod(&client, &ns.name, "read-copy", images::REDIS, "copy-credentials", &reaching(REDIS_READ)).await;
    assert_eq!(read, written, "the restored keys");

    // Newer backups complete and rotate (keep 1): the first is beyond keep, yet "copy"
    // restores from it, so it stays.
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    wait_until("two newer backups, rotated down to one beside the restore source", CONVERGE, || async {
        let list = backups.list(&ListParams::default()).await.ok()?.items;
        let completed: Vec<_> = list
            .iter()
            .filter(|b| b.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed))
            .filter_map(|b| b.metadata.name.clone())
            .collect();
        assert!(completed.contains(&source), "the backup a Database restores from was deleted");
        let mut seen = seen.lock().unwrap();
        seen.extend(completed.iter().filter(|n| **n != source).cloned());
        (seen.len() >= 2 && completed.len() == 2).then_some(())
    })
    .await;
}

/// The MySQL family's `root` logs in from inside the database's pod only: over the network it
/// is refused with the right password (the Secret's `root-password`), while the same password
/// logs in through the server's socket; the application's user reaches its database from a
/// pod of its own.
#[tokio::test]
async fn the_mysql_familys_root_logs_in_from_inside_its_pod_only() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "root", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let engines = [
        ("mysql", EngineKind::Mysql, images::MYSQL, "mysql"),
        ("mariadb", EngineKind::Mariadb, images::MARIADB, "mariadb"),
    ];
    for (name, engine, image, _) in &engines {
        let db = Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(*engine));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }
    let (client, databases, ns) = (&client, &databases, &ns.name);
    futures::future::join_all(engines.iter().map(|(name, _, image, tool)| async move {
        ready(databases, name).await;
        let secret = format!("{name}-credentials");
        let remote = reaching(&format!(
            r#"reachable env MYSQL_PWD="$DATABASE_PASSWORD" {tool} --connect-timeout=5 --host="$DATABASE_HOST" --user="$DATABASE_USER" -e 'select 1'
[ -n "$DATABASE_ROOT_PASSWORD" ] || {{ echo "no root-password in the Secret"; exit 1; }}
if out=$(MYSQL_PWD="$DATABASE_ROOT_PASSWORD" {tool} --connect-timeout=10 --host="$DATABASE_HOST" --user=root -e 'select current_user()' 2>&1); then
  echo "root logged in over the network: $out"
else
  echo "$out"
fi"#
        ));
        let over_the_network = client_pod(client, ns, &format!("{name}-root"), image, &secret, &remote).await;
        assert!(over_the_network.contains("Access denied for user 'root'"), "{name}: {over_the_network}");
        // Inside the pod, through the socket, with the password from the container's own
        // environment (never on a command line).
        let prefix = if *name == "mysql" { "MYSQL" } else { "MARIADB" };
        let local = std::process::Command::new("kubectl")
            .args(["exec", "-n", ns, &format!("deployment/{name}"), "-c", "database", "--", "sh", "-c"])
            .arg(format!(r#"MYSQL_PWD="${prefix}_ROOT_PASSWORD" mariadb --protocol=socket --user=root -N -e 'select current_user()'"#))
            .output()
            .unwrap();
        // stdout only: kubectl's own client logs warnings to stderr now and then (its
        // websocket's "Unknown stream id 1, discarding message").
        let (stdout, stderr) = (String::from_utf8_lossy(&local.stdout), String::from_utf8_lossy(&local.stderr));
        assert!(local.status.success(), "{name}: {stdout}{stderr}");
        assert_eq!(stdout.trim(), "root@localhost", "{name}: stderr {stderr}");
    }))
    .await;
}

/// A table whose index takes 15 s per row to build wherever the setting `app.load_fast` is not
/// on: fast where it is written (the writer sets it), slow where a restore builds the index
/// again (pg_restore does not), so that a dump of a few rows loads for longer than the liveness
/// probe's two minutes. (Dollar quotes carry tags: Kubernetes reads `$$` in a command as `$`.)
const PG_WRITE_SLOW_TO_LOAD: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c 'set app.load_fast = on' \
  -c 'create function slow_key(i int) returns int language plpgsql immutable as $f$
      begin
        if coalesce(current_setting($s$app.load_fast$s$, true), $s$off$s$) <> $s$on$s$ then perform pg_sleep(15); end if;
        return i;
      end $f$' \
  -c 'create table slow (i int)' -c 'insert into slow select generate_series(1, 10)' \
  -c 'create index slow_key_index on slow (slow_key(i))'"#;

/// What [`PG_READ`] reads, and whether the slow index is there: the last thing a restore
/// builds, missing from a load cut short.
const PG_READ_SLOW_TO_LOAD: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c "select count(*), md5(string_agg(name, ',' order by id)) from items" \
  -c "select count(*) from slow" -c "select count(*) from pg_indexes where indexname = 'slow_key_index'""#;

/// A restore that loads for longer than the liveness probe's budget (six failures 20 s apart)
/// is not killed half-way: the startup probe holds liveness back until the server serves, so
/// the container never restarts (a restart would find the data directory and start on the
/// partial load) and the restored Database holds every row and the index built last.
#[tokio::test]
async fn a_postgres_restore_that_loads_for_longer_than_the_liveness_budget_completes_without_a_restart() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "slow-load", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let postgres = || DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres);
    databases.create(&PostParams::default(), &Database::new("source", postgres())).await.unwrap();
    ready(&databases, "source").await;
    let secret = "source-credentials";
    client_pod(&client, &ns.name, "write", images::POSTGRES, secret, &reaching(PG_WRITE)).await;
    client_pod(&client, &ns.name, "write-slow", images::POSTGRES, secret, &reaching(PG_WRITE_SLOW_TO_LOAD)).await;
    let read = reaching(PG_READ_SLOW_TO_LOAD);
    let written = client_pod(&client, &ns.name, "read", images::POSTGRES, secret, &read).await;
    assert!(written.starts_with("1000|") && written.ends_with("\n10\n1"), "{written}");
    backups.create(&PostParams::default(), &database_operator::api::backup("source-1", "source")).await.unwrap();
    let done = crate::backups::finished(&backups, "source-1").await.status.unwrap();
    assert_eq!(done.phase, Some(BackupPhase::Completed), "{:?}", done.message);

    let mut copy = Database::new("copy", postgres());
    copy.spec.restore_from = Some(Box::new(RestoreFrom { backup: "source-1".into(), bucket: None }));
    databases.create(&PostParams::default(), &copy).await.unwrap();
    // The pod that loads the dump (the one with the restore's init container, replaced by a
    // plain one once the restore is recorded), as last seen Ready: its restarts and when it
    // served.
    let loader = std::sync::Mutex::new(None::<Pod>);
    let serving = |pod: &Pod| {
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let restored = wait_until("the slow restore to be Ready", Duration::from_secs(480), || async {
        for pod in pods.list(&ListParams::default().labels("app=copy")).await.ok()?.items {
            let init = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref());
            if init.is_some_and(|c| c.iter().any(|c| c.name == "restore")) && serving(&pod) {
                *loader.lock().unwrap() = Some(pod);
            }
        }
        let db = databases.get("copy").await.ok()?;
        (db.status.as_ref()?.phase == Some(Phase::Ready)).then_some(db)
    })
    .await;
    assert_eq!(restored.status.unwrap().restored_from.as_deref(), Some("source-1"));
    let loader = loader.into_inner().unwrap().expect("the pod that loaded the dump");
    let (_, restarts) = database_container(&loader).unwrap();
    assert_eq!(restarts, 0, "the database container was restarted during the load");
    // The premise: that pod's server served no earlier than the liveness budget after it
    // started.
    let status = loader.status.unwrap();
    let started = status.container_statuses.unwrap().into_iter().find(|c| c.name == "database").unwrap();
    let started = started.state.unwrap().running.unwrap().started_at.unwrap().0;
    let ready_at = status.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    let loading = ready_at.last_transition_time.unwrap().0.duration_since(started);
    println!("[figure] a restore Ready {loading:#} after its container started, without a restart");
    assert!(loading > k8s_openapi::jiff::SignedDuration::from_secs(120), "loaded in {loading:#}");
    let copied = client_pod(&client, &ns.name, "read-copy", images::POSTGRES, "copy-credentials", &read).await;
    assert_eq!(copied, written, "every row and the index built last");
}
