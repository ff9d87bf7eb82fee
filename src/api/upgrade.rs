//! The upgrade section of a Database: `spec.upgrade` (how a change of `spec.image` is rolled
//! out) and `status.upgrade` (where the rollout stands). What the operator does with them is
//! `crate::database::upgrade`.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How image changes are rolled out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct UpgradeSpec {
    /// How long a new image has to become Ready before the upgrade has failed, as a duration
    /// such as "10m" or "90s". Default: 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub timeout: Option<String>,

    /// What a failed upgrade does. One of:
    /// - Continue (the default): the Deployment keeps the new image.
    /// - Rollback: the Deployment goes back to the image that was last Ready, unless the
    ///   upgrade changed the major version (allowMajor): the old server must not start on data
    ///   the new one may have migrated, so then it keeps the new image as Continue does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<UpgradePolicy>,

    /// Roll a new major version of a known engine (postgres 16 to 17, mysql 8.0 to 8.4) anyway.
    /// Only for images that migrate their data directory themselves: the official ones do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_major: Option<bool>,

    /// Take a DatabaseBackup of the running database, and wait for it to complete, before
    /// rolling a new image (a Database with an engine); in spec.backup.bucket when the schedule
    /// names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_first: Option<bool>,
}

/// What a failed upgrade does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum UpgradePolicy {
    /// Keep the new image.
    #[default]
    Continue,
    /// Go back to the image that was last Ready.
    Rollback,
}

/// An upgrade in the status: from the image that was Ready to `spec.image`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct UpgradeStatus {
    /// The image that was Ready before.
    #[schemars(length(max = 1024))]
    pub from: String,
    /// The image of spec.image.
    #[schemars(length(max = 1024))]
    pub to: String,
    /// When the upgrade began (the operator first saw spec.image differ from the Ready image).
    pub start_time: Time,
    /// Where the upgrade stands.
    pub state: UpgradeState,
}

/// Where an upgrade stands. One of:
/// - BackingUp: a DatabaseBackup is taken before rolling (spec.upgrade.backupFirst).
/// - BackupFailed: that backup failed; the new image was not rolled.
/// - Upgrading: the new image is rolling out.
/// - Failed: the new image did not become Ready in time; the Deployment keeps it.
/// - RolledBack: the new image did not become Ready in time; the Deployment runs the old one.
/// - NotRolledBack: the new image, of another major version (allowMajor), did not become Ready
///   in time; the Deployment keeps it, since the old server must not start on data the new
///   one may have migrated (restore the backup taken before the upgrade instead).
/// - Refused: a new major version of the engine, not rolled (see spec.upgrade.allowMajor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum UpgradeState {
    /// A DatabaseBackup is taken before rolling.
    BackingUp,
    /// The backup before rolling failed; the new image was not rolled.
    BackupFailed,
    /// The new image is rolling out.
    Upgrading,
    /// The new image did not become Ready in time; the Deployment keeps it.
    Failed,
    /// The new image did not become Ready in time; the Deployment runs the old one.
    RolledBack,
    /// The new image, of another major version, did not become Ready in time; it is kept, as
    /// the old server must not start on data the new one may have migrated.
    NotRolledBack,
    /// A new major version of the engine: not rolled.
    Refused,
}

/// The default of `spec.upgrade.timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10 * 60);
