//! A Database's restore (`spec.restoreFrom.backup`), decided from the cache: until the named
//! backup has Completed, the Database's pod is not created (`Pending`, reason
//! `WaitingForBackup`); a backup that failed, of another engine, or of a newer major version
//! than the Database's image (an older server cannot read what a newer one dumped:
//! `pg_restore` 15 refuses an archive of `pg_dump` 17) is reported (`Degraded`), and so is a
//! data claim that was there before the Database (a retained one: the server
//! would find its data and skip the load, and the restore would be recorded on data it never
//! touched), before the Database writes anything. A backup kept by `reclaimPolicy: Retain`
//! whose DatabaseBackup was deleted restores from its claim, under the backup's name: the
//! claim's labels say its engine and major version, which are checked the same way.
//! Then the pod gets the restore's init container ([`crate::resources::restore`]), which
//! readies the dump for the server's first start: the server loads it before it serves. Once
//! that server has been Ready, `status.restoredFrom` says so, and the init container and the
//! backup's claim leave the pod: a later deletion of the backup does not stop the Database
//! from restarting.

use operator_runtime::informer::{Store, key_of};

use super::upgrade;
use crate::api::{BackupPhase, Bucket, Database, DatabaseBackup, index};
use crate::engine;
use crate::resources::bucket::Stored;
pub(crate) use crate::resources::restore::Source;
use crate::resources::view::PersistentVolumeClaimView;
use crate::resources::{backup, claim};

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
    /// Restore from the backup's claim or bucket.
    From {
        /// The backup's name.
        backup: String,
        /// Where the dump is.
        source: Source,
    },
}

