//! `kubectl database backup DATABASE`: a DatabaseBackup now, named as the schedule names its
//! backups (`<database>-<UTC time>`), and with `--wait` its progress until it is Completed
//! (and verified, with `--verify`).

use k8s_openapi::jiff::Timestamp;
use kube_client::Api;
use kube_client::api::PostParams;

use super::args::BackupArgs;
use super::error::Error;
use super::target::{Look, Target, wait};
use crate::api::{BackupPhase, Bucket, Database, DatabaseBackup, VerificationResult};
use crate::resources::meta::derived_name;

/// The name of a backup of `database` taken at `now`: `<database>-<YYYYMMDDhhmmss>` in UTC,
/// as the schedule names its own, within the 63 characters a Job's name may have.
pub(crate) fn default_name(database: &str, now: Timestamp) -> String {
    derived_name(database, &now.strftime("%Y%m%d%H%M%S").to_string())
}

/// The DatabaseBackup `name` of `database`: verified when `verify`, in `bucket` when given.
pub(crate) fn new_backup(name: &str, database: &str, verify: bool, bucket: Option<Bucket>) -> DatabaseBackup {
    let mut backup = crate::api::backup(name, database);
    backup.spec.verify = verify.then_some(true);
    backup.spec.bucket = bucket;
    backup
}

/// Where `backup` stands, as `--wait` sees it: waiting (with a line of progress), done or
/// failed. With `verify`, Completed is done only once the verification passed.
pub(crate) fn look(backup: &DatabaseBackup, verify: bool) -> Look {
    let name = backup.metadata.name.as_deref().unwrap_or_default();
    let status = backup.status.clone().unwrap_or_default();
    let message = status.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
    let count = status.count.map(|c| format!(", {c} rows or keys")).unwrap_or_default();
    let place = status
        .location
        .clone()
        .or(status.claim_name.as_ref().map(|claim| format!("claim {claim}")))
        .map(|place| format!(" in {place}"))
        .unwrap_or_default();
    match status.phase {
        None => Look::Waiting(format!("DatabaseBackup {name}: created, waiting for the operator")),
        Some(BackupPhase::Failed) => Look::Failed(format!("DatabaseBackup {name} failed{message}")),
        Some(BackupPhase::Completed) => {
            let completed = format!("DatabaseBackup {name}: Completed{place}{count}");
            if !verify {
                return Look::Done(completed);
            }
            let verified = status.verified.unwrap_or_default();
            let said = verified.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
            let seconds = verified.restore_seconds.map(|s| format!(", restored in {s}s")).unwrap_or_default();
            match verified.result {
                Some(VerificationResult::Passed) => Look::Done(format!("{completed}; verified{seconds}{said}")),
                Some(VerificationResult::Failed) => {
                    Look::Failed(format!("DatabaseBackup {name} Completed and its verification failed{said}"))
                }
                None => Look::Waiting(format!("{completed}; verifying (restoring it into {name}-verify)")),
            }
        }
        Some(phase) => Look::Waiting(format!("DatabaseBackup {name}: {phase}{message}")),
    }
}

