//! The Database's side of backups: a restore before the first start, backups on a schedule
//! with a number kept, and a backup before an upgrade. The DatabaseBackups themselves are the
//! backup controller's ([`crate::backup`]); the Database reconcile creates them and reads them
//! from the cache both controllers share.
//!
//! - **Restore** (`spec.restoreFrom.backup`): until the named backup has Completed, the
//!   Database's pod is not created (`Pending`, reason `WaitingForBackup`); a backup that failed,
//!   or of another engine, is reported (`Degraded`). Then the pod gets an init container that
//!   readies the dump for the server's first start (the engine's
//!   [`restore_script`](super::engine::Engine::restore_script)): the server loads it before it
//!   serves. Once that server has been Ready, `status.restoredFrom` says so, and the init
//!   container and the backup's claim leave the pod: a later deletion of the backup does not
//!   stop the Database from restarting.
//! - **Schedule** (`spec.backup`): a cron schedule (five fields, or six with seconds first)
//!   creates a DatabaseBackup `<name>-<time>` at each time; after a pause only the latest
//!   missed time is taken, as a CronJob does. The oldest finished ones beyond `keep` are
//!   deleted. An invalid schedule is reported by the `BackupScheduled` condition.
//! - **Before an upgrade** (`spec.upgrade.backupFirst`): see [`super::upgrade`].

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Database;
use super::children::DATA_VOLUME;
use super::engine::{self, Engine, INITDB_DIR};
use super::view::DeploymentView;
use crate::backup::{BackupPhase, DatabaseBackup, job};
use crate::informer::{Store, key_of};

/// Backups of a Database on a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::rewrap_descriptions)]
pub struct BackupSchedule {
    /// When to take a backup, in cron syntax: five fields (minute hour day-of-month month
    /// day-of-week, as a CronJob's), or six with seconds first. Times are UTC.
    #[schemars(length(min = 1, max = 128))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.split(' ').filter(f, f != '').size() in [5, 6]",
         "message": "spec.backup.schedule must have five fields (minute hour day-of-month month day-of-week), or six with seconds first"},
    ]))]
    pub schedule: String,

    /// How many finished scheduled backups to keep; the oldest beyond it are deleted.
    /// Default 7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // schemars names u32 `uint32`, a format Kubernetes does not know (`kubectl explain` warns
    // about it); within 1..=1000 it is an int32.
    #[schemars(range(min = 1, max = 1000), extend("format" = "int32"))]
    pub keep: Option<u32>,
}

/// The backup a new Database is restored from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::rewrap_descriptions)]
pub struct RestoreFrom {
    /// The name of a DatabaseBackup in the same namespace, of a Database of the same engine.
    #[schemars(length(min = 1, max = 253))]
    pub backup: String,
}

/// The default of `spec.backup.keep`.
pub const DEFAULT_KEEP: u32 = 7;

/// The label of a scheduled backup, naming its Database.
pub const SCHEDULED_LABEL: &str = "example.com/scheduled-for";

/// Where a Database stands with its restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restore {
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
pub fn restore(db: &Database, backups: &Store<DatabaseBackup>) -> Restore {
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

/// The index of Databases by the `namespace/name` of the backup they are restored from.
pub const BY_RESTORE_SOURCE: &str = "restore-from";

/// The [`BY_RESTORE_SOURCE`] index function.
pub fn by_restore_source(db: &Database) -> Vec<String> {
    db.spec
        .restore_from
        .iter()
        .map(|from| format!("{}/{}", db.metadata.namespace.as_deref().unwrap_or_default(), from.backup))
        .collect()
}

/// Maps a DatabaseBackup to the Databases that wait for it: its own (a backup before an
/// upgrade) and those restored from it.
pub fn databases_waiting_for(
    databases: Store<Database>,
) -> impl Fn(&DatabaseBackup) -> Vec<String> + Send + Sync + 'static {
    move |backup: &DatabaseBackup| {
        let mut keys = crate::backup::by_database(backup);
        keys.extend(databases.by_index(BY_RESTORE_SOURCE, &key_of(backup)).iter().map(|db| key_of(db.as_ref())));
        keys
    }
}

/// The name of the init container that readies a restore.
pub const RESTORE_CONTAINER: &str = "restore";

