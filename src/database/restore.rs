//! A Database's restore (`spec.restoreFrom.backup`), decided from the cache: until the named
//! backup has Completed, the Database's pod is not created (`Pending`, reason
//! `WaitingForBackup`); a backup that failed, of another engine, or of a newer major version
//! than the Database's image (an older server cannot read what a newer one dumped:
//! `pg_restore` 15 refuses an archive of `pg_dump` 17) is reported (`Degraded`), and so is a
//! data claim that was there before the Database (a retained one: the server
//! would find its data and skip the load, and the restore would be recorded on data it never
//! touched), before the Database writes anything.
//! Then the pod gets the restore's init container ([`crate::resources::restore`]), which
//! readies the dump for the server's first start: the server loads it before it serves. Once
//! that server has been Ready, `status.restoredFrom` says so, and the init container and the
//! backup's claim leave the pod: a later deletion of the backup does not stop the Database
//! from restarting.

use operator_runtime::informer::{Store, key_of};

use super::upgrade;
use crate::api::{BackupPhase, Database, DatabaseBackup, index};
use crate::engine;
use crate::resources::claim;
use crate::resources::view::PersistentVolumeClaimView;

/// Where a Database stands with its restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Restore {
    /// Nothing to restore (no `restoreFrom`, or restored already).
    None,
    /// The backup is not there or not Completed yet: the pod must wait.
    Waiting(String),
    /// The backup cannot be restored (failed, another engine).
    Impossible {
        /// The condition reason.
        reason: &'static str,
        /// Why, for a kubectl user.
        message: String,
    },
    /// Restore from the backup's claim.
    From {
        /// The backup's name.
        backup: String,
        /// The claim holding the dump.
        claim: String,
    },
}

/// Where `db` stands with its restore, given the backups and the claims in the cache.
pub(crate) fn restore(
    db: &Database,
    backups: &Store<DatabaseBackup>,
    claims: &Store<PersistentVolumeClaimView>,
) -> Restore {
    let restore = from_backup(db, backups);
    let Restore::From { .. } = restore else { return restore };
    let Some(existing) = retained_claim(db, claims) else { return restore };
    Restore::Impossible {
        reason: "RestoreTargetNotEmpty",
        message: format!(
            "the data claim {existing:?} was there before this Database (kept by reclaimPolicy Retain) and may hold \
             data: a restore loads into a new, empty volume only, so nothing was restored. Delete this Database and \
             the claim to restore, or create the Database without spec.restoreFrom to serve the data the claim holds"
        ),
    }
}

/// The name of `db`'s data claim, when one was there before `db` ([`claim::predates`]).
fn retained_claim(db: &Database, claims: &Store<PersistentVolumeClaimView>) -> Option<String> {
    let name = claim::claim_name(db);
    let namespace = db.metadata.namespace.as_deref().unwrap_or_default();
    let live = claims.get(&format!("{namespace}/{name}"))?;
    claim::predates(&live, db).then_some(name)
}

/// Where `db` stands with its restore, given the backups alone.
fn from_backup(db: &Database, backups: &Store<DatabaseBackup>) -> Restore {
    let Some(from) = &db.spec.restore_from else { return Restore::None };
    if db.status.as_ref().is_some_and(|s| s.restored_from.is_some()) {
        return Restore::None;
    }
    let name = &from.backup;
    let namespace = db.metadata.namespace.as_deref().unwrap_or_default();
    let Some(backup) = backups.get(&format!("{namespace}/{name}")) else {
        return Restore::Waiting(format!("waiting for DatabaseBackup {name:?}, which does not exist"));
    };
    let status = backup.status.clone().unwrap_or_default();
    match status.phase {
        Some(BackupPhase::Completed) if status.engine != db.spec.engine => Restore::Impossible {
            reason: "RestoreEngineMismatch",
            message: format!(
                "DatabaseBackup {name:?} is a dump of a {} database, and this Database's engine is {}: a dump restores \
                 into the same engine only",
                status.engine.map_or("generic".to_string(), |e| format!("{e:?}").to_lowercase()),
                db.spec.engine.map_or("none".to_string(), |e| format!("{e:?}").to_lowercase()),
            ),
        },
        Some(BackupPhase::Completed)
            if let Some((dumped, serving)) = newer_major(db, status.image.as_deref().unwrap_or_default()) =>
        {
            Restore::Impossible {
                reason: "RestoreFromNewerMajor",
                message: format!(
                    "DatabaseBackup {name:?} was dumped from {} (major version {dumped}), and this Database runs {} \
                     (major version {serving}): an older server cannot load a newer one's dump, so nothing was \
                     restored. Set spec.image to major version {dumped} or later",
                    status.image.as_deref().unwrap_or_default(),
                    db.spec.image,
                ),
            }
        }
        Some(BackupPhase::Completed) => {
            Restore::From { backup: name.clone(), claim: status.claim_name.unwrap_or_else(|| name.clone()) }
        }
        Some(BackupPhase::Failed) => Restore::Impossible {
            reason: "RestoreFailed",
            message: format!(
                "DatabaseBackup {name:?} failed ({}): there is nothing to restore; delete this Database and create it \
                 again from another backup",
                status.message.unwrap_or_default()
            ),
        },
        phase => Restore::Waiting(format!(
            "waiting for DatabaseBackup {name:?} to complete (now {})",
            phase.map_or("Pending".to_string(), |p| p.to_string())
        )),
    }
}

