//! Safe upgrades: a change of `spec.image` is an upgrade, watched until the new pod is Ready.
//!
//! - The status records the image that last became Ready (`status.currentImage`) and, while
//!   `spec.image` differs from it, the upgrade (`status.upgrade`: from, to, since when, and
//!   its state). The Database shows `Progressing` with reason `Upgrading` meanwhile.
//! - If the new image is not Ready within `spec.upgrade.timeout` (default 10 minutes), the
//!   upgrade has failed: `Degraded`, reason `UpgradeFailed`. With `spec.upgrade.policy:
//!   Rollback` the Deployment goes back to the image that was Ready; otherwise it keeps
//!   trying the new one. Either way nothing more happens until `spec.image` changes.
//! - A rollback never crosses a major version: an upgrade rolled with `allowMajor` may have
//!   migrated the data directory before it failed, and the old server must not start on it
//!   (nor on a half-migrated one). Such an upgrade fails as with `Continue` (state
//!   `NotRolledBack`, reason `UpgradeFailed`, saying why); the way back is the backup taken
//!   before it, restored into a new Database.
//! - For a known engine, a new major version (postgres 16 to 17, mysql 8.0 to 8.4) is not
//!   rolled at all: the old server's data directory is not the new one's. The Database says
//!   why (`Degraded`, reason `MajorVersionUpgrade`) and keeps running the old image; a dump
//!   and a restore into a new Database is the supported path. `spec.upgrade.allowMajor`
//!   rolls it anyway, for images that migrate their data themselves. An image whose tag names
//!   no version (`latest`, `alpine`, a digest `@sha256:...`) may be any major version, so a
//!   change from or to one is refused in the same way: name the version in the tag, or set
//!   `allowMajor`.
//!
//! [`plan`] decides which image the Deployment runs; the status follows from the plan and the
//! Deployment ([`super::status`]).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{BackupPhase, DEFAULT_TIMEOUT, Database, UpgradePolicy, UpgradeSpec, UpgradeState, UpgradeStatus};
use crate::engine::{Engine, major, tag};
use crate::resources::view::DeploymentView;

/// What the reconcile does about the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The image the Deployment runs.
    pub(crate) image: String,
    /// The upgrade, if `spec.image` is not the image that was last Ready.
    pub(crate) upgrade: Option<UpgradeStatus>,
    /// When to look again although nothing changed: the upgrade's deadline.
    pub(crate) recheck_after: Option<Duration>,
}

impl Plan {
    /// Running `image`, no upgrade.
    pub(crate) fn steady(image: &str) -> Self {
        Self { image: image.to_string(), upgrade: None, recheck_after: None }
    }
}

