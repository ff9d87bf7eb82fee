//! The DatabaseBackup reconcile: the backup controller, the second controller of the operator.
//!
//! For a key it reads the DatabaseBackup, its Database, its claim and its Job from the
//! informers' caches (the Database and claim informers are the ones the Database controller
//! uses: one cache per kind for both controllers), and:
//!
//! 1. waits (`Pending`) until the Database exists and is Ready: a dump needs a server; once
//!    its Job exists, the backup follows the Job, and a Database deleted before the Job
//!    completed fails the backup (`DatabaseDeleted`): its server, Service and credentials are
//!    gone with it, so the dump cannot be trusted (a pod that needs the credentials never even
//!    starts), and the backup never waits for a Database that is gone;
//! 2. creates the claim and the Job once ([`crate::resources::backup`]), never applies them
//!    again (a Job's template cannot change); a claim or Job of the backup's name that is not
//!    the backup's (say the data claim `orders-data` of Database `orders`, for a backup named
//!    `orders-data`, or a claim an earlier backup of the name kept by `reclaimPolicy: Retain`)
//!    fails the backup: nothing is written to another's volume;
//! 3. reports the Job's progress in the status: `Running`, then `Completed` or `Failed` with
//!    the Job's own reason, and a Normal or Warning event. A finished backup is never looked
//!    at again: its claim keeps the dump.
//!
//! Its events are collected on the way and published at the end ([`Report`]), as the
//! Database controller's are; a server's `Retry-After` is honoured by the worker.
//!
//! A Database without an engine cannot be dumped: the backup fails at once and says so.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_core::ObjectMeta;
use kube_core::ResourceExt;
use operator_runtime::conditions::{self, State};
use operator_runtime::controller::{Action, ReconcileError, Reconciler};
use operator_runtime::events::{Recorder, Report};
use operator_runtime::informer::{Store, key_of};
use operator_runtime::write::{Created, Object, Statuses, Writer, Wrote};
use tracing::{debug, info};

use crate::api::{BackupPhase, BackupStatus, Bucket, Database, DatabaseBackup, Phase, index};
use crate::bucket::Receipt;
use crate::engine;
use crate::resources::backup;
use crate::resources::bucket::Stored;
use crate::resources::view::PersistentVolumeClaimView;

/// A failed reconcile; retried with backoff, or when the server said ([`ReconcileError`]).
#[derive(Debug, thiserror::Error)]
#[error("{what} failed: {source}")]
pub(crate) struct Error {
    what: String,
    #[source]
    source: kube_client::Error,
}

impl Error {
    pub(super) fn new(what: String, source: kube_client::Error) -> Self {
        Self { what, source }
    }
}

impl ReconcileError for Error {
    fn retry_after(&self) -> Option<Duration> {
        operator_runtime::client::retry_after(&self.source)
    }
}

/// The caches the backup reconcile reads.
#[derive(Clone, Debug)]
pub(crate) struct Stores {
    /// DatabaseBackups.
    pub(crate) backups: Store<DatabaseBackup>,
    /// Databases (the Database controller's cache).
    pub(crate) databases: Store<Database>,
    /// Claims carrying the operator's label (the Database controller's cache).
    pub(crate) claims: Store<PersistentVolumeClaimView>,
    /// Jobs carrying the operator's label.
    pub(crate) jobs: Store<Job>,
}

/// The DatabaseBackup reconciler.
#[derive(Clone)]
pub(crate) struct BackupReconciler {
    pub(super) writer: Writer,
    pub(super) stores: Stores,
    recorder: Recorder,
    /// The operator's own image, which moves dumps to buckets (`--backup-image`).
    pub(super) tools_image: Option<String>,
    /// The statuses written that the cache may not show yet: a reconcile right after a write
    /// (the verification's deletes bring one) must not act on the status from before it.
    statuses: Statuses<BackupStatus>,
}

impl Debug for BackupReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupReconciler").field("backups", &self.stores.backups.len()).finish_non_exhaustive()
    }
}

impl BackupReconciler {
    /// A reconciler reading `stores` and writing through `writer`.
    pub(crate) fn new(writer: Writer, stores: Stores, recorder: Recorder, tools_image: Option<String>) -> Self {
        Self { writer, stores, recorder, tools_image, statuses: Statuses::default() }
    }

    /// One pass; the events it collected are published at the end, also when it failed.
    async fn reconcile_backup(&self, backup: &DatabaseBackup) -> Result<Action, Error> {
        let mut report = Report::default();
        let outcome = self.run(backup, &mut report).await;
        self.recorder.publish_report(backup, "Backup", report);
        outcome
    }

