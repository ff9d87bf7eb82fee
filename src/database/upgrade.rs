//! Safe upgrades: a change of `spec.image` is an upgrade, watched until the new pod is Ready.
//!
//! - The status records the image that last became Ready (`status.currentImage`) and, while
//!   `spec.image` differs from it, the upgrade (`status.upgrade`: from, to, since when, and
//!   its state). The Database shows `Progressing` with reason `Upgrading` meanwhile.
//! - If the new image is not Ready within `spec.upgrade.timeout` (default 10 minutes), the
//!   upgrade has failed: `Degraded`, reason `UpgradeFailed`. With `spec.upgrade.policy:
//!   Rollback` the Deployment goes back to the image that was Ready; otherwise it keeps
//!   trying the new one. Either way nothing more happens until `spec.image` changes.
//! - For a known engine, a new major version (postgres 16 to 17, mysql 8.0 to 8.4) is not
//!   rolled at all: the old server's data directory is not the new one's. The Database says
//!   why (`Degraded`, reason `MajorVersionUpgrade`) and keeps running the old image; a dump
//!   and a restore into a new Database is the supported path. `spec.upgrade.allowMajor`
//!   rolls it anyway, for images that migrate their data themselves.
//!
//! [`plan`] decides which image the Deployment runs; the status follows from the plan and the
//! Deployment ([`super::status`]).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Database;
use super::engine::Engine;
use super::view::DeploymentView;
use crate::backup::BackupPhase;

/// How image changes are rolled out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::rewrap_descriptions)]
pub struct UpgradeSpec {
    /// How long a new image has to become Ready before the upgrade has failed, as a duration
    /// such as "10m" or "90s". Default: 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub timeout: Option<String>,

    /// What a failed upgrade does. One of:
    /// - Continue (the default): the Deployment keeps the new image.
    /// - Rollback: the Deployment goes back to the image that was last Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<UpgradePolicy>,

    /// Roll a new major version of a known engine (postgres 16 to 17, mysql 8.0 to 8.4) anyway.
    /// Only for images that migrate their data directory themselves: the official ones do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_major: Option<bool>,

    /// Take a DatabaseBackup of the running database, and wait for it to complete, before
    /// rolling a new image (a Database with an engine).
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
#[schemars(transform = crate::schema::rewrap_descriptions)]
pub struct UpgradeStatus {
    /// The image that was Ready before.
    pub from: String,
    /// The image of spec.image.
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
    /// A new major version of the engine: not rolled.
    Refused,
}

/// The default of `spec.upgrade.timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// What the reconcile does about the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The image the Deployment runs.
    pub image: String,
    /// The upgrade, if `spec.image` is not the image that was last Ready.
    pub upgrade: Option<UpgradeStatus>,
    /// When to look again although nothing changed: the upgrade's deadline.
    pub recheck_after: Option<Duration>,
}

impl Plan {
    /// Running `image`, no upgrade.
    pub fn steady(image: &str) -> Self {
        Self { image: image.to_string(), upgrade: None, recheck_after: None }
    }
}

