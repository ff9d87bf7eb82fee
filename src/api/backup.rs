//! The `DatabaseBackup` custom resource types: `example.com/v1`, kind `DatabaseBackup`.
//!
//! Like the Database's, these types are the source of the CRD ([`crd`]); the `///` comments on
//! the fields are what `kubectl explain databasebackup.spec` shows.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Bucket, EngineKind, ReclaimPolicy};

/// A logical dump of a Database, taken once, kept in a claim of its own.
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[allow(
    clippy::duplicated_attributes,
    reason = "clippy reads the repeated `type_ = \"string\"` of the printer columns as duplicates"
)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "DatabaseBackup",
    plural = "databasebackups",
    shortname = "dbbackup",
    category = "database-operator",
    namespaced,
    status = "BackupStatus",
    derive = "PartialEq",
    doc = "A DatabaseBackup is a logical dump of a Database (pg_dump, mysqldump, mariadb-dump, redis's RDB), taken once by a Job and kept in a claim of its own.",
    printcolumn(
        name = "DATABASE",
        type_ = "string",
        json_path = ".spec.database",
        description = "The Database dumped."
    ),
    printcolumn(
        name = "PHASE",
        type_ = "string",
        json_path = ".status.phase",
        description = "Pending, Running, Completed or Failed."
    ),
    printcolumn(
        name = "COMPLETED",
        type_ = "date",
        json_path = ".status.completionTime",
        description = "When the dump completed."
    ),
    printcolumn(
        name = "VERIFIED",
        type_ = "string",
        json_path = ".status.verified.result",
        description = "Passed or Failed: whether the backup restored whole into a throwaway Database (spec.verify)."
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp"),
    crates(kube_core = "::kube_core")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self == oldSelf", "message": "a DatabaseBackup cannot change once created: create a new one"},
    {"rule": "!has(self.storage) || !has(self.bucket)",
     "message": "spec.storage and spec.bucket are two places for the dump: set one"},
]))]
pub struct BackupSpec {
    /// The name of the Database to dump, in the same namespace. It needs an engine.
    #[schemars(length(min = 1, max = 63))]
    pub database: String,

    /// The claim the dump is kept in, when it is kept in the cluster (the default, without
    /// spec.bucket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<BackupStorage>,

    /// The S3-compatible bucket the dump is kept in instead of a claim: off the cluster, it
    /// outlives the namespace. The dump is compressed on its way, and the backup Completes once
    /// it is whole there, its size and SHA-256 in the status. A schedule's keep deletes the
    /// bucket's copy of a backup it lets go; deleting the DatabaseBackup otherwise (by hand,
    /// with its namespace) leaves the copy (the bucket's own lifecycle rules expire it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<Bucket>,

    /// Whether to prove the backup once it Completes: the operator restores it into a
    /// throwaway Database (named after the backup, with "-verify"), counts its rows or keys
    /// with the engine's own client, checks the count against the one the dump recorded,
    /// deletes the throwaway and records the outcome in status.verified. A failed verification
    /// is a Warning event and the condition BackupVerified=False on the Database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<bool>,
}

/// The claim that keeps a dump.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct BackupStorage {
    /// The size of the claim, a quantity such as "5Gi". Default: the size of the Database's
    /// volume, which a dump does not exceed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",
         "message": "spec.storage.size must be a positive quantity, such as 5Gi"},
    ]))]
    pub size: Option<String>,

    /// The StorageClass of the claim; the cluster's default class when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,

    /// What happens to the claim, and the dump in it, when the DatabaseBackup is deleted. One
    /// of:
    /// - Delete (the default): it is deleted with the DatabaseBackup.
    /// - Retain: it is kept, owned by nobody, also when the DatabaseBackup, its Database or the
    ///   CRDs are deleted (not when the namespace is). A Database whose spec.restoreFrom.backup
    ///   names the deleted backup restores from the kept claim; delete the claim to free it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_policy: Option<ReclaimPolicy>,
}

/// The observed state of a DatabaseBackup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct BackupStatus {
    /// Where the backup stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,

    /// The engine of the Database dumped: a restore needs the same one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,

    /// The image the dump ran with (the Database's image when the backup began).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub image: Option<String>,

    /// The claim that keeps the dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub claim_name: Option<String>,

    /// Where the dump is in its bucket (spec.bucket): s3://bucket/folder/. A Database in
    /// another namespace restores it by naming the bucket, the prefix and this backup's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub location: Option<String>,

    /// The size of the compressed dump in its bucket, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,

    /// The SHA-256 of the compressed dump in its bucket, in hex: a restore checks it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub sha256: Option<String>,

    /// The rows (postgres, MySQL, MariaDB) or keys (redis) in the dump, counted by the dump
    /// itself once it was whole: what a verification expects to find restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,

    /// The outcome of the verification (spec.verify): the backup restored into a throwaway
    /// Database and its data counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<Verification>,

    /// When the dump started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the dump completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// Why the backup failed or waits, in words for a kubectl user.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub message: Option<String>,

    /// The latest observations, in the standard Kubernetes condition format ("Complete",
    /// "Failed").
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "::operator_runtime::informer::view::exact")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The outcome of a backup's verification.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct Verification {
    /// Passed or Failed, once the verification is over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<VerificationResult>,

    /// When the throwaway Database was created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the verification ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,

    /// How long the restore took, in seconds: from the throwaway Database's creation to its
    /// Ready, the dump loaded. The measured recovery time of this backup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restore_seconds: Option<i64>,

    /// The rows or keys counted in the restored throwaway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,

    /// What the verification found, in words for a kubectl user.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub message: Option<String>,
}

/// The outcome of a verification. One of:
/// - Passed: the backup restored, its server became Ready and it holds the count the dump
///   recorded.
/// - Failed: it did not; the message says why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum VerificationResult {
    /// The backup restored and holds the count the dump recorded.
    Passed,
    /// The restore or the count failed.
    Failed,
}

impl fmt::Display for VerificationResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Where a backup stands. One of:
/// - Pending: waiting for its Database, its claim or its Job.
/// - Running: the dump runs.
/// - Completed: the dump is in its claim.
/// - Failed: the dump failed; the message says why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BackupPhase {
    /// Waiting for its Database, its claim or its Job.
    Pending,
    /// The dump runs.
    Running,
    /// The dump is in its claim.
    Completed,
    /// The dump failed.
    Failed,
}

impl BackupPhase {
    /// Whether the backup is over (Completed or Failed).
    pub fn is_finished(self) -> bool {
        matches!(self, BackupPhase::Completed | BackupPhase::Failed)
    }
}

impl fmt::Display for BackupPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A new backup of `database`, named `name`.
pub fn backup(name: &str, database: &str) -> DatabaseBackup {
    DatabaseBackup::new(name, BackupSpec { database: database.to_string(), storage: None, bucket: None, verify: None })
}