    async fn run(&self, backup: &DatabaseBackup, report: &mut Report) -> Result<Action, Error> {
        let previous = backup.status.clone().unwrap_or_default();
        let mut status = previous.clone();
        let mut action = Action::Done;
        if Self::expiring(backup, &previous) {
            action = self.expire(backup, &mut status, report).await?;
        } else if Self::verification_pending(backup, &previous) {
            // Once the Completed status is written: the throwaway restores from it.
            action = self.verify(backup, &mut status, report).await?;
        } else if previous.phase.is_some_and(BackupPhase::is_finished) {
            return Ok(Action::Done);
        } else {
            self.progress(backup, &mut status, report).await?;
        }
        if status != previous {
            if let Some(phase) = status.phase.filter(|p| p.is_finished() && Some(*p) != previous.phase) {
                let note = status.message.clone().unwrap_or_else(|| format!("the backup {phase}"));
                match phase {
                    BackupPhase::Completed => report.normal("Completed", note),
                    _ => report.warning("Failed", note),
                }
            }
            let key = key_of(backup);
            let stored = self
                .writer
                .apply_status(backup, &status)
                .await
                .map_err(|source| Error { what: format!("writing status of DatabaseBackup {key}"), source })?;
            let read = backup.metadata.resource_version.as_deref();
            self.statuses.wrote(&key, read, &status, stored.metadata.resource_version.as_deref());
            info!(phase = ?status.phase, "wrote status");
        }
        Ok(action)
    }

    /// Where the backup stands: waiting for its Database, failed for want of an engine, or
    /// following its Job (created here when it is time).
    async fn progress(
        &self,
        backup: &DatabaseBackup,
        status: &mut BackupStatus,
        report: &mut Report,
    ) -> Result<(), Error> {
        let database = &backup.spec.database;
        let namespace = backup.metadata.namespace.as_deref().unwrap_or_default();
        let db = self.stores.databases.get(&format!("{namespace}/{database}"));
        let engine = match db.as_deref().map(engine::of_database) {
            Some(None) => {
                let message =
                    format!("Database {database:?} has no engine: only a Database with an engine can be backed up");
                finish(status, BackupPhase::Failed, "NoEngine", message, None);
                return Ok(());
            }
            found => found.flatten(),
        };
        let ours = |meta: &ObjectMeta| backup::is_backup_child(meta, backup);
        if let Some(claim) = self.stores.claims.get(&key_of(backup))
            && !ours(&claim.metadata)
        {
            foreign(status, "PersistentVolumeClaim", backup);
            return Ok(());
        }
        match self.stores.jobs.get(&key_of(backup)) {
            Some(job) if !ours(&job.metadata) => foreign(status, "Job", backup),
            Some(job) => {
                self.follow(backup, db.as_deref(), &job, status);
                let completed = status.phase == Some(BackupPhase::Completed);
                if completed || (backup.spec.bucket.is_some() && status.phase.is_some_and(BackupPhase::is_finished)) {
                    self.receive(backup, &job, status).await?;
                }
            }
            None => match (db, engine) {
                (Some(db), Some(engine)) => self.start(backup, &db, engine, status, report).await?,
                _ => pending(status, format!("waiting for Database {database:?}, which does not exist")),
            },
        }
        Ok(())
    }

    /// Follows `backup`'s Job, with its Database `db` if it still exists.
    fn follow(&self, backup: &DatabaseBackup, db: Option<&Database>, job: &Job, status: &mut BackupStatus) {
        // From the Job and the Database, not the cached status, which may lag behind the write
        // that recorded them: an apply without them would remove them. Without its Database,
        // the engine is the one the backup's claim was labelled with.
        status.engine = db.and_then(|db| db.spec.engine).or(status.engine).or_else(|| {
            let claim = self.stores.claims.get(&key_of(backup))?;
            backup::dumped_engine(&claim)
        });
        status.image = job_image(job);
        if backup.spec.bucket.is_none() {
            status.claim_name.clone_from(&backup.metadata.name);
        }
        from_job(status, job);
        if db.is_none() && !status.phase.is_some_and(BackupPhase::is_finished) {
            // Its server, Service and credentials went with it: a dump still to come cannot be
            // trusted, and a pod that needs the credentials never starts.
            let message = format!(
                "Database {:?} was deleted before the dump completed: there is no dump to trust; deleting this \
                 DatabaseBackup removes its Job and claim",
                backup.spec.database
            );
            finish(status, BackupPhase::Failed, "DatabaseDeleted", message, None);
        }
    }

