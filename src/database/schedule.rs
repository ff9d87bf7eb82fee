//! Backups on a schedule (`spec.backup`), and the backup before an upgrade: the DatabaseBackups
//! the Database controller creates. The backups themselves are the backup controller's
//! ([`crate::backup`]); both read them from the one shared cache.
//!
//! - A cron schedule (five fields, or six with seconds first) creates a DatabaseBackup
//!   `<name>-<time>` at each time (cut to 63 characters with a digest for a long name, so that
//!   its Job and claim can carry it); after a pause only the latest missed time is taken, as a
//!   CronJob does. While one scheduled backup has not finished, a time that comes is skipped
//!   (a Normal event `BackupSkipped`): a Database that is down has one waiting backup, not one
//!   per time. An invalid schedule is reported by the `BackupScheduled` condition, as is a
//!   backup the apiserver refuses (`BackupRefused`, not retried).
//! - Retention counts a Database's own scheduled backups (labelled with its uid: one made again
//!   under the same name is another Database) and keeps the newest `keep` Completed ones and,
//!   apart, the newest `keep` Failed ones, so that failing dumps never delete a good backup; a
//!   backup that any Database of the namespace restores from is never deleted.
//! - Before an upgrade (`spec.upgrade.backupFirst`): one backup per target image
//!   ([`pre_upgrade_backup_name`]); see [`super::upgrade`].
//! - The schedule phase ([`DatabaseReconciler::run_schedule`]) runs after the status is known
//!   and reports in the `BackupScheduled` condition; an invalid schedule's Warning event is
//!   published once, while the stored condition does not say it yet.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_client::api::{Api, Patch, PatchParams};
use operator_runtime::conditions::{self, State};
use operator_runtime::informer::{Store, key_of};
use operator_runtime::write::refusal;
use tracing::info;

use super::reconcile::{DatabaseReconciler, Error, Pass};
use crate::api::{BackupPhase, DEFAULT_KEEP, Database, DatabaseBackup, DatabaseStatus, index};
use crate::resources::backup::EXPIRED_LABEL;
use crate::resources::meta::{DATABASE_UID_LABEL, SCHEDULED_LABEL, derived_name};

/// The condition that reports the schedule.
const CONDITION: &str = "BackupScheduled";

