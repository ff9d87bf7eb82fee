//! A Database's restore (`spec.restoreFrom.backup`), decided from the cache: until the named
//! backup has Completed, the Database's pod is not created (`Pending`, reason
//! `WaitingForBackup`); a backup that failed, or of another engine, is reported (`Degraded`).
//! Then the pod gets the restore's init container ([`crate::resources::restore`]), which
//! readies the dump for the server's first start: the server loads it before it serves. Once
//! that server has been Ready, `status.restoredFrom` says so, and the init container and the
//! backup's claim leave the pod: a later deletion of the backup does not stop the Database
//! from restarting.

use operator_runtime::informer::{Store, key_of};

use crate::api::{BackupPhase, Database, DatabaseBackup, index};

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

/// Where `db` stands with its restore, given the backups in the cache.
pub(crate) fn restore(db: &Database, backups: &Store<DatabaseBackup>) -> Restore {
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