    /// Creates `backup`'s claim and Job once its Database `db` (whose engine is `engine`) is
    /// Ready: a dump needs a server.
    async fn start(
        &self,
        backup: &DatabaseBackup,
        db: &Database,
        engine: &dyn engine::Engine,
        status: &mut BackupStatus,
        report: &mut Report,
    ) -> Result<(), Error> {
        if db.status.as_ref().and_then(|s| s.phase) != Some(Phase::Ready) {
            pending(status, format!("waiting for Database {:?} to be Ready", backup.spec.database));
            return Ok(());
        }
        let image = db.status.as_ref().and_then(|s| s.current_image.clone()).unwrap_or_else(|| db.spec.image.clone());
        if let Some(bucket) = &backup.spec.bucket {
            return self.start_upload(backup, bucket, db, engine, image, status, report).await;
        }
        if self.stores.claims.get(&key_of(backup)).is_none()
            && !self.create(backup, &backup::claim(backup, db, engine, &image), report).await?
        {
            foreign(status, "PersistentVolumeClaim", backup);
            return Ok(());
        }
        if !self.create(backup, &backup::job(backup, db, engine, &image), report).await? {
            foreign(status, "Job", backup);
            return Ok(());
        }
        status.engine = db.spec.engine;
        status.image = Some(image);
        status.claim_name.clone_from(&backup.metadata.name);
        pending(status, "the dump Job was created".to_string());
        Ok(())
    }

    /// Creates `backup`'s Job that dumps `db` into `bucket`.
    #[allow(clippy::too_many_arguments, reason = "the parts of one start, each read once")]
    async fn start_upload(
        &self,
        backup: &DatabaseBackup,
        bucket: &Bucket,
        db: &Database,
        engine: &dyn engine::Engine,
        image: String,
        status: &mut BackupStatus,
        report: &mut Report,
    ) -> Result<(), Error> {
        let Some(tools_image) = self.tools_image.as_deref() else {
            let message =
                "the operator runs without --backup-image (BACKUP_IMAGE), the image that uploads a dump to a \
                           bucket (its own): set it and create the backup again"
                    .to_string();
            finish(status, BackupPhase::Failed, "NoBackupImage", message, None);
            return Ok(());
        };
        let name = backup.metadata.name.as_deref().unwrap_or_default();
        let stored =
            Stored { bucket: bucket.clone(), folder: bucket.folder(&db.namespace().unwrap_or_default(), name) };
        if !self.create(backup, &backup::bucket_job(backup, &stored, db, engine, &image, tools_image), report).await? {
            foreign(status, "Job", backup);
            return Ok(());
        }
        status.engine = db.spec.engine;
        status.image = Some(image);
        status.location = Some(crate::bucket::url(&bucket.name, &stored.folder));
        pending(status, "the dump Job was created".to_string());
        Ok(())
    }

    /// What `backup`'s finished Job said, from its pods: the dump's count of its rows or keys
    /// once Completed; for a bucket, the upload's receipt (where the dump is, its size, its
    /// checksum) once Completed, which a completed backup in a bucket must have, and its error
    /// once Failed (a wrong key, a missing bucket, a server away), in place of the Job's own
    /// words, which say only that a container failed.
    async fn receive(&self, backup: &DatabaseBackup, job: &Job, status: &mut BackupStatus) -> Result<(), Error> {
        let pods = self.pods_of(job).await?;
        if status.phase == Some(BackupPhase::Completed) {
            status.count = last_words(&pods, backup::DUMP_CONTAINER).and_then(|words| words.parse().ok());
        }
        if backup.spec.bucket.is_none() {
            return Ok(());
        }
        let words = last_words(&pods, backup::UPLOAD_CONTAINER);
        let at = status.completion_time.clone();
        match (status.phase, words.as_deref().map(serde_json::from_str::<Receipt>)) {
            (Some(BackupPhase::Completed), Some(Ok(receipt))) => {
                let message = format!(
                    "the dump is in {}: {} bytes compressed, SHA-256 {}",
                    receipt.location, receipt.size, receipt.sha256
                );
                status.location = Some(receipt.location);
                status.size = i64::try_from(receipt.size).ok();
                status.sha256 = Some(receipt.sha256);
                finish(status, BackupPhase::Completed, "Uploaded", message, at);
            }
            (Some(BackupPhase::Completed), _) => {
                let message = "the dump Job completed, and its upload left no receipt: the dump cannot be shown whole \
                               in the bucket"
                    .to_string();
                finish(status, BackupPhase::Failed, "NoReceipt", message, None);
            }
            (_, Some(_)) => {
                let words = words.unwrap_or_default();
                let reason = status.conditions.first().map(|c| c.reason.clone()).unwrap_or_default();
                finish(status, BackupPhase::Failed, &reason, format!("the upload failed: {words}"), at);
            }
            _ => {}
        }
        Ok(())
    }