/// The plan for `db`, given its Deployment as cached, the time, and the phase of the backup
/// taken before this upgrade (`spec.upgrade.backupFirst`), if it exists.
pub(crate) fn plan(
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
    if deployment.is_some_and(|d| d.runs_ready(&target)) {
        return steady;
    }
    let spec = db.spec.upgrade.clone().unwrap_or_default();
    let previous = status.and_then(|s| s.upgrade.clone()).filter(|u| u.to == target && u.from == current);
    let mut start_time = previous.as_ref().map_or_else(|| now.clone(), |u| u.start_time.clone());
    let upgrade = |state| {
        Some(UpgradeStatus { from: current.clone(), to: target.clone(), start_time: start_time.clone(), state })
    };

    // An image whose tag names no version (`latest`, `alpine`, a digest) may be any major:
    // what cannot be told is not rolled either.
    let same_major = engine.is_none_or(|engine| {
        (major(engine, &current).zip(major(engine, &target))).is_some_and(|(from, to)| from == to)
    });
    if spec.allow_major != Some(true) && !same_major {
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
    let upgrade = UpgradeStatus { from: current, to: target, start_time, state: UpgradeState::Upgrading };
    rolling(&spec, upgrade, now, same_major)
}

/// An upgrade whose rollout started at `upgrade.start_time`: the target runs until the
/// timeout, then the policy decides (back to the image that was Ready, or on with the target);
/// across a major version (`same_major` false) it never goes back.
fn rolling(spec: &UpgradeSpec, mut upgrade: UpgradeStatus, now: &Time, same_major: bool) -> Plan {
    let timeout = spec.timeout.as_deref().and_then(|t| humantime::parse_duration(t).ok()).unwrap_or(DEFAULT_TIMEOUT);
    let elapsed = now.0.duration_since(upgrade.start_time.0).try_into().unwrap_or(Duration::ZERO);
    if elapsed < timeout {
        return Plan { image: upgrade.to.clone(), upgrade: Some(upgrade), recheck_after: Some(timeout - elapsed) };
    }
    let image = match spec.policy.unwrap_or_default() {
        UpgradePolicy::Rollback if same_major => {
            upgrade.state = UpgradeState::RolledBack;
            upgrade.from.clone()
        }
        UpgradePolicy::Rollback => {
            upgrade.state = UpgradeState::NotRolledBack;
            upgrade.to.clone()
        }
        UpgradePolicy::Continue => {
            upgrade.state = UpgradeState::Failed;
            upgrade.to.clone()
        }
    };
    Plan { image, upgrade: Some(upgrade), recheck_after: None }
}

pub(crate) use crate::engine::newer;

/// Whether `image`'s tag starts with a version number (`17`, `17.2-alpine`; not `latest`,
/// `alpine`, a digest or no tag).
pub(crate) fn names_a_version(image: &str) -> bool {
    tag(image).is_some_and(|tag| crate::engine::leading_version(tag, 1).is_some())
}

/// The backup `name` taken before upgrading `db`: where the schedule keeps its backups (a
/// bucket's is off the cluster), else in a claim.
pub(crate) fn pre_upgrade_backup(db: &Database, name: &str) -> crate::api::DatabaseBackup {
    let mut backup = crate::api::backup(name, db.metadata.name.as_deref().unwrap_or_default());
    backup.metadata.namespace.clone_from(&db.metadata.namespace);
    backup.spec.bucket = db.spec.backup.as_ref().and_then(|schedule| schedule.bucket.clone());
    backup
}

/// The name of the backup taken before upgrading `db` to `target`.
pub(crate) fn pre_upgrade_backup_name(db: &Database, target: &str) -> String {
    // A short, stable digest of the target: one backup per upgrade, a valid name whatever
    // the image reference holds.
    let digest = ring::digest::digest(&ring::digest::SHA256, target.as_bytes());
    let hex: String = digest.as_ref()[..5].iter().map(|b| format!("{b:02x}")).collect();
    crate::resources::meta::derived_name(db.metadata.name.as_deref().unwrap_or_default(), &format!("pre-upgrade-{hex}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DatabaseSpec, DatabaseStatus, EngineKind, Size, UpgradeSpec};
    use crate::engine::of;
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
    fn the_backup_before_an_upgrade_goes_where_the_schedule_keeps_its_backups() {
        let mut db = database("postgres:17.3", Some("postgres:17.2"), None);
        db.metadata.namespace = Some("shop".into());
        let in_a_claim = pre_upgrade_backup(&db, "orders-before");
        assert_eq!((in_a_claim.spec.database.as_str(), in_a_claim.spec.bucket), ("orders", None));
        let bucket = crate::api::Bucket { name: "backups".into(), ..Default::default() };
        db.spec.backup = Some(Box::new(crate::api::BackupSchedule {
            schedule: "0 3 * * *".into(),
            keep: None,
            bucket: Some(bucket.clone()),
            verify: None,
        }));
        let off = pre_upgrade_backup(&db, "orders-before");
        assert_eq!((off.metadata.namespace.as_deref(), off.spec.bucket), (Some("shop"), Some(bucket)));
    }

    #[test]
    fn tags_and_versions_are_read_from_image_references() {
        assert_eq!(tag("postgres:17.2-alpine"), Some("17.2-alpine"));
        assert_eq!(tag("registry.example:5000/team/postgres:16"), Some("16"));
        assert_eq!(tag("registry.example:5000/team/postgres"), None);
        assert_eq!(tag("postgres@sha256:abc"), None);
        use crate::engine::leading_version;
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
        // A tag that names no version may be any major.
        for (to, from) in [
            ("postgres:latest", "postgres:17"),
            ("postgres@sha256:abc", "postgres:17"),
            ("postgres:17", "postgres:alpine"),
        ] {
            let unknown = plan(&database(to, Some(from), None), pg(), None, &at(0), None);
            assert_eq!(
                (unknown.image.as_str(), unknown.upgrade.unwrap().state),
                (from, UpgradeState::Refused),
                "{from} to {to}"
            );
        }
        // A generic Database has no engine, so no major version.
        let generic = plan(&database("web:2", Some("web:1"), None), None, None, &at(0), None);
        assert_eq!(generic.upgrade.unwrap().state, UpgradeState::Upgrading);
    }

    #[test]
    fn a_failed_upgrade_across_a_major_version_is_never_rolled_back() {
        let rollback = |allow_major| UpgradeSpec {
            allow_major: Some(allow_major),
            policy: Some(UpgradePolicy::Rollback),
            ..Default::default()
        };
        for (from, to) in [("postgres:16.4", "postgres:17"), ("postgres:17", "postgres:latest")] {
            let mut db = database(to, Some(from), Some(rollback(true)));
            let started = plan(&db, pg(), None, &at(0), None);
            assert_eq!(started.image, to, "{from} to {to}: allowMajor rolls it");
            db.status.as_mut().unwrap().upgrade = started.upgrade.map(Box::new);
            let failed = plan(&db, pg(), None, &at(600), None);
            assert_eq!(
                (failed.image.as_str(), failed.upgrade.unwrap().state),
                (to, UpgradeState::NotRolledBack),
                "{from} to {to}: the old server never starts on data the new one may have migrated"
            );
        }
        // Within a major version the rollback goes back, and a generic Database has no major.
        let mut minor = database("postgres:17.2", Some("postgres:17.1"), Some(rollback(true)));
        minor.status.as_mut().unwrap().upgrade = plan(&minor, pg(), None, &at(0), None).upgrade.map(Box::new);
        assert_eq!(plan(&minor, pg(), None, &at(600), None).image, "postgres:17.1");
        let mut generic = database("web:2", Some("web:1"), Some(rollback(false)));
        generic.status.as_mut().unwrap().upgrade = plan(&generic, None, None, &at(0), None).upgrade.map(Box::new);
        assert_eq!(plan(&generic, None, None, &at(600), None).image, "web:1");
    }

    #[test]
    fn majors_compare_number_by_number() {
        assert!(newer("17", "15") && newer("17", "9") && newer("8.4", "8.0") && newer("11.10", "11.8"));
        assert!(!newer("15", "17") && !newer("17", "17") && !newer("8.0", "8.4"));
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

    #[test]
    fn the_pre_upgrade_backup_name_is_stable_and_valid() {
        let db = database("postgres:17", None, None);
        let name = pre_upgrade_backup_name(&db, "registry.example:5000/postgres:17.2");
        assert_eq!(name, pre_upgrade_backup_name(&db, "registry.example:5000/postgres:17.2"));
        assert!(name.starts_with("orders-pre-upgrade-") && name.len() == "orders-pre-upgrade-".len() + 10);
    }
}