/// Where `db` stands with its restore, given the backups and the claims in the cache.
pub(crate) fn restore(
    db: &Database,
    backups: &Store<DatabaseBackup>,
    claims: &Store<PersistentVolumeClaimView>,
    tools_image: Option<&str>,
) -> Restore {
    let restore = from_backup(db, backups, claims, tools_image.unwrap_or_default());
    if let Restore::From { source: Source::Bucket { tools_image, .. }, .. } = &restore
        && tools_image.is_empty()
    {
        return Restore::Impossible {
            reason: "NoBackupImage",
            message: "the backup is in a bucket, and the operator runs without --backup-image (BACKUP_IMAGE), the \
                      image that fetches it (its own): nothing was restored"
                .into(),
        };
    }
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

/// Where `db` stands with its restore, given the backups, and the claims that outlived theirs.
fn from_backup(
    db: &Database,
    backups: &Store<DatabaseBackup>,
    claims: &Store<PersistentVolumeClaimView>,
    tools_image: &str,
) -> Restore {
    let Some(from) = &db.spec.restore_from else { return Restore::None };
    if db.status.as_ref().is_some_and(|s| s.restored_from.is_some()) {
        return Restore::None;
    }
    let name = &from.backup;
    let namespace = db.metadata.namespace.as_deref().unwrap_or_default();
    let in_bucket = |bucket: &Bucket| Source::Bucket {
        stored: Stored { bucket: bucket.clone(), folder: bucket.folder(namespace, name) },
        tools_image: tools_image.to_string(),
    };
    let Some(backup) = backups.get(&format!("{namespace}/{name}")) else {
        // Not in the namespace: in the bucket named (a disaster recovery), else in a kept claim.
        return match &from.bucket {
            Some(bucket) => Restore::From { backup: name.clone(), source: in_bucket(bucket) },
            None => from_kept_claim(db, name, claims),
        };
    };
    let status = backup.status.clone().unwrap_or_default();
    match status.phase {
        Some(BackupPhase::Completed) => {
            let dumped = Dump {
                engine: status.engine.map(|e| engine::of(e).name()),
                major: status.image.as_deref().zip(db.spec.engine).and_then(|(i, e)| engine::major(engine::of(e), i)),
                image: status.image.as_deref(),
            };
            let source = match &backup.spec.bucket {
                Some(bucket) => in_bucket(bucket),
                None => Source::Claim(status.claim_name.unwrap_or_else(|| name.clone())),
            };
            loadable(db, name, &dumped).unwrap_or(Restore::From { backup: name.clone(), source })
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

/// A backup whose DatabaseBackup is gone restores from the claim it kept (`reclaimPolicy:
/// Retain`), which its labels tell ([`backup::kept_dump`]); without one, the restore waits for
/// the backup.
fn from_kept_claim(db: &Database, name: &str, claims: &Store<PersistentVolumeClaimView>) -> Restore {
    let namespace = db.metadata.namespace.as_deref().unwrap_or_default();
    let kept = claims.get(&format!("{namespace}/{name}")).and_then(|claim| backup::kept_dump(&claim, name));
    let Some(kept) = kept else {
        return Restore::Waiting(format!("waiting for DatabaseBackup {name:?}, which does not exist"));
    };
    let dumped = Dump { engine: Some(kept.engine.as_str()), major: kept.major, image: None };
    loadable(db, name, &dumped)
        .unwrap_or_else(|| Restore::From { backup: name.to_string(), source: Source::Claim(name.to_string()) })
}

/// What is known of a completed dump: the engine dumped (its name), the major version of the
/// image that dumped it and, while its DatabaseBackup is there, that image.
struct Dump<'a> {
    engine: Option<&'a str>,
    major: Option<String>,
    image: Option<&'a str>,
}

/// Why `dumped` (backup `name`'s) cannot load into `db`, if it cannot: another engine, or a
/// newer major version than `db`'s image (an older server cannot read a newer one's dump). A
/// tag that names no version (`latest`, a digest) is not refused here, and the engine's own
/// tool then refuses what it cannot read.
fn loadable(db: &Database, name: &str, dumped: &Dump<'_>) -> Option<Restore> {
    let serving = db.spec.engine.map(engine::of);
    if dumped.engine != serving.map(|e| e.name()) {
        return Some(Restore::Impossible {
            reason: "RestoreEngineMismatch",
            message: format!(
                "DatabaseBackup {name:?} is a dump of a {} database, and this Database's engine is {}: a dump restores \
                 into the same engine only",
                dumped.engine.unwrap_or("generic"),
                serving.map_or("none", |e| e.name()),
            ),
        });
    }
    let (dumped_major, serving_major) = (dumped.major.as_deref()?, engine::major(serving?, &db.spec.image)?);
    if !upgrade::newer(dumped_major, &serving_major) {
        return None;
    }
    let by = dumped.image.map_or_else(
        || format!("major version {dumped_major}"),
        |image| format!("{image} (major version {dumped_major})"),
    );
    Some(Restore::Impossible {
        reason: "RestoreFromNewerMajor",
        message: format!(
            "DatabaseBackup {name:?} was dumped from {by}, and this Database runs {} (major version {serving_major}): \
             an older server cannot load a newer one's dump, so nothing was restored. Set spec.image to major \
             version {dumped_major} or later",
            db.spec.image,
        ),
    })
}

/// Maps a DatabaseBackup to the Databases that wait for it: its own (a backup before an
/// upgrade) and those restored from it.
pub(crate) fn databases_waiting_for(
    databases: Store<Database>,
) -> impl Fn(&DatabaseBackup) -> Vec<String> + Send + Sync + 'static {
    move |backup: &DatabaseBackup| {
        let mut keys = index::by_database(backup);
        keys.extend(restoring_from(&databases, backup));
        keys
    }
}

/// Maps a claim to the Databases restored from a backup of its name: a backup's claim that
/// outlived its DatabaseBackup is their source.
pub(crate) fn databases_restoring_from(
    databases: Store<Database>,
) -> impl Fn(&PersistentVolumeClaimView) -> Vec<String> + Send + Sync + 'static {
    move |claim: &PersistentVolumeClaimView| restoring_from(&databases, claim)
}

/// The keys of the Databases restored from a backup named as `source` is.
fn restoring_from<K: kube_core::Resource>(databases: &Store<Database>, source: &K) -> Vec<String> {
    databases.by_index(index::BY_RESTORE_SOURCE, &key_of(source)).iter().map(|db| key_of(db.as_ref())).collect()
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
        db.spec.restore_from = Some(Box::new(RestoreFrom { backup: "nightly".into(), bucket: None }));
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
        assert!(matches!(restore(&db, &completed(), &none, None), Restore::From { .. }));
        let own = Store::from_objects([claim(Some("uid-2"))]);
        assert!(matches!(restore(&db, &completed(), &own, None), Restore::From { .. }));
    }

    /// The claim kept by `reclaimPolicy: Retain` holds an earlier Database's data: the server
    /// would skip the load and the restore would be recorded on data it never touched.
    #[test]
    fn a_restore_into_a_claim_that_was_there_before_the_database_is_refused() {
        let db = restoring("uid-2");
        for earlier in [claim(Some("uid-1")), claim(None)] {
            let claims = Store::from_objects([earlier]);
            match restore(&db, &completed(), &claims, None) {
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
        match restore(&db, &completed(), &none, None) {
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
            assert!(matches!(restore(&db, &completed(), &none, None), Restore::From { .. }), "{image}");
        }
    }

    /// Once a retained backup's DatabaseBackup is deleted, its name restores from the claim it
    /// kept, checked as the backup was: engine and major version.
    #[test]
    fn a_deleted_retained_backup_restores_from_the_claim_it_kept() {
        use crate::api::ReclaimPolicy::Retain;
        use crate::resources::backup::tests::cached_claim;
        let db = restoring("uid-2");
        let none = Store::<DatabaseBackup>::new();
        let kept = Store::from_objects([cached_claim("uid-b", Some(Retain), EngineKind::Postgres, "postgres:17.2")]);
        let from = Restore::From { backup: "nightly".into(), source: Source::Claim("nightly".into()) };
        assert_eq!(restore(&db, &none, &kept, None), from);
        // While the DatabaseBackup is there, it decides.
        assert_eq!(restore(&db, &completed(), &kept, None), from);

        let owned = Store::from_objects([cached_claim("uid-b", None, EngineKind::Postgres, "postgres:17.2")]);
        assert!(matches!(restore(&db, &none, &owned, None), Restore::Waiting(m) if m.contains("does not exist")));
        let redis = Store::from_objects([cached_claim("uid-b", Some(Retain), EngineKind::Redis, "redis:8.0")]);
        assert!(matches!(restore(&db, &none, &redis, None),
            Restore::Impossible { reason: "RestoreEngineMismatch", message } if message.contains("a redis database")));
        let newer = Store::from_objects([cached_claim("uid-b", Some(Retain), EngineKind::Postgres, "postgres:18")]);
        match restore(&db, &none, &newer, None) {
            Restore::Impossible { reason, message } => {
                assert_eq!(reason, "RestoreFromNewerMajor");
                assert!(message.contains("dumped from major version 18"), "{message}");
                assert!(message.contains("postgres:17 (major version 17)"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_backup_in_a_bucket_restores_from_it_also_when_its_databasebackup_is_elsewhere() {
        let bucket =
            crate::api::Bucket { name: "backups".into(), prefix: Some("old-shop".into()), ..Default::default() };
        let mut db = restoring("uid-2");
        db.spec.restore_from.as_mut().unwrap().bucket = Some(bucket.clone());
        let none = Store::<PersistentVolumeClaimView>::new();
        // No DatabaseBackup here (its namespace is gone): the bucket, at prefix/backup.
        let from_bucket = |image: &str| Restore::From {
            backup: "nightly".into(),
            source: Source::Bucket {
                stored: Stored { bucket: bucket.clone(), folder: "old-shop/nightly".into() },
                tools_image: image.into(),
            },
        };
        assert_eq!(restore(&db, &Store::new(), &none, Some("operator:1")), from_bucket("operator:1"));
        assert!(matches!(
            restore(&db, &Store::new(), &none, None),
            Restore::Impossible { reason: "NoBackupImage", .. }
        ));
        // A Completed DatabaseBackup in the namespace that went to a bucket restores from it.
        let mut completed = (*completed().get("shop/nightly").unwrap()).clone();
        completed.spec.bucket = Some(bucket.clone());
        db.spec.restore_from.as_mut().unwrap().bucket = None;
        assert_eq!(
            restore(&db, &Store::from_objects([completed]), &none, Some("operator:1")),
            from_bucket("operator:1")
        );
    }

    #[test]
    fn a_database_restored_already_is_not_refused_for_its_own_claim() {
        let mut db = restoring("uid-2");
        db.status = Some(crate::api::DatabaseStatus { restored_from: Some("nightly".into()), ..Default::default() });
        let claims = Store::from_objects([claim(Some("uid-1"))]);
        assert_eq!(restore(&db, &completed(), &claims, None), Restore::None);
    }
}