/// The plan for `db`, given its Deployment as cached, the time, and the phase of the backup
/// taken before this upgrade (`spec.upgrade.backupFirst`), if it exists.
pub fn plan(
    db: &Database,
    engine: Option<&dyn Engine>,
    deployment: Option<&DeploymentView>,
    now: &Time,
    pre_upgrade_backup: Option<BackupPhase>,
) -> Plan {
    let target = db.spec.image.clone();
    let status = db.status.as_ref();
    let current = status.and_then(|s| s.current_image.clone());
    let steady = Plan::steady(&target);
    let Some(current) = current.filter(|current| *current != target) else { return steady };
    // The new image is rolled out and Ready: the upgrade is over (the status records it).
    if deployment.is_some_and(|d| runs_ready(d, &target)) {
        return steady;
    }
    let spec = db.spec.upgrade.clone().unwrap_or_default();
    let previous = status.and_then(|s| s.upgrade.clone()).filter(|u| u.to == target && u.from == current);
    let mut start_time = previous.as_ref().map_or_else(|| now.clone(), |u| u.start_time.clone());
    let upgrade = |state| {
        Some(UpgradeStatus { from: current.clone(), to: target.clone(), start_time: start_time.clone(), state })
    };

    if spec.allow_major != Some(true)
        && let Some(engine) = engine
        && let (Some(from), Some(to)) = (major(engine, &current), major(engine, &target))
        && from != to
    {
        return Plan { image: current.clone(), upgrade: upgrade(UpgradeState::Refused), recheck_after: None };
    }
    if spec.backup_first == Some(true) && engine.is_some() {
        let hold = |state| Plan { image: current.clone(), upgrade: upgrade(state), recheck_after: None };
        match pre_upgrade_backup {
            Some(BackupPhase::Completed) => {}
            Some(BackupPhase::Failed) => return hold(UpgradeState::BackupFailed),
            _ => return hold(UpgradeState::BackingUp),
        }
        // The timeout is the rollout's: it starts when the backup is done.
        if previous.as_ref().is_none_or(|u| u.state == UpgradeState::BackingUp) {
            start_time = now.clone();
        }
    }
    let upgrade = |state| {
        Some(UpgradeStatus { from: current.clone(), to: target.clone(), start_time: start_time.clone(), state })
    };
    let timeout = spec.timeout.as_deref().and_then(|t| humantime::parse_duration(t).ok()).unwrap_or(DEFAULT_TIMEOUT);
    let elapsed = now.0.duration_since(start_time.0).try_into().unwrap_or(Duration::ZERO);
    if elapsed < timeout {
        return Plan {
            image: target.clone(),
            upgrade: upgrade(UpgradeState::Upgrading),
            recheck_after: Some(timeout - elapsed),
        };
    }
    match spec.policy.unwrap_or_default() {
        UpgradePolicy::Rollback => {
            Plan { image: current.clone(), upgrade: upgrade(UpgradeState::RolledBack), recheck_after: None }
        }
        UpgradePolicy::Continue => {
            Plan { image: target.clone(), upgrade: upgrade(UpgradeState::Failed), recheck_after: None }
        }
    }
}

/// Whether `deployment` has rolled out `image` and its replica is Ready.
pub fn runs_ready(deployment: &DeploymentView, image: &str) -> bool {
    let runs = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .is_some_and(|c| c.image.as_deref() == Some(image));
    let Some(status) = &deployment.status else { return false };
    runs && status.observed_generation >= deployment.metadata.generation
        && status.updated_replicas.unwrap_or(0) >= 1
        && status.ready_replicas.unwrap_or(0) >= 1
        && status.replicas.unwrap_or(0) <= 1
}

/// The major version of `image` for `engine`, if its tag says it.
fn major(engine: &dyn Engine, image: &str) -> Option<String> {
    engine.major_version(tag(image)?)
}

