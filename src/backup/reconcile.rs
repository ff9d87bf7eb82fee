//! The DatabaseBackup reconcile: the backup controller, the second controller of the operator.
//!
//! For a key it reads the DatabaseBackup, its Database, its claim and its Job from the
//! informers' caches (the Database and claim informers are the ones the Database controller
//! uses: one cache per kind for both controllers), and:
//!
//! 1. waits (`Pending`) until the Database exists and is Ready: a dump needs a server;
//! 2. creates the claim and the Job once ([`super::job`]), never applies them again (a Job's
//!    template cannot change);
//! 3. reports the Job's progress in the status: `Running`, then `Completed` or `Failed` with
//!    the Job's own reason, and a Normal or Warning event. A finished backup is never looked
//!    at again: its claim keeps the dump.
//!
//! A Database without an engine cannot be dumped: the backup fails at once and says so.

use std::fmt::Debug;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, info};

use super::{BackupPhase, BackupStatus, DatabaseBackup, job};
use crate::controller::{Action, Reconciler};
use crate::database::view::PersistentVolumeClaimView;
use crate::database::{Database, Phase, children};
use crate::events::{EventType, Recorder};
use crate::informer::{Store, key_of};

/// A failed reconcile; retried with backoff.
#[derive(Debug, thiserror::Error)]
#[error("writing {what} failed: {source}")]
pub struct Error {
    what: String,
    #[source]
    source: kube_client::Error,
}

/// The caches the backup reconcile reads.
#[derive(Clone, Debug)]
pub struct Stores {
    /// DatabaseBackups.
    pub backups: Store<DatabaseBackup>,
    /// Databases (the Database controller's cache).
    pub databases: Store<Database>,
    /// Claims carrying the operator's label (the Database controller's cache).
    pub claims: Store<PersistentVolumeClaimView>,
    /// Jobs carrying the operator's label.
    pub jobs: Store<Job>,
}

/// The DatabaseBackup reconciler.
#[derive(Clone)]
pub struct BackupReconciler {
    client: Client,
    stores: Stores,
    recorder: Recorder,
}

impl Debug for BackupReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupReconciler").field("backups", &self.stores.backups.len()).finish_non_exhaustive()
    }
}

impl BackupReconciler {
    /// A reconciler reading `stores` and writing through `client`.
    pub fn new(client: Client, stores: Stores, recorder: Recorder) -> Self {
        Self { client, stores, recorder }
    }

