//! A backup's verification (`spec.verify`): the phase of the backup reconcile that follows a
//! Completed dump.
//!
//! 1. It creates the throwaway Database ([`crate::resources::verify::throwaway`]), restored
//!    from the backup by the Database controller as any Database is, and records when.
//! 2. It waits for the throwaway to be Ready. A throwaway that is `Degraded` (its server keeps
//!    exiting, the restore cannot be, an image that cannot be pulled), or not Ready within
//!    [`RESTORE_DEADLINE`], fails the verification in its own words; `Unschedulable` waits for
//!    the deadline. (The restart that follows a restore, when the restore's init container
//!    leaves the pod, is `Pending`: the Database's status tells a planned restart from a fault.)
//! 3. Ready, the restore's duration is known (from the throwaway's creation to its Ready
//!    condition): it creates the count Job, and once that has finished reads its count (its
//!    termination message) and compares it with the count the dump recorded.
//! 4. It deletes the throwaway and the Job, then records the outcome in `status.verified`
//!    with a Normal (`Verified`) or Warning (`VerificationFailed`) event. The Database's
//!    condition `BackupVerified` is the Database controller's, from the same status.
//!
//! The backup's own phase stays `Completed` whatever the verification finds: the dump is
//! there; whether it restores is `status.verified`'s to say.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_client::Api;
use kube_client::api::{DeleteParams, ListParams};
use operator_runtime::controller::Action;
use operator_runtime::events::Report;
use operator_runtime::informer::key_of;
use operator_runtime::write::Created;

use super::reconcile::{BackupReconciler, Error, finished, gone, last_words};
use crate::api::{
    BackupPhase, BackupStatus, Database, DatabaseBackup, EngineKind, Phase, Verification, VerificationResult,
};
use crate::engine;
use crate::resources::meta::is_controlled_by;
use crate::resources::verify::{self, COUNT_CONTAINER};

/// How long a throwaway may take to be Ready before its verification fails: time enough for
/// the restore of a large dump.
pub(super) const RESTORE_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// How long a throwaway that was made may be missing from the cache before it counts as
/// deleted.
const GONE_GRACE: Duration = Duration::from_secs(60);

/// The reasons a throwaway is Degraded for that pass by themselves: no room on a node yet.
const PASSING: [&str; 1] = ["Unschedulable"];

/// How a verification ended, before it is recorded.
struct Outcome {
    result: VerificationResult,
    message: String,
    count: Option<i64>,
}

impl Outcome {
    fn failed(message: String) -> Self {
        Self { result: VerificationResult::Failed, message, count: None }
    }
}

impl BackupReconciler {
    /// Whether `backup`, whose status is `status`, is to be verified and has not been.
    pub(super) fn verification_pending(backup: &DatabaseBackup, status: &BackupStatus) -> bool {
        backup.spec.verify == Some(true)
            && status.phase == Some(BackupPhase::Completed)
            && status.verified.as_ref().is_none_or(|v| v.result.is_none())
    }

    /// The next step of `backup`'s verification; `status` is the backup's, with
    /// `status.verified` set on the way.
    pub(super) async fn verify(
        &self,
        backup: &DatabaseBackup,
        status: &mut BackupStatus,
        report: &mut Report,
    ) -> Result<Action, Error> {
        let name = verify::name(backup);
        let (Some(kind), Some(image)) = (status.engine, status.image.clone()) else {
            let outcome = Outcome::failed("the backup's status names no engine or image to restore it with".into());
            return self.conclude(backup, status, outcome, report).await;
        };
        let key = format!("{}/{name}", backup.metadata.namespace.as_deref().unwrap_or_default());
        let Some(throwaway) = self.stores.databases.get(&key) else {
            return self.make_throwaway(backup, status, kind, &image, report).await;
        };
        if throwaway.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        if !verify::is_throwaway_of(&throwaway, backup) {
            return self.conclude(backup, status, not_ours(&name), report).await;
        }
        let verified = status.verified.get_or_insert_with(Verification::default);
        let created = throwaway.metadata.creation_timestamp.clone().map(|t| t.0);
        if verified.start_time.is_none() {
            verified.start_time = created.map(Time);
        }
        if throwaway.status.as_ref().and_then(|s| s.phase) != Some(Phase::Ready) {
            return match waiting(&throwaway, created, Timestamp::now()) {
                Ok(recheck) => Ok(recheck),
                Err(message) => self.conclude(backup, status, Outcome::failed(message), report).await,
            };
        }
        // The first time it is seen Ready: the server that loaded the dump serves. (It restarts
        // once after, without the restore's init container; the count tries again through it.)
        if verified.restore_seconds.is_none() {
            verified.restore_seconds = match (created, ready_condition(&throwaway)) {
                (Some(created), Some(ready)) => Some(ready.last_transition_time.0.as_second() - created.as_second()),
                _ => None,
            };
        }
        verified.message = Some(format!("restored into {name}; counting its data"));
        self.count(backup, status, &throwaway, kind, &image, report).await
    }