/// Adds the restore to `deployment`: an init container, running the engine's restore script
/// in the Database's image, with the backup's claim (read-only), the data volume, and the
/// initialisation directory the server reads at its first start (shared with the server).
pub fn with_restore(deployment: &mut Deployment, engine: &dyn Engine, claim: &str) {
    let pod = deployment.spec.as_mut().and_then(|s| s.template.spec.as_mut()).expect("a Deployment has a pod spec");
    let (backup_volume, backup_mount) = job::backup_volume(claim, true);
    let initdb = VolumeMount { name: "initdb".into(), mount_path: INITDB_DIR.into(), ..Default::default() };
    let data = VolumeMount { name: DATA_VOLUME.into(), mount_path: engine.data_dir().into(), ..Default::default() };
    let image = pod.containers[0].image.clone();
    pod.init_containers = Some(vec![Container {
        name: RESTORE_CONTAINER.into(),
        image,
        command: Some(vec!["sh".into(), "-c".into(), engine.restore_script()]),
        volume_mounts: Some(vec![backup_mount, data.clone(), initdb.clone()]),
        security_context: Some(engine::container_security()),
        ..Default::default()
    }]);
    pod.volumes.get_or_insert_with(Vec::new).extend([
        backup_volume,
        Volume { name: "initdb".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() },
    ]);
    pod.containers[0].volume_mounts.get_or_insert_with(Vec::new).push(initdb);
}

/// Whether `deployment` runs `image`, Ready, with the restore init container: the restored
/// server has started.
pub fn restored(deployment: &DeploymentView, image: &str) -> bool {
    let has_restore = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.init_containers.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.name == RESTORE_CONTAINER));
    has_restore && super::upgrade::runs_ready(deployment, image)
}

/// What the schedule asks for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scheduled {
    /// No schedule.
    None,
    /// The schedule cannot be read.
    Invalid(String),
    /// Take a backup for `at` (the latest scheduled time passed) now; look again after
    /// `recheck_after`.
    Due {
        /// The scheduled time.
        at: Time,
        /// Until the next scheduled time.
        recheck_after: std::time::Duration,
    },
    /// Nothing due; look again after `recheck_after`.
    Wait {
        /// Until the next scheduled time.
        recheck_after: std::time::Duration,
    },
}

/// What `db`'s schedule asks for at `now`.
pub fn scheduled(db: &Database, now: &Time) -> Scheduled {
    let Some(backup) = &db.spec.backup else { return Scheduled::None };
    let cron = match croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
        .parse(&backup.schedule)
    {
        Ok(cron) => cron,
        Err(err) => {
            return Scheduled::Invalid(format!(
                "spec.backup.schedule {:?} is not a cron schedule: {err}",
                backup.schedule
            ));
        }
    };
    let utc = |t: &Time| t.0.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    let since = db
        .status
        .as_ref()
        .and_then(|s| s.last_scheduled_backup.clone())
        .or_else(|| db.metadata.creation_timestamp.clone())
        .unwrap_or_else(|| now.clone());
    let next_after = |t: &Time| cron.find_next_occurrence(&utc(t), false).ok().map(|z| Time(z.timestamp()));
    let Some(first) = next_after(&since) else {
        return Scheduled::Invalid(format!("spec.backup.schedule {:?} never fires", backup.schedule));
    };
    if first.0 > now.0 {
        return Scheduled::Wait { recheck_after: until(now, &first) };
    }
    // The latest scheduled time not after now: missed ones are not taken one by one.
    let mut at = first;
    while let Some(next) = next_after(&at).filter(|next| next.0 <= now.0) {
        at = next;
    }
    let following = next_after(&at).map_or(std::time::Duration::from_secs(3600), |next| until(now, &next));
    Scheduled::Due { at, recheck_after: following }
}

fn until(now: &Time, later: &Time) -> std::time::Duration {
    later.0.duration_since(now.0).try_into().unwrap_or_default()
}

/// The scheduled backup of `db` for `at`: `<name>-<yyyymmddhhmmss>` (one name per time, so a
/// retried reconcile finds it instead of making another).
pub fn scheduled_backup(db: &Database, at: &Time) -> DatabaseBackup {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let stamp = at.0.strftime("%Y%m%d%H%M%S").to_string();
    let mut backup = crate::backup::backup(&format!("{name}-{stamp}"), name);
    backup.metadata.namespace = db.metadata.namespace.clone();
    backup.metadata.labels = Some([(SCHEDULED_LABEL.to_string(), name.to_string())].into());
    backup
}

