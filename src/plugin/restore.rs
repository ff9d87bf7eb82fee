//! `kubectl database restore BACKUP --to NEW`: a new Database restored from a backup, like the
//! backed-up one (engine, image, size, volume) when it still exists, else as the backup's
//! status recorded it (engine, image); with `--wait`, its progress until it is Ready.
//!
//! The new Database gets credentials of its own (a new generated Secret), not the backed-up
//! one's: the dump holds the data, not the password.

use kube_client::Api;
use kube_client::api::PostParams;

use super::args::RestoreArgs;
use super::error::Error;
use super::target::{Look, Target, wait};
use crate::api::{BackupPhase, Database, DatabaseBackup, DatabaseSpec, Phase, RestoreFrom, Size, Storage};

/// The Database `to`, restored from `backup`: its engine, image and size those of `source`
/// (the backed-up Database, when it exists) or else those the backup recorded, `image` and
/// `size` overriding; its volume as large as the source's and of the same class.
///
/// # Errors
///
/// [`Error::Refused`] when the backup failed, or when neither the source nor the backup says
/// the engine or image (a backup that has not begun).
pub(crate) fn restored_database(
    to: &str,
    backup: &DatabaseBackup,
    source: Option<&Database>,
    image: Option<&str>,
    size: Option<Size>,
) -> Result<Database, Error> {
    let name = backup.metadata.name.as_deref().unwrap_or_default();
    let status = backup.status.clone().unwrap_or_default();
    if status.phase == Some(BackupPhase::Failed) {
        return Err(Error::Refused(format!("DatabaseBackup {name} failed: it has no dump to restore")));
    }
    let engine = source.and_then(|db| db.spec.engine).or(status.engine).ok_or_else(|| {
        Error::Refused(format!(
            "DatabaseBackup {name} does not say its engine yet (its Database {} is gone and the dump has not begun)",
            backup.spec.database
        ))
    })?;
    let image =
        image.map(str::to_string).or_else(|| source.map(|db| db.spec.image.clone())).or(status.image).ok_or_else(
            || Error::Refused(format!("DatabaseBackup {name} does not say its image: give one with --image")),
        )?;
    let size = size.or(source.map(|db| db.spec.size)).unwrap_or(Size::Small);
    let mut spec = DatabaseSpec::new(size, &image).with_engine(engine);
    spec.storage = source.and_then(|db| db.spec.storage.as_deref()).map(|storage| {
        Box::new(Storage {
            size: storage.size.clone(),
            storage_class_name: storage.storage_class_name.clone(),
            reclaim_policy: None,
        })
    });
    spec.restore_from = Some(Box::new(RestoreFrom { backup: name.to_string(), bucket: None }));
    Ok(Database::new(to, spec))
}

/// Where the new Database stands, as `--wait` sees it: Ready is done; a restore the operator
/// gave up on (`RestoreFailed` and the other reasons of a Degraded Database that cannot be
/// restored) is failed; anything else is progress, its Ready condition's words.
pub(crate) fn look(db: &Database) -> Look {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let status = db.status.clone().unwrap_or_default();
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    let phase = status.phase.map_or("created", Phase::as_str);
    if status.phase == Some(Phase::Ready) {
        let from = status.restored_from.as_deref().unwrap_or("its backup");
        return Look::Done(format!("Database {name}: Ready, restored from {from}"));
    }
    if let Some(degraded) = condition("Degraded").filter(|c| c.status == "True") {
        if degraded.reason.starts_with("Restore") || degraded.reason == "NoBackupImage" {
            return Look::Failed(format!(
                "Database {name} cannot be restored: {}: {}",
                degraded.reason, degraded.message
            ));
        }
        return Look::Waiting(format!("Database {name}: {phase}: {}: {}", degraded.reason, degraded.message));
    }
    match condition("Ready") {
        Some(ready) => Look::Waiting(format!("Database {name}: {phase}: {}: {}", ready.reason, ready.message)),
        None => Look::Waiting(format!("Database {name}: {phase}")),
    }
}

