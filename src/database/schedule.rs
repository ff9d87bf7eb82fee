//! Backups on a schedule (`spec.backup`), and the backup before an upgrade: the DatabaseBackups
//! the Database controller creates. The backups themselves are the backup controller's
//! ([`crate::backup`]); both read them from the one shared cache.
//!
//! - A cron schedule (five fields, or six with seconds first) creates a DatabaseBackup
//!   `<name>-<time>` at each time; after a pause only the latest missed time is taken, as a
//!   CronJob does. The oldest finished ones beyond `keep` are deleted. An invalid schedule is
//!   reported by the `BackupScheduled` condition.
//! - Before an upgrade (`spec.upgrade.backupFirst`): one backup per target image
//!   ([`pre_upgrade_backup_name`]); see [`super::upgrade`].
//! - The schedule phase ([`DatabaseReconciler::run_schedule`]) runs after the status is known
//!   and reports in the `BackupScheduled` condition; an invalid schedule's Warning event is
//!   published once, while the stored condition does not say it yet.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_client::api::Api;
use operator_runtime::conditions::{self, State};
use operator_runtime::informer::{Store, key_of};
use tracing::info;

use super::reconcile::{DatabaseReconciler, Error, Pass};
use crate::api::{BackupPhase, DEFAULT_KEEP, Database, DatabaseBackup, DatabaseStatus, index};
use crate::resources::meta::SCHEDULED_LABEL;

/// The condition that reports the schedule.
const CONDITION: &str = "BackupScheduled";

impl DatabaseReconciler {
    /// The schedule of `spec.backup`: takes the backup that is due (recording its time in
    /// `status`), deletes the oldest finished ones beyond `keep`, and reports the schedule in the
    /// `BackupScheduled` condition. Returns when the next backup is due.
    pub(super) async fn run_schedule(
        &self,
        pass: &mut Pass<'_>,
        status: &mut DatabaseStatus,
    ) -> Result<Option<Duration>, Error> {
        let db = pass.db;
        let taken = || State::yes("Scheduled", "backups are taken on spec.backup.schedule");
        let (next, state) = match scheduled(db, &pass.now) {
            Scheduled::None => return Ok(None),
            Scheduled::Invalid(message) => (None, State::no("InvalidSchedule", message)),
            Scheduled::Wait { recheck_after } => (Some(recheck_after), taken()),
            Scheduled::Due { at, recheck_after } => {
                self.create_backup(pass, &scheduled_backup(db, &at)).await?;
                status.last_scheduled_backup = Some(at);
                (Some(recheck_after), taken())
            }
        };
        let previous = db.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
        if !state.status && !conditions::reports(previous, CONDITION, &state) {
            pass.report.warning(state.reason.clone(), state.message.clone());
        }
        let generation = status.observed_generation;
        conditions::set(&mut status.conditions, previous, CONDITION, state, generation, &pass.now);
        let api: Api<DatabaseBackup> =
            Api::namespaced(self.writer.client().clone(), db.metadata.namespace.as_deref().unwrap_or_default());
        for name in beyond_keep(db, &self.stores.backups) {
            match api.delete(&name, &Default::default()).await {
                Ok(_) => info!(backup = %name, "deleted a scheduled backup beyond spec.backup.keep"),
                Err(kube_client::Error::Api(status)) if status.is_not_found() => {}
                Err(source) => return Err(Error::Write { what: format!("DatabaseBackup {name} (delete)"), source }),
            }
        }
        Ok(next)
    }
}

/// What the schedule asks for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scheduled {
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
        recheck_after: Duration,
    },
    /// Nothing due; look again after `recheck_after`.
    Wait {
        /// Until the next scheduled time.
        recheck_after: Duration,
    },
}

/// What `db`'s schedule asks for at `now`.
pub(crate) fn scheduled(db: &Database, now: &Time) -> Scheduled {
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
    let following = next_after(&at).map_or(Duration::from_secs(3600), |next| until(now, &next));
    Scheduled::Due { at, recheck_after: following }
}

fn until(now: &Time, later: &Time) -> Duration {
    later.0.duration_since(now.0).try_into().unwrap_or_default()
}

/// The scheduled backup of `db` for `at`: `<name>-<yyyymmddhhmmss>` (one name per time, so a
/// retried reconcile finds it instead of making another).
pub(crate) fn scheduled_backup(db: &Database, at: &Time) -> DatabaseBackup {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let stamp = at.0.strftime("%Y%m%d%H%M%S").to_string();
    let mut backup = crate::api::backup(&format!("{name}-{stamp}"), name);
    backup.metadata.namespace = db.metadata.namespace.clone();
    backup.metadata.labels = Some([(SCHEDULED_LABEL.to_string(), name.to_string())].into());
    backup
}

/// The scheduled backups of `db` to delete: the oldest finished ones beyond `keep`.
pub(crate) fn beyond_keep(db: &Database, backups: &Store<DatabaseBackup>) -> Vec<String> {
    let Some(schedule) = &db.spec.backup else { return Vec::new() };
    let keep = schedule.keep.unwrap_or(DEFAULT_KEEP) as usize;
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let mut finished: Vec<_> = backups
        .by_index(index::BY_DATABASE, &key_of(db))
        .into_iter()
        .filter(|b| b.metadata.labels.as_ref().and_then(|l| l.get(SCHEDULED_LABEL)).map(String::as_str) == Some(name))
        .filter(|b| b.status.as_ref().and_then(|s| s.phase).is_some_and(BackupPhase::is_finished))
        .collect();
    finished.sort_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
    let excess = finished.len().saturating_sub(keep);
    finished.into_iter().take(excess).filter_map(|b| b.metadata.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BackupSchedule, DatabaseSpec, DatabaseStatus, EngineKind, Size};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

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
}