impl DatabaseReconciler {
    /// The schedule of `spec.backup`: takes the backup that is due (recording its time in
    /// `status`), deletes the scheduled backups beyond `keep` ([`beyond_keep`]), and reports the
    /// schedule in the `BackupScheduled` condition. Returns when the next backup is due.
    ///
    /// The condition is set before an error is returned, so that the caller can write the
    /// status it has: a failing schedule never freezes what the status says.
    pub(super) async fn run_schedule(
        &self,
        pass: &mut Pass<'_>,
        status: &mut DatabaseStatus,
    ) -> Result<Option<Duration>, Error> {
        let db = pass.db;
        let taken = || State::yes("Scheduled", "backups are taken on spec.backup.schedule");
        let (next, mut state, due) = match scheduled(db, &pass.now) {
            Scheduled::None => return Ok(None),
            Scheduled::Invalid(message) => (None, State::no("InvalidSchedule", message), None),
            Scheduled::Wait { recheck_after } => (Some(recheck_after), taken(), None),
            Scheduled::Due { at, recheck_after } => (Some(recheck_after), taken(), Some(at)),
        };
        let mut failed = None;
        if let Some(at) = due {
            match self.take_scheduled(pass, &at).await {
                Ok(()) => status.last_scheduled_backup = Some(at),
                Err(Error::Write { source, .. }) if refusal(&source).is_some() => {
                    // Refused for what it is: the same backup would be refused again; the next
                    // time is another backup.
                    state = State::no("BackupRefused", format!("the scheduled backup was refused: {source}"));
                    status.last_scheduled_backup = Some(at);
                }
                Err(error) => failed = Some(error),
            }
        }
        let previous = db.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
        if !state.status && !conditions::reports(previous, CONDITION, &state) {
            pass.report.warning(state.reason.clone(), state.message.clone());
        }
        let generation = status.observed_generation;
        conditions::set(&mut status.conditions, previous, CONDITION, state, generation, &pass.now);
        if let Some(error) = failed {
            return Err(error);
        }
        let api: Api<DatabaseBackup> =
            Api::namespaced(self.writer.client().clone(), db.metadata.namespace.as_deref().unwrap_or_default());
        for backup in beyond_keep(db, &self.stores.backups, &self.stores.databases) {
            let name = backup.metadata.name.clone().unwrap_or_default();
            let written = if in_a_bucket(&backup) {
                // The backup controller deletes its copy in the bucket, then the backup.
                if backup.metadata.labels.as_ref().is_some_and(|l| l.contains_key(EXPIRED_LABEL)) {
                    continue;
                }
                let label = serde_json::json!({"metadata": {"labels": {EXPIRED_LABEL: "true"}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&label)).await.map(|_| "labelled expired")
            } else {
                api.delete(&name, &Default::default()).await.map(|_| "deleted")
            };
            match written {
                Ok(done) => info!(backup = %name, "{done} a scheduled backup beyond spec.backup.keep"),
                Err(kube_client::Error::Api(status)) if status.is_not_found() => {}
                Err(source) => return Err(Error::Write { what: format!("DatabaseBackup {name} (retention)"), source }),
            }
        }
        Ok(next)
    }

    /// Takes the scheduled backup for `at`, unless an earlier one has not finished: a Database
    /// that is down, or dumps slower than its schedule, has one unfinished backup, not one per
    /// time.
    async fn take_scheduled(&self, pass: &mut Pass<'_>, at: &Time) -> Result<(), Error> {
        let backup = scheduled_backup(pass.db, at);
        let name = backup.metadata.name.as_deref().unwrap_or_default();
        if let Some(earlier) = unfinished(pass.db, &self.stores.backups).into_iter().find(|b| b != name) {
            pass.report.normal(
                "BackupSkipped",
                format!("skipped the backup due at {}: DatabaseBackup {earlier} has not finished", at.0),
            );
            return Ok(());
        }
        self.create_backup(pass, &backup).await
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
    let cron = match parse(&backup.schedule) {
        Ok(cron) => cron,
        Err(err) => {
            return Scheduled::Invalid(format!(
                "spec.backup.schedule {:?} is not a cron schedule: {err}",
                backup.schedule
            ));
        }
    };
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

/// A schedule as `spec.backup.schedule` writes it: five fields, or six with seconds first.
fn parse(schedule: &str) -> Result<croner::Cron, croner::errors::CronError> {
    croner::parser::CronParser::builder().seconds(croner::parser::Seconds::Optional).build().parse(schedule)
}

fn utc(t: &Time) -> k8s_openapi::jiff::Zoned {
    t.0.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
}

/// The period of `db`'s schedule: the longest gap between consecutive times among its next
/// [`PERIOD_TIMES`] after `now`. The longest, so that an irregular schedule's period is its
/// widest gap (a weekdays-only schedule's is its weekend, three days): "no backup within 1.5
/// periods" must not fire on a Sunday. `None` without a schedule, or with one that cannot be
/// read or fires fewer than twice more.
pub(crate) fn period(db: &Database, now: &Time) -> Option<Duration> {
    let cron = parse(&db.spec.backup.as_ref()?.schedule).ok()?;
    let mut at = cron.find_next_occurrence(&utc(now), false).ok()?;
    let mut longest: Option<Duration> = None;
    for _ in 1..PERIOD_TIMES {
        let Ok(next) = cron.find_next_occurrence(&at, false) else { break };
        let gap = next.timestamp().duration_since(at.timestamp()).try_into().ok()?;
        longest = longest.max(Some(gap));
        at = next;
    }
    longest
}

/// How many of a schedule's next times [`period`] looks at: eight, so that a schedule of five
/// weekdays (the most common irregular one) shows its weekend gap whatever the day.
const PERIOD_TIMES: usize = 8;

fn until(now: &Time, later: &Time) -> Duration {
    later.0.duration_since(now.0).try_into().unwrap_or_default()
}

/// The scheduled backup of `db` for `at`: `<name>-<yyyymmddhhmmss>` (one name per time, so a
/// retried reconcile finds it instead of making another; cut to a DNS label's length by
/// [`derived_name`]), labelled with its Database's name and uid.
pub(crate) fn scheduled_backup(db: &Database, at: &Time) -> DatabaseBackup {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let stamp = at.0.strftime("%Y%m%d%H%M%S").to_string();
    let mut backup = crate::api::backup(&derived_name(name, &stamp), name);
    backup.metadata.namespace = db.metadata.namespace.clone();
    backup.spec.bucket = db.spec.backup.as_ref().and_then(|schedule| schedule.bucket.clone());
    backup.spec.verify = db.spec.backup.as_ref().and_then(|schedule| schedule.verify);
    let uid = db.metadata.uid.clone().unwrap_or_default();
    backup.metadata.labels =
        Some([(SCHEDULED_LABEL.to_string(), name.to_string()), (DATABASE_UID_LABEL.to_string(), uid)].into());
    backup
}

/// The scheduled backups of `db` itself (by its uid, not its name), oldest first.
fn scheduled_of(db: &Database, backups: &Store<DatabaseBackup>) -> Vec<Arc<DatabaseBackup>> {
    let uid = db.metadata.uid.as_deref();
    let mut ours: Vec<_> = backups
        .by_index(index::BY_DATABASE, &key_of(db))
        .into_iter()
        .filter(|b| {
            uid.is_some()
                && b.metadata.labels.as_ref().and_then(|l| l.get(DATABASE_UID_LABEL)).map(String::as_str) == uid
        })
        .collect();
    ours.sort_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
    ours
}

/// The names of `db`'s scheduled backups that have not finished.
fn unfinished(db: &Database, backups: &Store<DatabaseBackup>) -> Vec<String> {
    let finished = |b: &DatabaseBackup| b.status.as_ref().and_then(|s| s.phase).is_some_and(BackupPhase::is_finished);
    scheduled_of(db, backups).into_iter().filter(|b| !finished(b)).filter_map(|b| b.metadata.name.clone()).collect()
}

/// The scheduled backups of `db` to delete: beyond the newest `keep` Completed ones, and
/// beyond the newest `keep` Failed ones, counted apart so that failures never push a good
/// backup out; never one that a Database of the namespace restores from.
/// Whether `backup` is a Completed backup in a bucket: its copy there goes before it does.
fn in_a_bucket(backup: &DatabaseBackup) -> bool {
    backup.spec.bucket.is_some() && backup.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed)
}

pub(crate) fn beyond_keep(
    db: &Database,
    backups: &Store<DatabaseBackup>,
    databases: &Store<Database>,
) -> Vec<Arc<DatabaseBackup>> {
    let Some(schedule) = &db.spec.backup else { return Vec::new() };
    let keep = schedule.keep.unwrap_or(DEFAULT_KEEP) as usize;
    let restored_from = |b: &DatabaseBackup| !databases.by_index(index::BY_RESTORE_SOURCE, &key_of(b)).is_empty();
    let ours = scheduled_of(db, backups);
    let mut doomed = Vec::new();
    for phase in [BackupPhase::Completed, BackupPhase::Failed] {
        let of_phase: Vec<_> = ours.iter().filter(|b| b.status.as_ref().and_then(|s| s.phase) == Some(phase)).collect();
        let excess = of_phase.len().saturating_sub(keep);
        doomed.extend(of_phase.into_iter().take(excess).filter(|b| !restored_from(b)).cloned());
    }
    doomed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BackupSchedule, DatabaseSpec, DatabaseStatus, EngineKind, Size};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    fn names(backups: Vec<Arc<DatabaseBackup>>) -> Vec<String> {
        backups.iter().filter_map(|b| b.metadata.name.clone()).collect()
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::UNIX_EPOCH + SignedDuration::from_secs(seconds))
    }