/// The major versions (the dump's, `db`'s) when `db`'s image is of an older major version
/// than `dumped_by`, the image the dump ran with. Both tags must name a version: one that
/// names none (`latest`, a digest) is not refused here, and the engine's own tool then
/// refuses what it cannot read.
fn newer_major(db: &Database, dumped_by: &str) -> Option<(String, String)> {
    let engine = engine::of(db.spec.engine?);
    let dumped = upgrade::major(engine, dumped_by)?;
    let serving = upgrade::major(engine, &db.spec.image)?;
    upgrade::newer(&dumped, &serving).then_some((dumped, serving))
}

/// Maps a DatabaseBackup to the Databases that wait for it: its own (a backup before an
/// upgrade) and those restored from it.
pub(crate) fn databases_waiting_for(
    databases: Store<Database>,
) -> impl Fn(&DatabaseBackup) -> Vec<String> + Send + Sync + 'static {
    move |backup: &DatabaseBackup| {
        let mut keys = index::by_database(backup);
        keys.extend(databases.by_index(index::BY_RESTORE_SOURCE, &key_of(backup)).iter().map(|db| key_of(db.as_ref())));
        keys
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::api::{BackupStatus, DatabaseSpec, EngineKind, RestoreFrom, Size};

    fn restoring(uid: &str) -> Database {
        let mut db =
            Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
        db.metadata.namespace = Some("shop".into());
        db.metadata.uid = Some(uid.into());
        db.spec.restore_from = Some(Box::new(RestoreFrom { backup: "nightly".into() }));
        db
    }

    fn completed() -> Store<DatabaseBackup> {
        let mut backup = crate::api::backup("nightly", "orders");
        backup.metadata.namespace = Some("shop".into());
        backup.status = Some(BackupStatus {
            phase: Some(BackupPhase::Completed),
            engine: Some(EngineKind::Postgres),
            image: Some("postgres:17.2".into()),
            ..Default::default()
        });
        Store::from_objects([backup])
    }

    fn claim(uid: Option<&str>) -> PersistentVolumeClaimView {
        let mut labels = std::collections::BTreeMap::from([("app".to_string(), "orders".to_string())]);
        if let Some(uid) = uid {
            labels.insert(crate::resources::meta::DATABASE_UID_LABEL.into(), uid.into());
        }
        let metadata = ObjectMeta {
            name: Some("orders-data".into()),
            namespace: Some("shop".into()),
            labels: Some(labels),
            ..Default::default()
        };
        PersistentVolumeClaimView { metadata, ..Default::default() }
    }

    #[test]
    fn a_restore_goes_into_a_claim_of_its_own_or_a_new_one() {
        let db = restoring("uid-2");
        let none = Store::<PersistentVolumeClaimView>::new();
        assert!(matches!(restore(&db, &completed(), &none), Restore::From { .. }));
        let own = Store::from_objects([claim(Some("uid-2"))]);
        assert!(matches!(restore(&db, &completed(), &own), Restore::From { .. }));
    }

    /// The claim kept by `reclaimPolicy: Retain` holds an earlier Database's data: the server
    /// would skip the load and the restore would be recorded on data it never touched.
    #[test]
    fn a_restore_into_a_claim_that_was_there_before_the_database_is_refused() {
        let db = restoring("uid-2");
        for earlier in [claim(Some("uid-1")), claim(None)] {
            let claims = Store::from_objects([earlier]);
            match restore(&db, &completed(), &claims) {
                Restore::Impossible { reason, message } => {
                    assert_eq!(reason, "RestoreTargetNotEmpty");
                    assert!(
                        message.contains("\"orders-data\"") && message.contains("nothing was restored"),
                        "{message}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_dump_of_a_newer_major_version_is_refused_and_an_older_one_restores() {
        let none = Store::<PersistentVolumeClaimView>::new();
        let mut db = restoring("uid-2");
        db.spec.image = "postgres:15.10-bookworm".into();
        match restore(&db, &completed(), &none) {
            Restore::Impossible { reason, message } => {
                assert_eq!(reason, "RestoreFromNewerMajor");
                assert!(message.contains("postgres:17.2 (major version 17)"), "{message}");
                assert!(message.contains("postgres:15.10-bookworm (major version 15)"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // The same major, a newer one, or a tag that names no version: loaded.
        for image in ["postgres:17", "postgres:18.1", "postgres:latest"] {
            db.spec.image = image.into();
            assert!(matches!(restore(&db, &completed(), &none), Restore::From { .. }), "{image}");
        }
    }

    #[test]
    fn a_database_restored_already_is_not_refused_for_its_own_claim() {
        let mut db = restoring("uid-2");
        db.status = Some(crate::api::DatabaseStatus { restored_from: Some("nightly".into()), ..Default::default() });
        let claims = Store::from_objects([claim(Some("uid-1"))]);
        assert_eq!(restore(&db, &completed(), &claims), Restore::None);
    }
}
