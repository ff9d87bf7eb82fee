//! The backup sections of a Database: `spec.backup` (backups on a schedule, a number kept) and
//! `spec.restoreFrom` (the backup a new Database starts from). What the operator does with
//! them is `crate::database::schedule` and `crate::database::restore`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Bucket;

/// Backups of a Database on a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct BackupSchedule {
    /// When to take a backup, in cron syntax: five fields (minute hour day-of-month month
    /// day-of-week, as a CronJob's), or six with seconds first. Times are UTC.
    #[schemars(length(min = 1, max = 128))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.split(' ').filter(f, f != '').size() in [5, 6]",
         "message": "spec.backup.schedule must have five fields (minute hour day-of-month month day-of-week), or six with seconds first"},
    ]))]
    pub schedule: String,

    /// How many Completed scheduled backups to keep, and apart how many Failed ones: the
    /// oldest beyond it are deleted, so failing dumps never delete a good backup. A backup
    /// that a Database restores from is never deleted. Default 7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // schemars names u32 `uint32`, a format Kubernetes does not know (`kubectl explain` warns
    // about it); within 1..=1000 it is an int32.
    #[schemars(range(min = 1, max = 1000), extend("format" = "int32"))]
    pub keep: Option<u32>,

    /// The S3-compatible bucket the scheduled backups are kept in, instead of claims (see
    /// the DatabaseBackup's spec.bucket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<Bucket>,

    /// Whether to verify each scheduled backup once it Completes (see the DatabaseBackup's
    /// spec.verify).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<bool>,
}

/// The backup a new Database is restored from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct RestoreFrom {
    /// The name of a DatabaseBackup in the same namespace, of a Database of the same engine;
    /// or of one deleted whose claim was kept (its spec.storage.reclaimPolicy: Retain).
    #[schemars(length(min = 1, max = 253))]
    pub backup: String,

    /// The bucket to find the backup in when its DatabaseBackup is not in this namespace (a
    /// namespace deleted, another cluster): the backup's folder there is
    /// `<prefix>/<backup>/`, prefix being the backing-up namespace's name unless its bucket set
    /// another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<Bucket>,
}

/// The default of `spec.backup.keep`.
pub const DEFAULT_KEEP: u32 = 7;