    fn database(schedule: &str, last: Option<i64>) -> Database {
        let mut db =
            Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
        db.spec.backup =
            Some(Box::new(BackupSchedule { schedule: schedule.into(), keep: Some(2), bucket: None, verify: None }));
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
    fn a_schedule_s_period_is_the_gap_between_its_next_two_times() {
        assert_eq!(period(&database("0 * * * *", None), &at(9000)), Some(Duration::from_secs(3600)));
        assert_eq!(period(&database("*/30 * * * * *", None), &at(9000)), Some(Duration::from_secs(30)));
        // Weekdays at 02:00: the weekend, whatever the day (1970-01-01 was a Thursday).
        for day in 0..7 {
            let weekdays = period(&database("0 2 * * 1-5", None), &at(day * 86_400));
            assert_eq!(weekdays, Some(Duration::from_secs(3 * 86_400)), "day {day}");
        }
        assert_eq!(period(&database("not a schedule", None), &at(0)), None);
        let mut unscheduled = database("0 * * * *", None);
        unscheduled.spec.backup = None;
        assert_eq!(period(&unscheduled, &at(0)), None);
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
        let mut db = database("0 * * * *", None);
        let backup = scheduled_backup(&db, &at(7200));
        assert_eq!(backup.metadata.name.as_deref(), Some("orders-19700101020000"));
        assert_eq!((backup.spec.database.as_str(), backup.spec.bucket), ("orders", None));
        let bucket = crate::api::Bucket { name: "backups".into(), ..Default::default() };
        db.spec.backup.as_mut().unwrap().bucket = Some(bucket.clone());
        assert_eq!(scheduled_backup(&db, &at(7200)).spec.bucket, Some(bucket), "the schedule's bucket");
    }

    #[test]
    fn a_long_databases_scheduled_backups_have_names_a_job_can_carry() {
        let mut db = database("0 * * * *", None);
        db.metadata.name = Some("a".repeat(60));
        let name = scheduled_backup(&db, &at(7200)).metadata.name.unwrap();
        assert!(name.len() <= 63 && name.ends_with("-19700101020000"), "{name}");
        assert_ne!(name, scheduled_backup(&db, &at(10800)).metadata.name.unwrap(), "one name per time");
    }

    /// A scheduled backup of `db` created at `seconds`, in `phase`.
    fn taken(db: &Database, seconds: i64, phase: Option<BackupPhase>) -> DatabaseBackup {
        let mut backup = scheduled_backup(db, &at(seconds));
        backup.metadata.creation_timestamp = Some(at(seconds));
        backup.status = Some(crate::api::BackupStatus { phase, ..Default::default() });
        backup
    }

    fn stores(backups: Vec<DatabaseBackup>, databases: Vec<Database>) -> (Store<DatabaseBackup>, Store<Database>) {
        (
            Store::from_objects(backups).with_index(index::BY_DATABASE, Arc::new(index::by_database)),
            Store::from_objects(databases).with_index(index::BY_RESTORE_SOURCE, Arc::new(index::by_restore_source)),
        )
    }

    fn with_uid(mut db: Database, uid: &str) -> Database {
        db.metadata.uid = Some(uid.into());
        db.metadata.namespace = Some("shop".into());
        db
    }

    #[test]
    fn failures_never_push_a_completed_backup_out() {
        // keep: 2; two good backups, then three failed dumps (a rotated password, a full volume).
        let db = with_uid(database("0 * * * *", None), "uid-1");
        let (completed, failed) = (Some(BackupPhase::Completed), Some(BackupPhase::Failed));
        let backups = vec![
            taken(&db, 3600, completed),
            taken(&db, 7200, completed),
            taken(&db, 10800, failed),
            taken(&db, 14400, failed),
            taken(&db, 18000, failed),
        ];
        let (backups, databases) = stores(backups, vec![db.clone()]);
        assert_eq!(names(beyond_keep(&db, &backups, &databases)), ["orders-19700101030000"], "the oldest failure only");
    }

    #[test]
    fn a_database_made_again_under_the_same_name_never_rotates_the_first_ones_backups_nor_its_restore_source() {
        let first = with_uid(database("0 * * * *", None), "uid-1");
        let completed = Some(BackupPhase::Completed);
        let backups =
            vec![taken(&first, 3600, completed), taken(&first, 7200, completed), taken(&first, 10800, completed)];
        // Made again with keep: 1, restored from the first one's oldest backup.
        let mut again = with_uid(database("0 * * * *", None), "uid-2");
        again.spec.backup.as_mut().unwrap().keep = Some(1);
        again.spec.restore_from =
            Some(Box::new(crate::api::RestoreFrom { backup: "orders-19700101010000".into(), bucket: None }));
        let (store, databases) = stores(backups.clone(), vec![again.clone()]);
        assert!(beyond_keep(&again, &store, &databases).is_empty(), "not its own backups");
        // The first one, had it stayed, would rotate its own but never the restore source.
        let mut first = first;
        first.spec.backup.as_mut().unwrap().keep = Some(1);
        assert_eq!(names(beyond_keep(&first, &store, &databases)), ["orders-19700101020000"]);
    }

    #[test]
    fn an_unfinished_scheduled_backup_is_the_only_one() {
        let db = with_uid(database("0 * * * *", None), "uid-1");
        let (backups, _) = stores(
            vec![taken(&db, 3600, Some(BackupPhase::Completed)), taken(&db, 7200, Some(BackupPhase::Running))],
            vec![],
        );
        assert_eq!(unfinished(&db, &backups), ["orders-19700101020000"]);
    }
}