/// Creates the backup, and with `--wait` waits for it.
pub(crate) async fn run(target: &Target, args: BackupArgs) -> Result<(), Error> {
    let ns = &target.namespace;
    let databases: Api<Database> = Api::namespaced(target.client.clone(), ns);
    let backups: Api<DatabaseBackup> = Api::namespaced(target.client.clone(), ns);
    let database = databases
        .get_opt(&args.database)
        .await
        .map_err(|e| Error::api(format!("getting Database {ns}/{}", args.database), e))?
        .ok_or_else(|| Error::NotFound { kind: "Database", name: args.database.clone(), namespace: ns.clone() })?;
    if database.spec.engine.is_none() {
        return Err(Error::Refused(format!(
            "Database {} has no spec.engine: only a Database with an engine can be backed up",
            args.database
        )));
    }
    let bucket = match &args.bucket_from {
        None => None,
        Some(from) => {
            let source = backups
                .get_opt(from)
                .await
                .map_err(|e| Error::api(format!("getting DatabaseBackup {ns}/{from}"), e))?
                .ok_or_else(|| Error::NotFound { kind: "DatabaseBackup", name: from.clone(), namespace: ns.clone() })?;
            let bucket = source.spec.bucket.ok_or_else(|| {
                Error::Refused(format!(
                    "DatabaseBackup {from} keeps its dump in a claim, not a bucket: --bucket-from needs one in a bucket"
                ))
            })?;
            Some(bucket)
        }
    };
    let name = args.name.clone().unwrap_or_else(|| default_name(&args.database, Timestamp::now()));
    let backup = new_backup(&name, &args.database, args.verify, bucket);
    backups.create(&PostParams::default(), &backup).await.map_err(|e| {
        let err = Error::api(format!("creating DatabaseBackup {ns}/{name}"), e);
        if err.is_already_exists() {
            Error::Refused(format!("DatabaseBackup {name} exists already: choose another --name"))
        } else {
            err
        }
    })?;
    println!("databasebackup.example.com/{name} created");
    if !args.wait {
        return Ok(());
    }
    let hint = format!("kubectl describe databasebackup {name} -n {ns} shows where it stands");
    let last = wait(&format!("DatabaseBackup {name}"), &hint, args.timeout, || async {
        let backup =
            backups.get(&name).await.map_err(|e| Error::api(format!("getting DatabaseBackup {ns}/{name}"), e))?;
        Ok(look(&backup, args.verify))
    })
    .await?;
    println!("{last}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BackupStatus, Verification};

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_backup_is_named_after_its_database_and_the_utc_time_as_scheduled_ones_are() {
        assert_eq!(default_name("orders", at("2025-01-02T03:04:05Z")), "orders-20250102030405");
        let long = "a".repeat(60);
        let name = default_name(&long, at("2025-01-02T03:04:05Z"));
        assert!(name.len() <= 63 && name.ends_with("-20250102030405"), "{name}");
    }

    #[test]
    fn a_new_backup_asks_for_verification_only_when_told() {
        let plain = new_backup("b", "orders", false, None);
        assert_eq!((plain.spec.database.as_str(), plain.spec.verify), ("orders", None));
        let verified = new_backup("b", "orders", true, None);
        assert_eq!(verified.spec.verify, Some(true));
        assert_eq!(
            serde_json::to_value(&verified).unwrap()["spec"],
            serde_json::json!({"database": "orders", "verify": true})
        );
    }

    fn backup(status: BackupStatus) -> DatabaseBackup {
        let mut backup = new_backup("nightly", "orders", true, None);
        backup.status = Some(status);
        backup
    }

    #[test]
    fn waiting_says_each_phase_and_ends_at_completed_or_at_its_verification() {
        let pending = backup(BackupStatus { phase: Some(BackupPhase::Pending), ..Default::default() });
        assert_eq!(look(&pending, false), Look::Waiting("DatabaseBackup nightly: Pending".into()));
        let completed = BackupStatus {
            phase: Some(BackupPhase::Completed),
            claim_name: Some("nightly".into()),
            count: Some(1000),
            ..Default::default()
        };
        assert_eq!(
            look(&backup(completed.clone()), false),
            Look::Done("DatabaseBackup nightly: Completed in claim nightly, 1000 rows or keys".into())
        );
        assert!(matches!(look(&backup(completed.clone()), true), Look::Waiting(line) if line.contains("verifying")));
        let passed = BackupStatus {
            verified: Some(Verification {
                result: Some(VerificationResult::Passed),
                restore_seconds: Some(12),
                ..Default::default()
            }),
            ..completed.clone()
        };
        assert!(matches!(look(&backup(passed), true), Look::Done(line) if line.ends_with("verified, restored in 12s")));
        let failed = BackupStatus {
            verified: Some(Verification {
                result: Some(VerificationResult::Failed),
                message: Some("holds 0 rows, the dump 1000".into()),
                ..Default::default()
            }),
            ..completed
        };
        assert_eq!(
            look(&backup(failed), true),
            Look::Failed(
                "DatabaseBackup nightly Completed and its verification failed: holds 0 rows, the dump 1000".into()
            )
        );
    }

    #[test]
    fn a_failed_backup_says_the_operator_s_message() {
        let failed = backup(BackupStatus {
            phase: Some(BackupPhase::Failed),
            message: Some("the dump Job failed 3 times".into()),
            ..Default::default()
        });
        assert_eq!(
            look(&failed, false),
            Look::Failed("DatabaseBackup nightly failed: the dump Job failed 3 times".into())
        );
    }
}