    /// Creates a child of `backup` once; one of the backup's that exists already (made a
    /// moment ago, not yet in the cache) is fine. False when the name is held by an object that
    /// is not the backup's.
    async fn create<T: Object + k8s_openapi::Resource>(
        &self,
        backup: &DatabaseBackup,
        child: &T,
        report: &mut Report,
    ) -> Result<bool, Error> {
        let kind = <T as k8s_openapi::Resource>::KIND;
        match self.writer.create(child).await {
            Ok(Created::New) => {
                info!(child = %key_of(child), "created {kind}");
                let name = child.meta().name.as_deref().unwrap_or_default();
                report.writes("DatabaseBackup", &[(kind, name, &Wrote::Created)]);
                Ok(true)
            }
            Ok(Created::Existed(meta)) => Ok(backup::is_backup_child(&meta, backup)),
            Err(source) => Err(Error { what: format!("writing {kind} {}", key_of(child)), source }),
        }
    }
}

/// A child's name is held by an object that is not the backup's (a Database's data claim, a
/// Job of someone else's): dumping into it would write over what it holds, so the backup
/// fails for good.
fn foreign(status: &mut BackupStatus, kind: &str, backup: &DatabaseBackup) {
    let name = backup.metadata.name.as_deref().unwrap_or_default();
    let message = format!(
        "{kind} {name:?} exists and is not this backup's (a backup keeps its dump in a claim of its own name, written \
         by a Job of its own name): nothing was written to it; create the backup again under another name"
    );
    finish(status, BackupPhase::Failed, "ResourceExists", message, None);
}

fn pending(status: &mut BackupStatus, message: String) {
    status.phase = Some(BackupPhase::Pending);
    status.message = Some(message);
}

fn finish(status: &mut BackupStatus, phase: BackupPhase, reason: &str, message: String, at: Option<Time>) {
    let now = at.unwrap_or_else(|| Time(Timestamp::now()));
    status.phase = Some(phase);
    status.message = Some(message.clone());
    if phase == BackupPhase::Completed {
        status.completion_time = Some(now.clone());
    }
    let type_ = if phase == BackupPhase::Completed { "Complete" } else { "Failed" };
    status.conditions = vec![conditions::condition(&[], type_, State::yes(reason, message), None, &now)];
}

/// The termination message of `container` (or init container) in the pod of `pods` where it
/// ended last.
pub(super) fn last_words(pods: &[Pod], container: &str) -> Option<String> {
    pods.iter()
        .filter_map(|pod| {
            let status = pod.status.as_ref()?;
            let mut statuses =
                status.container_statuses.iter().flatten().chain(status.init_container_statuses.iter().flatten());
            let ended = statuses.find(|s| s.name == container)?.state.as_ref()?.terminated.as_ref()?;
            Some((ended.finished_at.clone(), ended.message.clone()?))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, message)| message.trim().to_string())
}

/// Whether `job` has finished: succeeded (Some(true)) or failed (Some(false)).
pub(super) fn finished(job: &Job) -> Option<bool> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let is = |type_: &str| conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
    if is("Complete") {
        Some(true)
    } else if is("Failed") {
        Some(false)
    } else {
        None
    }
}

/// A delete's result, a thing already gone being fine.
pub(super) fn gone<T>(result: Result<T, kube_client::Error>) -> Result<(), kube_client::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube_client::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error),
    }
}

/// The image a Job's dump container runs.
fn job_image(job: &Job) -> Option<String> {
    let pod = job.spec.as_ref()?.template.spec.as_ref()?;
    let mut all = pod.init_containers.iter().flatten().chain(&pod.containers);
    all.find(|c| c.name == backup::DUMP_CONTAINER)?.image.clone()
}