/// The tag of an image reference: after the last ':' of its last path segment (a registry's
/// port is not a tag); none for a digest or no tag.
pub fn tag(image: &str) -> Option<&str> {
    if image.contains('@') {
        return None;
    }
    let last_segment = image.rsplit('/').next()?;
    last_segment.split_once(':').map(|(_, tag)| tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::engine::{EngineKind, of};
    use crate::database::{DatabaseSpec, DatabaseStatus, Size};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    fn at(seconds: i64) -> Time {
        Time(Timestamp::UNIX_EPOCH + SignedDuration::from_secs(seconds))
    }

    fn database(image: &str, current: Option<&str>, upgrade: Option<UpgradeSpec>) -> Database {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, image).with_engine(EngineKind::Postgres));
        db.spec.upgrade = upgrade.map(Box::new);
        db.status = Some(DatabaseStatus { current_image: current.map(str::to_string), ..Default::default() });
        db
    }

    fn pg() -> Option<&'static dyn Engine> {
        Some(of(EngineKind::Postgres))
    }

    #[test]
    fn tags_and_versions_are_read_from_image_references() {
        assert_eq!(tag("postgres:17.2-alpine"), Some("17.2-alpine"));
        assert_eq!(tag("registry.example:5000/team/postgres:16"), Some("16"));
        assert_eq!(tag("registry.example:5000/team/postgres"), None);
        assert_eq!(tag("postgres@sha256:abc"), None);
        use crate::database::engine::leading_version;
        assert_eq!(leading_version("17.2-alpine", 1).as_deref(), Some("17"));
        assert_eq!(leading_version("8.4.3", 2).as_deref(), Some("8.4"));
        assert_eq!(leading_version("8", 2), None);
        assert_eq!(leading_version("latest", 1), None);
    }

    #[test]
    fn the_first_image_and_an_unchanged_image_are_no_upgrade() {
        assert_eq!(plan(&database("postgres:17", None, None), pg(), None, &at(0), None).upgrade, None);
        assert_eq!(plan(&database("postgres:17", Some("postgres:17"), None), pg(), None, &at(0), None).upgrade, None);
    }

    #[test]
    fn a_new_minor_image_rolls_until_the_timeout_then_fails_or_rolls_back() {
        let db = database("postgres:17.2", Some("postgres:17"), None);
        let started = plan(&db, pg(), None, &at(100), None);
        assert_eq!(started.image, "postgres:17.2");
        assert_eq!(started.upgrade.as_ref().unwrap().state, UpgradeState::Upgrading);
        assert_eq!(started.recheck_after, Some(DEFAULT_TIMEOUT));

        let mut db = db;
        db.status.as_mut().unwrap().upgrade = started.upgrade.clone().map(Box::new);
        let later = plan(&db, pg(), None, &at(100 + 590), None);
        assert_eq!(later.upgrade.as_ref().unwrap().start_time, at(100), "the start is kept");
        assert_eq!(later.recheck_after, Some(Duration::from_secs(10)));
        let failed = plan(&db, pg(), None, &at(100 + 600), None);
        assert_eq!((failed.image.as_str(), failed.upgrade.unwrap().state), ("postgres:17.2", UpgradeState::Failed));

        db.spec.upgrade = Some(Box::new(UpgradeSpec { policy: Some(UpgradePolicy::Rollback), ..Default::default() }));
        let rolled_back = plan(&db, pg(), None, &at(100 + 600), None);
        assert_eq!(
            (rolled_back.image.as_str(), rolled_back.upgrade.unwrap().state),
            ("postgres:17", UpgradeState::RolledBack)
        );
    }

    #[test]
    fn a_new_major_version_is_refused_unless_allowed() {
        let refused = plan(&database("postgres:17", Some("postgres:16.4"), None), pg(), None, &at(0), None);
        assert_eq!((refused.image.as_str(), refused.upgrade.unwrap().state), ("postgres:16.4", UpgradeState::Refused));
        let allowed = UpgradeSpec { allow_major: Some(true), ..Default::default() };
        let rolled = plan(&database("postgres:17", Some("postgres:16.4"), Some(allowed)), pg(), None, &at(0), None);
        assert_eq!((rolled.image.as_str(), rolled.upgrade.unwrap().state), ("postgres:17", UpgradeState::Upgrading));
        // A generic Database has no engine, so no major version.
        let generic = plan(&database("web:2", Some("web:1"), None), None, None, &at(0), None);
        assert_eq!(generic.upgrade.unwrap().state, UpgradeState::Upgrading);
    }

    #[test]
    fn mysql_majors_are_two_numbers() {
        let mysql = of(EngineKind::Mysql);
        assert_eq!(mysql.major_version("8.0.39").as_deref(), Some("8.0"));
        assert_ne!(mysql.major_version("8.0.39"), mysql.major_version("8.4"));
        assert_eq!(of(EngineKind::Postgres).major_version("16.4-bookworm").as_deref(), Some("16"));
    }

    #[test]
    fn with_backup_first_the_rollout_waits_for_the_backup_and_times_from_its_end() {
        let first = UpgradeSpec { backup_first: Some(true), ..Default::default() };
        let mut db = database("postgres:17.2", Some("postgres:17"), Some(first));
        let waiting = plan(&db, pg(), None, &at(0), None);
        assert_eq!(
            (waiting.image.as_str(), waiting.upgrade.clone().unwrap().state),
            ("postgres:17", UpgradeState::BackingUp)
        );
        db.status.as_mut().unwrap().upgrade = waiting.upgrade.map(Box::new);
        let failed = plan(&db, pg(), None, &at(50), Some(BackupPhase::Failed));
        assert_eq!((failed.image.as_str(), failed.upgrade.unwrap().state), ("postgres:17", UpgradeState::BackupFailed));
        let rolling = plan(&db, pg(), None, &at(100), Some(BackupPhase::Completed));
        let upgrade = rolling.upgrade.unwrap();
        assert_eq!((rolling.image.as_str(), upgrade.state), ("postgres:17.2", UpgradeState::Upgrading));
        assert_eq!(upgrade.start_time, at(100), "the timeout counts from the backup's end");
    }
}
