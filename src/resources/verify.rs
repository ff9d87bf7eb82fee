//! What a backup's verification makes (`spec.verify`): a throwaway Database restored from the
//! backup, and a Job that counts what the restore holds.
//!
//! The throwaway is an ordinary Database of the backup's engine and image, with
//! `spec.restoreFrom` naming the backup: it is restored the way any Database is, so its
//! verification proves the path a real recovery takes. It is the backup's (an owner reference,
//! so the garbage collector removes it with the backup), labelled with the backup's name
//! ([`VERIFIES_LABEL`]) and sized as the Database dumped was, when that one still exists.
//!
//! The count Job runs the engine's own client from the backup's image against the throwaway's
//! Service, with the throwaway's credentials, and leaves the count of its rows or keys
//! ([`Engine::count_script`]) as its termination message; its error, when it fails, is the end
//! of its log. It runs as the engine's non-root user, without a service account token.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use kube_core::ObjectMeta;

use super::meta::{BACKUP_LABEL, MANAGED_BY_LABEL, MANAGER, controller_reference, derived_name};
use super::secret;
use crate::api::{Database, DatabaseBackup, DatabaseSpec, EngineKind, RestoreFrom, Size, Storage};
use crate::engine::{self, Engine, container_security, pod_security, value};

/// The label of a throwaway Database naming the backup it verifies.
pub(crate) const VERIFIES_LABEL: &str = "example.com/verifies";

/// The container of the count Job.
pub(crate) const COUNT_CONTAINER: &str = "count";

/// The name of `backup`'s throwaway Database and of its count Job: the backup's name with
/// "-verify", a DNS-1035 label as a Database's name must be (a backup's name may hold dots or
/// start with a digit).
pub(crate) fn name(backup: &DatabaseBackup) -> String {
    let base = backup.metadata.name.as_deref().unwrap_or_default().replace('.', "-");
    let base = if base.starts_with(|c: char| c.is_ascii_lowercase()) { base } else { format!("b-{base}") };
    derived_name(&base, "verify")
}