    /// Creates `backup`'s throwaway, restored from it by the Database controller: once. One
    /// made before and missing from the cache is not yet there, or was deleted by someone; a
    /// second would find the first one's volume.
    async fn make_throwaway(
        &self,
        backup: &DatabaseBackup,
        status: &mut BackupStatus,
        kind: EngineKind,
        image: &str,
        report: &mut Report,
    ) -> Result<Action, Error> {
        let name = verify::name(backup);
        let namespace = backup.metadata.namespace.as_deref().unwrap_or_default();
        let verified = status.verified.get_or_insert_with(Verification::default);
        if let Some(started) = &verified.start_time {
            let since = between(started.0, Timestamp::now());
            if since < GONE_GRACE {
                return Ok(Action::RequeueAfter(GONE_GRACE - since));
            }
            let message = format!("the throwaway Database {name} was deleted before its verification ended");
            return self.conclude(backup, status, Outcome::failed(message), report).await;
        }
        let source = self.stores.databases.get(&format!("{namespace}/{}", backup.spec.database));
        match self.writer.create(&verify::throwaway(backup, source.as_deref(), kind, image)).await {
            Ok(Created::New) => report.normal("Verifying", format!("restoring the backup into Database {name}")),
            Ok(Created::Existed(meta)) if is_controlled_by(&meta, backup) => {}
            Ok(Created::Existed(_)) => return self.conclude(backup, status, not_ours(&name), report).await,
            Err(source) => return Err(Error::new(format!("creating Database {namespace}/{name}"), source)),
        }
        verified.start_time = Some(Time(Timestamp::now()));
        verified.message = Some(format!("restoring into the throwaway Database {name}"));
        Ok(Action::Done)
    }

    /// Counts what the Ready `throwaway` holds with a Job of the engine's client, and concludes
    /// once the Job has finished.
    async fn count(
        &self,
        backup: &DatabaseBackup,
        status: &mut BackupStatus,
        throwaway: &Database,
        kind: EngineKind,
        image: &str,
        report: &mut Report,
    ) -> Result<Action, Error> {
        let name = verify::name(backup);
        let key = format!("{}/{name}", backup.metadata.namespace.as_deref().unwrap_or_default());
        let foreign = || Outcome::failed(format!("Job {name:?} exists and is not this backup's: nothing was counted"));
        let job = match self.stores.jobs.get(&key) {
            None => {
                return match self.writer.create(&verify::count_job(backup, throwaway, engine::of(kind), image)).await {
                    Ok(Created::Existed(meta)) if !is_controlled_by(&meta, backup) => {
                        self.conclude(backup, status, foreign(), report).await
                    }
                    Ok(_) => Ok(Action::Done),
                    Err(source) => Err(Error::new(format!("creating Job {key}"), source)),
                };
            }
            Some(job) if !is_controlled_by(&job.metadata, backup) => {
                return self.conclude(backup, status, foreign(), report).await;
            }
            Some(job) => job,
        };
        let Some(succeeded) = finished(&job) else { return Ok(Action::Done) };
        let pods = self.pods_of(&job).await?;
        let words = last_words(&pods, COUNT_CONTAINER).unwrap_or_default();
        let outcome = if succeeded {
            compare(status.count, &words, engine::of(kind).name())
        } else {
            Outcome::failed(format!("the count in the restored Database failed: {words}"))
        };
        self.conclude(backup, status, outcome, report).await
    }