/// Creates the Database, and with `--wait` waits for it.
pub(crate) async fn run(target: &Target, args: RestoreArgs) -> Result<(), Error> {
    let ns = &target.namespace;
    let databases: Api<Database> = Api::namespaced(target.client.clone(), ns);
    let backups: Api<DatabaseBackup> = Api::namespaced(target.client.clone(), ns);
    let backup = backups
        .get_opt(&args.backup)
        .await
        .map_err(|e| Error::api(format!("getting DatabaseBackup {ns}/{}", args.backup), e))?
        .ok_or_else(|| Error::NotFound { kind: "DatabaseBackup", name: args.backup.clone(), namespace: ns.clone() })?;
    let source = databases
        .get_opt(&backup.spec.database)
        .await
        .map_err(|e| Error::api(format!("getting Database {ns}/{}", backup.spec.database), e))?;
    let db = restored_database(&args.to, &backup, source.as_ref(), args.image.as_deref(), args.size)?;
    let to = &args.to;
    databases.create(&PostParams::default(), &db).await.map_err(|e| {
        let err = Error::api(format!("creating Database {ns}/{to}"), e);
        if err.is_already_exists() {
            Error::Refused(format!(
                "Database {to} exists already: a restore makes a new Database; choose another name with --to"
            ))
        } else {
            err
        }
    })?;
    println!("database.example.com/{to} created, restoring DatabaseBackup {} ({})", args.backup, db.spec.image);
    if !args.wait {
        return Ok(());
    }
    let hint = format!("kubectl database why {to} -n {ns} explains where it stands");
    let last = wait(&format!("Database {to} to be Ready"), &hint, args.timeout, || async {
        let db = databases.get(to).await.map_err(|e| Error::api(format!("getting Database {ns}/{to}"), e))?;
        Ok(look(&db))
    })
    .await?;
    println!("{last}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BackupStatus, DatabaseStatus, EngineKind, ReclaimPolicy};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use serde_json::json;

    fn completed() -> DatabaseBackup {
        let mut backup = crate::api::backup("nightly", "orders");
        backup.status = Some(BackupStatus {
            phase: Some(BackupPhase::Completed),
            engine: Some(EngineKind::Postgres),
            image: Some("postgres:16".into()),
            ..Default::default()
        });
        backup
    }

    fn orders() -> Database {
        let mut spec = DatabaseSpec::new(Size::Medium, "postgres:17").with_engine(EngineKind::Postgres);
        spec.storage = Some(Box::new(Storage {
            size: Some("20Gi".into()),
            storage_class_name: Some("fast".into()),
            reclaim_policy: Some(ReclaimPolicy::Retain),
        }));
        Database::new("orders", spec)
    }

    #[test]
    fn a_restore_is_like_the_backed_up_database_with_a_volume_of_its_own() {
        let db = restored_database("copy", &completed(), Some(&orders()), None, None).unwrap();
        assert_eq!(
            serde_json::to_value(&db).unwrap()["spec"],
            json!({"size": "medium", "image": "postgres:17", "engine": "postgres",
                   "storage": {"size": "20Gi", "storageClassName": "fast"},
                   "restoreFrom": {"backup": "nightly"}})
        );
        assert_eq!(db.metadata.name.as_deref(), Some("copy"));
    }

    #[test]
    fn without_its_database_a_restore_takes_the_engine_and_image_the_backup_recorded() {
        let db = restored_database("copy", &completed(), None, None, None).unwrap();
        assert_eq!(
            serde_json::to_value(&db).unwrap()["spec"],
            json!({"size": "small", "image": "postgres:16", "engine": "postgres", "restoreFrom": {"backup": "nightly"}})
        );
        let chosen = restored_database("copy", &completed(), Some(&orders()), Some("postgres:18"), Some(Size::Large));
        let chosen = chosen.unwrap();
        assert_eq!((chosen.spec.image.as_str(), chosen.spec.size), ("postgres:18", Size::Large));
    }

    #[test]
    fn a_failed_backup_or_one_that_says_nothing_is_not_restored() {
        let mut failed = completed();
        failed.status.as_mut().unwrap().phase = Some(BackupPhase::Failed);
        let err = restored_database("copy", &failed, None, None, None).unwrap_err();
        assert_eq!(err.to_string(), "DatabaseBackup nightly failed: it has no dump to restore");
        let unknown = crate::api::backup("nightly", "orders");
        let err = restored_database("copy", &unknown, None, None, None).unwrap_err();
        assert!(err.to_string().contains("does not say its engine"), "{err}");
    }

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    #[test]
    fn waiting_for_a_restore_ends_at_ready_or_at_a_restore_that_cannot_be() {
        let mut db = Database::new("copy", DatabaseSpec::new(Size::Small, "postgres:17"));
        db.status = Some(DatabaseStatus {
            phase: Some(Phase::Pending),
            conditions: vec![condition("Ready", "False", "DeploymentNotReady", "waiting")],
            ..Default::default()
        });
        assert_eq!(look(&db), Look::Waiting("Database copy: Pending: DeploymentNotReady: waiting".into()));
        db.status.as_mut().unwrap().conditions.push(condition("Degraded", "True", "RestoreFailed", "the dump is bad"));
        assert_eq!(look(&db), Look::Failed("Database copy cannot be restored: RestoreFailed: the dump is bad".into()));
        db.status = Some(DatabaseStatus {
            phase: Some(Phase::Ready),
            restored_from: Some("nightly".into()),
            ..Default::default()
        });
        assert_eq!(look(&db), Look::Done("Database copy: Ready, restored from nightly".into()));
    }
}