    async fn reconcile_backup(&self, backup: &DatabaseBackup) -> Result<Action, Error> {
        let namespace = backup.metadata.namespace.clone().unwrap_or_default();
        let previous = backup.status.clone().unwrap_or_default();
        if previous.phase.is_some_and(BackupPhase::is_finished) {
            return Ok(Action::Done);
        }
        let database = &backup.spec.database;
        let mut status = previous.clone();
        let db = self.stores.databases.get(&format!("{namespace}/{database}"));
        let engine = db.as_deref().and_then(children::engine_of);
        match (&db, engine) {
            (None, _) => pending(&mut status, format!("waiting for Database {database:?}, which does not exist")),
            (Some(_), None) => {
                let message =
                    format!("Database {database:?} has no engine: only a Database with an engine can be backed up");
                finish(&mut status, BackupPhase::Failed, "NoEngine", message, None);
            }
            (Some(db), Some(engine)) => {
                let ready = db.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready);
                let job = self.stores.jobs.get(&key_of(backup));
                match job {
                    // A dump needs a server; a Job already started goes on regardless.
                    None if !ready => pending(&mut status, format!("waiting for Database {database:?} to be Ready")),
                    None => {
                        let image = db
                            .status
                            .as_ref()
                            .and_then(|s| s.current_image.clone())
                            .unwrap_or_else(|| db.spec.image.clone());
                        if self.stores.claims.get(&key_of(backup)).is_none() {
                            self.create(backup, &job::claim(backup, db)).await?;
                        }
                        self.create(backup, &job::job(backup, db, engine, &image)).await?;
                        status.engine = db.spec.engine;
                        status.image = Some(image);
                        status.claim_name = backup.metadata.name.clone();
                        pending(&mut status, "the dump Job was created".to_string());
                    }
                    Some(job) => {
                        // From the Job, not the cached status, which may lag behind the write
                        // that recorded them: an apply without them would remove them.
                        status.engine = db.spec.engine;
                        status.image = job_image(&job);
                        status.claim_name = backup.metadata.name.clone();
                        from_job(&mut status, &job);
                    }
                }
            }
        }
        if status != previous {
            if let Some(phase) = status.phase.filter(|p| p.is_finished() && Some(*p) != previous.phase) {
                let (kind, reason) = match phase {
                    BackupPhase::Completed => (EventType::Normal, "Completed"),
                    _ => (EventType::Warning, "Failed"),
                };
                let note = status.message.clone().unwrap_or_else(|| format!("the backup {phase}"));
                self.recorder.publish(backup, kind, reason, "Backup", &note);
            }
            self.write_status(backup, &status).await?;
        }
        Ok(Action::Done)
    }

    /// Creates a child of `backup` once; one that exists already (made a moment ago, not yet
    /// in the cache) is fine.
    async fn create<T>(&self, backup: &DatabaseBackup, child: &T) -> Result<(), Error>
    where
        T: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        let kind = T::kind(&());
        let api: Api<T> = Api::namespaced(self.client.clone(), child.meta().namespace.as_deref().unwrap_or_default());
        let params = PostParams { field_manager: Some(children::MANAGER.into()), ..Default::default() };
        match api.create(&params, child).await {
            Ok(_) => {
                info!(child = %key_of(child), "created {kind}");
                let note = format!("created {kind} {}", child.meta().name.as_deref().unwrap_or_default());
                self.recorder.publish(backup, EventType::Normal, "Created", "Backup", &note);
                Ok(())
            }
            Err(kube_client::Error::Api(status)) if status.is_already_exists() => Ok(()),
            Err(source) => Err(Error { what: format!("{kind} {}", key_of(child)), source }),
        }
    }

    async fn write_status(&self, backup: &DatabaseBackup, status: &BackupStatus) -> Result<(), Error> {
        let api: Api<DatabaseBackup> =
            Api::namespaced(self.client.clone(), backup.metadata.namespace.as_deref().unwrap_or_default());
        let body = serde_json::json!({
            "apiVersion": DatabaseBackup::api_version(&()),
            "kind": DatabaseBackup::kind(&()),
            "status": status,
        });
        let params = PatchParams::apply(children::MANAGER).force();
        api.patch_status(backup.metadata.name.as_deref().unwrap_or_default(), &params, &Patch::Apply(&body))
            .await
            .map_err(|source| Error { what: format!("status of DatabaseBackup {}", key_of(backup)), source })?;
        info!(phase = ?status.phase, "wrote status");
        Ok(())
    }
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
    status.conditions = vec![Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.into(),
        message,
        last_transition_time: now,
        observed_generation: None,
    }];
}

/// The image a Job's container runs.
fn job_image(job: &Job) -> Option<String> {
    job.spec.as_ref()?.template.spec.as_ref()?.containers.first()?.image.clone()
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
            debug!("DatabaseBackup is gone; nothing to do");
            return Ok(Action::Done);
        };
        if backup.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        self.reconcile_backup(&backup).await
    }
}

/// The index of DatabaseBackups by the `namespace/name` of their Database.
pub const BY_DATABASE: &str = "database";

/// The [`BY_DATABASE`] index function.
pub fn by_database(backup: &DatabaseBackup) -> Vec<String> {
    vec![format!("{}/{}", backup.metadata.namespace.as_deref().unwrap_or_default(), backup.spec.database)]
}

/// Maps a Database to the keys of the DatabaseBackups of it that are not finished (they wait
/// for it, or are watching its dump).
pub fn backups_of(backups: Store<DatabaseBackup>) -> impl Fn(&Database) -> Vec<String> + Send + Sync + 'static {
    move |db: &Database| {
        backups
            .by_index(BY_DATABASE, &key_of(db))
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