    /// The pods of `job`, whose last words the reconcile reads.
    pub(super) async fn pods_of(&self, job: &Job) -> Result<Vec<Pod>, Error> {
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.writer.client().clone(), namespace);
        let selector = format!("batch.kubernetes.io/job-name={}", job.metadata.name.as_deref().unwrap_or_default());
        let pods = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::new(format!("listing the pods of Job {}", key_of(job)), source))?;
        Ok(pods.items)
    }

    /// Deletes the throwaway and the count Job, then records `outcome`: a verification is over
    /// only once nothing of it is left running.
    async fn conclude(
        &self,
        backup: &DatabaseBackup,
        status: &mut BackupStatus,
        outcome: Outcome,
        report: &mut Report,
    ) -> Result<Action, Error> {
        let namespace = backup.metadata.namespace.as_deref().unwrap_or_default();
        let name = verify::name(backup);
        let databases: Api<Database> = Api::namespaced(self.writer.client().clone(), namespace);
        let jobs: Api<Job> = Api::namespaced(self.writer.client().clone(), namespace);
        if let Some(throwaway) = self.stores.databases.get(&format!("{namespace}/{name}"))
            && verify::is_throwaway_of(&throwaway, backup)
        {
            gone(databases.delete(&name, &DeleteParams::default()).await)
                .map_err(|source| Error::new(format!("deleting Database {namespace}/{name}"), source))?;
        }
        if let Some(job) = self.stores.jobs.get(&format!("{namespace}/{name}"))
            && is_controlled_by(&job.metadata, backup)
        {
            gone(jobs.delete(&name, &DeleteParams::background()).await)
                .map_err(|source| Error::new(format!("deleting Job {namespace}/{name}"), source))?;
        }
        let verified = status.verified.get_or_insert_with(Verification::default);
        verified.result = Some(outcome.result);
        verified.time = Some(Time(Timestamp::now()));
        verified.count = outcome.count;
        verified.message = Some(outcome.message.clone());
        match outcome.result {
            VerificationResult::Passed => report.normal("Verified", outcome.message),
            VerificationResult::Failed => report.warning("VerificationFailed", outcome.message),
        }
        Ok(Action::Done)
    }
}

/// The outcome when the throwaway's name `name` is held by a Database that is not the backup's.
fn not_ours(name: &str) -> Outcome {
    Outcome::failed(format!("Database {name:?} exists and is not this backup's throwaway: nothing was verified"))
}

/// The whole seconds from `from` to `to`; none when `to` is earlier.
fn between(from: Timestamp, to: Timestamp) -> Duration {
    Duration::from_secs(u64::try_from(to.as_second() - from.as_second()).unwrap_or(0))
}

fn ready_condition(db: &Database) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    db.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Ready")
}

/// A throwaway that is not Ready at `now`: when to look again, or why the verification failed.
fn waiting(throwaway: &Database, created: Option<Timestamp>, now: Timestamp) -> Result<Action, String> {
    let name = throwaway.metadata.name.as_deref().unwrap_or_default();
    let ready = ready_condition(throwaway);
    let said = ready.map(|c| format!("{}: {}", c.reason, c.message)).unwrap_or_else(|| "no status yet".into());
    let phase = throwaway.status.as_ref().and_then(|s| s.phase);
    if phase == Some(Phase::Degraded) && ready.is_none_or(|c| !PASSING.contains(&c.reason.as_str())) {
        return Err(format!(
            "the throwaway Database {name} restored from this backup did not become Ready: {said} (the throwaway is \
             deleted: to read the restore's own words, restore the backup into a Database of your own)"
        ));
    }
    let elapsed = created.map_or(Duration::ZERO, |created| between(created, now));
    if elapsed >= RESTORE_DEADLINE {
        let deadline = humantime::format_duration(RESTORE_DEADLINE);
        return Err(format!("the throwaway Database {name} was not Ready {deadline} after its creation: {said}"));
    }
    Ok(Action::RequeueAfter(RESTORE_DEADLINE - elapsed))
}