/// The status a Job's own status says.
fn from_job(status: &mut BackupStatus, job: &Job) {
    let Some(job_status) = job.status.as_ref() else { return pending(status, "the dump Job has not started".into()) };
    if status.start_time.is_none() {
        status.start_time = job_status.start_time.clone();
    }
    let condition =
        |type_: &str| job_status.conditions.iter().flatten().find(|c| c.type_ == type_ && c.status == "True");
    if let Some(complete) = condition("Complete") {
        let at = job_status.completion_time.clone().or_else(|| complete.last_transition_time.clone());
        finish(status, BackupPhase::Completed, "DumpCompleted", "the dump is in the claim".into(), at);
    } else if let Some(failed) = condition("Failed") {
        let reason = failed.reason.clone().unwrap_or_else(|| "JobFailed".into());
        let message = format!("the dump Job failed: {}", failed.message.clone().unwrap_or_else(|| reason.clone()));
        finish(status, BackupPhase::Failed, &reason, message, failed.last_transition_time.clone());
    } else if job_status.active.unwrap_or(0) > 0 {
        status.phase = Some(BackupPhase::Running);
        status.message = Some("the dump runs".into());
    } else {
        pending(status, "the dump Job's pod is starting".into());
    }
}

impl Reconciler for BackupReconciler {
    type Error = Error;

    async fn reconcile(&self, key: &str) -> Result<Action, Error> {
        let Some(backup) = self.stores.backups.get(key) else {
            self.statuses.forget(key);
            debug!("DatabaseBackup is gone; nothing to do");
            return Ok(Action::Done);
        };
        if backup.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        // A status this process wrote and the cache has not shown yet is the current one.
        let backup = match self.statuses.catch_up(key, backup.metadata.resource_version.as_deref()) {
            Some(status) => Arc::new(DatabaseBackup { status: Some(status), ..DatabaseBackup::clone(&backup) }),
            None => backup,
        };
        self.reconcile_backup(&backup).await
    }
}

/// Maps a Database to the keys of the DatabaseBackups of it that are not finished (they wait
/// for it, or are watching its dump).
pub(crate) fn backups_of(backups: Store<DatabaseBackup>) -> impl Fn(&Database) -> Vec<String> + Send + Sync + 'static {
    move |db: &Database| {
        backups
            .by_index(index::BY_DATABASE, &key_of(db))
            .iter()
            .filter(|b| !b.status.as_ref().and_then(|s| s.phase).is_some_and(BackupPhase::is_finished))
            .map(|b| key_of(b.as_ref()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus};

    /// A pod whose container `name` ended at second `at` with `message`.
    fn ended(name: &str, at: i64, message: &str) -> Pod {
        let terminated = ContainerStateTerminated {
            finished_at: Some(Time(Timestamp::from_second(at).unwrap())),
            message: Some(format!("{message}\n")),
            ..Default::default()
        };
        let status = ContainerStatus {
            name: name.into(),
            state: Some(ContainerState { terminated: Some(terminated), ..Default::default() }),
            ..Default::default()
        };
        Pod {
            status: Some(PodStatus { container_statuses: Some(vec![status]), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn an_upload_s_last_words_are_those_of_its_latest_attempt() {
        let pods =
            [ended("upload", 20, "connection refused"), ended("upload", 30, "NoSuchBucket"), ended("dump", 40, "x")];
        assert_eq!(last_words(&pods, "upload").as_deref(), Some("NoSuchBucket"));
        assert_eq!(last_words(&pods[..0], "upload"), None, "no pod");
    }

    fn job(status: JobStatus) -> Job {
        Job { status: Some(status), ..Default::default() }
    }

    #[test]
    fn a_job_s_progress_becomes_the_backup_s_phase() {
        let mut status = BackupStatus::default();
        from_job(&mut status, &job(JobStatus { active: Some(1), ..Default::default() }));
        assert_eq!(status.phase, Some(BackupPhase::Running));
        let complete = JobCondition { type_: "Complete".into(), status: "True".into(), ..Default::default() };
        from_job(&mut status, &job(JobStatus { conditions: Some(vec![complete]), ..Default::default() }));
        assert_eq!(status.phase, Some(BackupPhase::Completed));
        assert!(status.completion_time.is_some());

        let mut status = BackupStatus::default();
        let failed = JobCondition {
            type_: "Failed".into(),
            status: "True".into(),
            reason: Some("BackoffLimitExceeded".into()),
            message: Some("Job has reached the specified backoff limit".into()),
            ..Default::default()
        };
        from_job(&mut status, &job(JobStatus { conditions: Some(vec![failed]), ..Default::default() }));
        assert_eq!(status.phase, Some(BackupPhase::Failed));
        assert!(status.message.unwrap().contains("backoff limit"));
        assert_eq!(status.conditions[0].reason, "BackoffLimitExceeded");
    }
}
