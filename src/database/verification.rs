//! The Database side of verified backups: its condition `BackupVerified`, from the newest
//! finished verification among its DatabaseBackups in the shared cache (the backup controller
//! verifies; see `crate::backup`). `True` when that verification passed, `False` with its
//! words when it failed, absent while none of its backups has been verified. A change to
//! `False` is also a Warning event on the Database (`BackupVerificationFailed`), once.

use operator_runtime::conditions::{self, State};
use operator_runtime::informer::{Store, key_of};

use super::reconcile::{DatabaseReconciler, Pass};
use crate::api::{Database, DatabaseBackup, DatabaseStatus, VerificationResult, index};

/// The condition that reports the verifications.
const CONDITION: &str = "BackupVerified";

impl DatabaseReconciler {
    /// Sets `status`'s condition `BackupVerified` from the cached backups, and reports a new
    /// failure.
    pub(super) fn report_verification(&self, pass: &mut Pass<'_>, status: &mut DatabaseStatus) {
        let Some(state) = state(pass.db, &self.stores.backups) else { return };
        let previous = pass.db.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
        if !state.status && !conditions::reports(previous, CONDITION, &state) {
            pass.report.warning("BackupVerificationFailed", state.message.clone());
        }
        let generation = status.observed_generation;
        conditions::set(&mut status.conditions, previous, CONDITION, state, generation, &pass.now);
    }
}

/// The condition's state for `db`: its newest finished verification's.
fn state(db: &Database, backups: &Store<DatabaseBackup>) -> Option<State> {
    let newest = backups
        .by_index(index::BY_DATABASE, &key_of(db))
        .into_iter()
        .filter_map(|backup| {
            let verified = backup.status.as_ref()?.verified.as_ref()?;
            Some((verified.time.clone()?, verified.result?, verified.message.clone(), backup.metadata.name.clone()))
        })
        .max_by(|a, b| a.0.cmp(&b.0))?;
    let (_, result, message, name) = newest;
    let message = format!("DatabaseBackup {}: {}", name.unwrap_or_default(), message.unwrap_or_default());
    Some(match result {
        VerificationResult::Passed => State::yes("Verified", message),
        VerificationResult::Failed => State::no("VerificationFailed", message),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::{BackupStatus, DatabaseSpec, Size, Verification};

    fn verified(name: &str, at: i64, result: VerificationResult) -> DatabaseBackup {
        let mut backup = crate::api::backup(name, "orders");
        backup.metadata.namespace = Some("shop".into());
        backup.status = Some(BackupStatus {
            verified: Some(Verification {
                result: Some(result),
                time: Some(Time(Timestamp::from_second(at).unwrap())),
                message: Some(format!("{result} at {at}")),
                ..Default::default()
            }),
            ..Default::default()
        });
        backup
    }

    fn store(backups: Vec<DatabaseBackup>) -> Store<DatabaseBackup> {
        Store::from_objects(backups).with_index(index::BY_DATABASE, Arc::new(index::by_database))
    }

    #[test]
    fn the_newest_verification_decides_the_condition() {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
        db.metadata.namespace = Some("shop".into());
        assert_eq!(state(&db, &store(Vec::new())), None, "nothing verified: no condition");

        let mut unverified = crate::api::backup("c", "orders");
        unverified.metadata.namespace = Some("shop".into());
        let backups = store(vec![
            verified("a", 100, VerificationResult::Passed),
            verified("b", 200, VerificationResult::Failed),
            unverified,
        ]);
        let failed = state(&db, &backups).unwrap();
        assert_eq!((failed.status, failed.reason.as_str()), (false, "VerificationFailed"));
        assert_eq!(failed.message, "DatabaseBackup b: Failed at 200");

        let later =
            store(vec![verified("b", 200, VerificationResult::Failed), verified("d", 300, VerificationResult::Passed)]);
        assert!(state(&db, &later).unwrap().status, "a later one passed");
    }
}