/// The scheduled backups of `db` to delete: the oldest finished ones beyond `keep`.
pub fn beyond_keep(db: &Database, backups: &Store<DatabaseBackup>) -> Vec<String> {
    let Some(schedule) = &db.spec.backup else { return Vec::new() };
    let keep = schedule.keep.unwrap_or(DEFAULT_KEEP) as usize;
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let mut finished: Vec<_> = backups
        .by_index(crate::backup::BY_DATABASE, &key_of(db))
        .into_iter()
        .filter(|b| b.metadata.labels.as_ref().and_then(|l| l.get(SCHEDULED_LABEL)).map(String::as_str) == Some(name))
        .filter(|b| b.status.as_ref().and_then(|s| s.phase).is_some_and(BackupPhase::is_finished))
        .collect();
    finished.sort_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
    let excess = finished.len().saturating_sub(keep);
    finished.into_iter().take(excess).filter_map(|b| b.metadata.name.clone()).collect()
}

/// The name of the backup taken before upgrading `db` to `target`.
pub fn pre_upgrade_backup_name(db: &Database, target: &str) -> String {
    // A short, stable digest of the target: one backup per upgrade, a valid name whatever
    // the image reference holds.
    let digest = ring::digest::digest(&ring::digest::SHA256, target.as_bytes());
    let hex: String = digest.as_ref()[..5].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-pre-upgrade-{hex}", db.metadata.name.as_deref().unwrap_or_default())
}

/// Now, as a status time.
pub fn now() -> Time {
    Time(Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::{DatabaseSpec, DatabaseStatus, EngineKind, Size};
    use k8s_openapi::jiff::SignedDuration;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::UNIX_EPOCH + SignedDuration::from_secs(seconds))
    }

    fn database(schedule: &str, last: Option<i64>) -> Database {
        let mut db =
            Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
        db.spec.backup = Some(Box::new(BackupSchedule { schedule: schedule.into(), keep: Some(2) }));
        db.metadata.creation_timestamp = Some(at(0));
        db.status = Some(DatabaseStatus { last_scheduled_backup: last.map(at), ..Default::default() });
        db
    }

    #[test]
    fn a_schedule_is_due_at_its_latest_time_and_waits_for_the_next() {
        // Every hour on the hour; created at 0, now 2h30.
        let due = scheduled(&database("0 * * * *", None), &at(9000));
        assert_eq!(due, Scheduled::Due { at: at(7200), recheck_after: std::time::Duration::from_secs(1800) });
        let waiting = scheduled(&database("0 * * * *", Some(7200)), &at(9000));
        assert_eq!(waiting, Scheduled::Wait { recheck_after: std::time::Duration::from_secs(1800) });
    }

    #[test]
    fn seconds_are_a_sixth_field_first() {
        let due = scheduled(&database("*/10 * * * * *", Some(100)), &at(125));
        assert_eq!(due, Scheduled::Due { at: at(120), recheck_after: std::time::Duration::from_secs(5) });
    }

    #[test]
    fn an_invalid_schedule_says_so() {
        assert!(
            matches!(scheduled(&database("every day", None), &at(0)), Scheduled::Invalid(m) if m.contains("every day"))
        );
    }

    #[test]
    fn scheduled_backups_are_named_by_their_time() {
        let backup = scheduled_backup(&database("0 * * * *", None), &at(7200));
        assert_eq!(backup.metadata.name.as_deref(), Some("orders-19700101020000"));
        assert_eq!(backup.spec.database, "orders");
    }

    #[test]
    fn the_pre_upgrade_backup_name_is_stable_and_valid() {
        let db = database("0 * * * *", None);
        let name = pre_upgrade_backup_name(&db, "registry.example:5000/postgres:17.2");
        assert_eq!(name, pre_upgrade_backup_name(&db, "registry.example:5000/postgres:17.2"));
        assert!(name.starts_with("orders-pre-upgrade-") && name.len() == "orders-pre-upgrade-".len() + 10);
    }
}