fn metadata(backup: &DatabaseBackup) -> ObjectMeta {
    let backup_name = backup.metadata.name.clone().unwrap_or_default();
    ObjectMeta {
        name: Some(name(backup)),
        namespace: backup.metadata.namespace.clone(),
        labels: Some(BTreeMap::from([
            (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
            ("app.kubernetes.io/component".to_string(), "verification".to_string()),
            (BACKUP_LABEL.to_string(), backup_name.clone()),
            (VERIFIES_LABEL.to_string(), backup_name),
        ])),
        owner_references: Some(vec![controller_reference(backup)]),
        ..Default::default()
    }
}

/// The throwaway Database that restores `backup` (of a Database of engine `kind`, dumped by
/// `image`): the size and volume of `source`, the Database dumped, when it still exists.
pub(crate) fn throwaway(backup: &DatabaseBackup, source: Option<&Database>, kind: EngineKind, image: &str) -> Database {
    let size = source.map_or(Size::Small, |db| db.spec.size);
    let mut spec = DatabaseSpec::new(size, image).with_engine(kind);
    spec.storage = source.and_then(|db| db.spec.storage.as_deref()).map(|storage| {
        // Its own volume, deleted with it, whatever the source keeps.
        Box::new(Storage { reclaim_policy: None, ..storage.clone() })
    });
    let backup_name = backup.metadata.name.clone().unwrap_or_default();
    spec.restore_from = Some(Box::new(RestoreFrom { backup: backup_name, bucket: None }));
    Database { metadata: metadata(backup), spec, status: None }
}

/// The Job that counts the rows or keys of `throwaway` (whose engine is `engine`) with the
/// engine's client from `image`.
pub(crate) fn count_job(backup: &DatabaseBackup, throwaway: &Database, engine: &dyn Engine, image: &str) -> Job {
    let mut env = engine.client_env(&secret::secret_name(throwaway));
    env.push(value("DATABASE_HOST", &secret::host(throwaway)));
    // A minute of attempts: the throwaway's server restarts once after its restore.
    let script = format!(
        "for attempt in $(seq 30); do count=$({}) && [ -n \"$count\" ] && break; count=; sleep 2; done; \
         [ -n \"$count\" ] && echo \"$count\" > /dev/termination-log",
        engine.count_script()
    );
    let container = Container {
        name: COUNT_CONTAINER.into(),
        image: Some(image.into()),
        command: Some(vec!["sh".into(), "-c".into(), script]),
        env: Some(env),
        security_context: Some(container_security()),
        termination_message_policy: Some(engine::LAST_WORDS.into()),
        ..Default::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        restart_policy: Some("Never".into()),
        security_context: Some(pod_security(engine)),
        automount_service_account_token: Some(false),
        ..Default::default()
    };
    Job {
        metadata: metadata(backup),
        spec: Some(JobSpec {
            // A client that cannot connect at once (the Service's endpoints a moment behind
            // the Ready condition) tries again.
            backoff_limit: Some(2),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: metadata(backup).labels, ..Default::default() }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// Whether `db` is `backup`'s throwaway: controlled by it.
pub(crate) fn is_throwaway_of(db: &Database, backup: &DatabaseBackup) -> bool {
    super::meta::is_controlled_by(&db.metadata, backup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ReclaimPolicy, backup};

    fn nightly(name: &str) -> DatabaseBackup {
        let mut backup = backup(name, "orders");
        backup.metadata.namespace = Some("shop".into());
        backup.metadata.uid = Some("uid-1".into());
        backup
    }

    #[test]
    fn a_throwaway_is_named_after_its_backup_as_a_database_must_be() {
        assert_eq!(name(&nightly("orders-20261205")), "orders-20261205-verify");
        assert_eq!(name(&nightly("2026.12.05")), "b-2026-12-05-verify", "a letter first, no dots");
        let long = name(&nightly(&"x".repeat(253)));
        assert!(long.len() <= 63 && long.ends_with("-verify"), "{long}");
    }

    #[test]
    fn a_throwaway_restores_its_backup_on_a_volume_of_its_own_owned_by_the_backup() {
        let mut source = Database::new("orders", DatabaseSpec::new(Size::Medium, "postgres:17.2"));
        source.spec.storage = Some(Box::new(Storage {
            size: Some("5Gi".into()),
            reclaim_policy: Some(ReclaimPolicy::Retain),
            ..Default::default()
        }));
        let backup = nightly("nightly");
        let db = throwaway(&backup, Some(&source), EngineKind::Postgres, "postgres:17.1");
        assert_eq!(db.spec.restore_from.as_ref().unwrap().backup, "nightly");
        assert_eq!((db.spec.size, db.spec.image.as_str()), (Size::Medium, "postgres:17.1"), "the dump's image");
        let storage = db.spec.storage.as_ref().unwrap();
        assert_eq!((storage.size.as_deref(), storage.reclaim_policy), (Some("5Gi"), None), "deleted with it");
        assert!(is_throwaway_of(&db, &backup));
        assert_eq!(db.metadata.labels.as_ref().unwrap()[VERIFIES_LABEL], "nightly");
        let alone = throwaway(&backup, None, EngineKind::Redis, "redis:8");
        assert_eq!((alone.spec.size, alone.spec.storage), (Size::Small, None), "the source is gone");
    }

    #[test]
    fn the_count_job_leaves_its_count_as_its_termination_message_and_holds_no_password() {
        let backup = nightly("nightly");
        let db = throwaway(&backup, None, EngineKind::Postgres, "postgres:17");
        let job = count_job(&backup, &db, engine::of(EngineKind::Postgres), "postgres:17");
        let pod = job.spec.unwrap().template.spec.unwrap();
        let container = &pod.containers[0];
        let script = &container.command.as_ref().unwrap()[2];
        assert!(script.ends_with("> /dev/termination-log"), "{script}");
        let env = container.env.as_ref().unwrap();
        let password = env.iter().find(|e| e.name == "PGPASSWORD").unwrap();
        assert!(password.value.is_none() && password.value_from.is_some(), "from the throwaway's Secret");
        assert_eq!(
            env.iter().find(|e| e.name == "DATABASE_HOST").unwrap().value.as_deref(),
            Some(db_host(&db).as_str())
        );
        assert_eq!(pod.automount_service_account_token, Some(false));
    }

    fn db_host(db: &Database) -> String {
        secret::host(db)
    }
}