/// The verification's outcome from the count the dump recorded (`expected`, when it did) and
/// the count Job's last words (`words`) for an engine named `engine`.
fn compare(expected: Option<i64>, words: &str, engine: &str) -> Outcome {
    let what = if engine == "redis" { "keys without an expiry" } else { "rows" };
    let Ok(found) = words.trim().parse::<i64>() else {
        return Outcome::failed(format!("the count in the restored Database said no number: {words:?}"));
    };
    match expected {
        Some(expected) if expected == found => Outcome {
            result: VerificationResult::Passed,
            message: format!("restored, and holds the {found} {what} the dump recorded"),
            count: Some(found),
        },
        Some(expected) => Outcome {
            result: VerificationResult::Failed,
            message: format!(
                "restored, and holds {found} {what} where the dump recorded {expected}: the backup does not restore \
                 whole"
            ),
            count: Some(found),
        },
        None => Outcome {
            result: VerificationResult::Passed,
            message: format!("restored, and holds {found} {what} (the dump recorded no count to compare with)"),
            count: Some(found),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DatabaseSpec, DatabaseStatus, Size};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn throwaway(phase: Phase, reason: &str) -> Database {
        let mut db = Database::new("nightly-verify", DatabaseSpec::new(Size::Small, "postgres:17"));
        let ready = Condition {
            type_: "Ready".into(),
            status: if phase == Phase::Ready { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: "the server keeps exiting".into(),
            last_transition_time: Time(at(100)),
            observed_generation: None,
        };
        db.status = Some(DatabaseStatus { phase: Some(phase), conditions: vec![ready], ..Default::default() });
        db
    }

    #[test]
    fn a_count_passes_only_when_it_is_the_dump_s() {
        let passed = compare(Some(20_000), "20000\n", "postgres");
        assert_eq!((passed.result, passed.count), (VerificationResult::Passed, Some(20_000)));
        let short = compare(Some(20_000), "19000", "postgres");
        assert_eq!(short.result, VerificationResult::Failed);
        assert!(short.message.contains("holds 19000 rows where the dump recorded 20000"), "{}", short.message);
        assert_eq!(compare(Some(3), "ERROR: permission denied", "postgres").result, VerificationResult::Failed);
        assert!(compare(Some(3), "3", "redis").message.contains("keys without an expiry"));
        assert_eq!(compare(None, "7", "mariadb").result, VerificationResult::Passed, "an older backup, no count");
    }

    #[test]
    fn a_throwaway_that_cannot_be_ready_fails_the_verification_at_once_or_at_the_deadline() {
        let crashing = throwaway(Phase::Degraded, "CrashLoopBackOff");
        let message = waiting(&crashing, Some(at(0)), at(60)).unwrap_err();
        assert!(message.contains("did not become Ready: CrashLoopBackOff: the server keeps exiting"), "{message}");

        let lost = throwaway(Phase::Degraded, "NoReadyReplicas");
        assert!(waiting(&lost, Some(at(0)), at(60)).is_err(), "a throwaway that lost its replica");
        let restarting = throwaway(Phase::Pending, "Restarting");
        assert!(waiting(&restarting, Some(at(0)), at(60)).is_ok(), "the restart after the restore");
        let unschedulable = throwaway(Phase::Degraded, "Unschedulable");
        assert_eq!(
            waiting(&unschedulable, Some(at(0)), at(60)),
            Ok(Action::RequeueAfter(RESTORE_DEADLINE - Duration::from_secs(60)))
        );
        let late = waiting(&unschedulable, Some(at(0)), at(1800)).unwrap_err();
        assert!(late.contains("was not Ready 30m after its creation"), "{late}");

        let restoring = throwaway(Phase::Pending, "Progressing");
        assert!(waiting(&restoring, Some(at(0)), at(10)).is_ok());
    }

    #[test]
    fn only_a_completed_backup_asking_for_it_and_not_verified_yet_is_verified() {
        let mut backup = crate::api::backup("nightly", "orders");
        let completed = BackupStatus { phase: Some(BackupPhase::Completed), ..Default::default() };
        assert!(!BackupReconciler::verification_pending(&backup, &completed), "verify not asked");
        backup.spec.verify = Some(true);
        assert!(BackupReconciler::verification_pending(&backup, &completed));
        let failed = BackupStatus { phase: Some(BackupPhase::Failed), ..Default::default() };
        assert!(!BackupReconciler::verification_pending(&backup, &failed), "nothing to restore");
        let mut done = completed.clone();
        done.verified = Some(Verification { result: Some(VerificationResult::Failed), ..Default::default() });
        assert!(!BackupReconciler::verification_pending(&backup, &done), "verified once");
    }
}
