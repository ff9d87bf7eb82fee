//! The end of a backup in a bucket that its schedule let go (`spec.backup.keep`): retention
//! reaches the bucket too.
//!
//! The Database controller does not delete such a DatabaseBackup: it labels it
//! ([`EXPIRED_LABEL`]). The backup reconcile then runs a Job of the operator's image
//! (`bucket delete`, with the bucket's keys) that deletes the backup's folder, its manifest
//! first, so that nothing half-deleted is ever listed as a backup; once the Job has completed,
//! it deletes the DatabaseBackup. A failed Job leaves the backup and says why (a Warning event,
//! the message): deleting the Job tries again.
//!
//! A DatabaseBackup deleted otherwise (by hand, with its namespace) leaves its copy in the
//! bucket: that copy is what survives a namespace deleted by mistake; the bucket's own
//! lifecycle rules expire it.

use kube_client::Api;
use kube_client::api::DeleteParams;
use operator_runtime::controller::Action;
use operator_runtime::events::Report;
use operator_runtime::informer::key_of;
use operator_runtime::write::Created;

use super::reconcile::{BackupReconciler, Error, finished, gone, last_words};
use crate::api::{BackupPhase, BackupStatus, DatabaseBackup, EngineKind};
use crate::engine;
use crate::resources::backup::{EXPIRE_CONTAINER, EXPIRED_LABEL, expire_job, expire_job_name};
use crate::resources::bucket::Stored;
use crate::resources::meta::is_controlled_by;

impl BackupReconciler {
    /// Whether `backup`, whose status is `status`, is a Completed backup in a bucket that its
    /// schedule let go.
    pub(super) fn expiring(backup: &DatabaseBackup, status: &BackupStatus) -> bool {
        let labelled = backup.metadata.labels.as_ref().and_then(|l| l.get(EXPIRED_LABEL)).is_some_and(|v| v == "true");
        labelled && backup.spec.bucket.is_some() && status.phase == Some(BackupPhase::Completed)
    }

    /// The next step of `backup`'s expiry: its Job, then its deletion.
    pub(super) async fn expire(
        &self,
        backup: &DatabaseBackup,
        status: &mut BackupStatus,
        report: &mut Report,
    ) -> Result<Action, Error> {
        let (Some(bucket), Some(tools_image)) = (&backup.spec.bucket, self.tools_image.as_deref()) else {
            status.message = Some(
                "beyond spec.backup.keep, and its copy in the bucket cannot be deleted: the operator runs without \
                 --backup-image (BACKUP_IMAGE)"
                    .into(),
            );
            return Ok(Action::Done);
        };
        let namespace = backup.metadata.namespace.as_deref().unwrap_or_default();
        let name = expire_job_name(backup);
        let stored = Stored {
            bucket: bucket.clone(),
            folder: bucket.folder(namespace, backup.metadata.name.as_deref().unwrap_or_default()),
        };
        let job = match self.stores.jobs.get(&format!("{namespace}/{name}")) {
            Some(job) if is_controlled_by(&job.metadata, backup) => job,
            Some(_) => {
                status.message = Some(format!("Job {name:?} exists and is not this backup's: the copy stays"));
                return Ok(Action::Done);
            }
            None => {
                let engine = engine::of(status.engine.unwrap_or(EngineKind::Postgres));
                let created = self.writer.create(&expire_job(backup, &stored, engine, tools_image)).await;
                return match created {
                    Ok(Created::New | Created::Existed(_)) => Ok(Action::Done),
                    Err(source) => Err(Error::new(format!("creating Job {namespace}/{name}"), source)),
                };
            }
        };
        let location = crate::bucket::url(&bucket.name, &stored.folder);
        match finished(&job) {
            None => Ok(Action::Done),
            Some(true) => {
                let backups: Api<DatabaseBackup> = Api::namespaced(self.writer.client().clone(), namespace);
                let backup_name = backup.metadata.name.as_deref().unwrap_or_default();
                gone(backups.delete(backup_name, &DeleteParams::background()).await)
                    .map_err(|source| Error::new(format!("deleting DatabaseBackup {}", key_of(backup)), source))?;
                report.normal("Expired", format!("beyond spec.backup.keep: deleted {location} and this backup"));
                Ok(Action::Done)
            }
            Some(false) => {
                let words = last_words(&self.pods_of(&job).await?, EXPIRE_CONTAINER).unwrap_or_default();
                let message = format!(
                    "beyond spec.backup.keep, and deleting {location} failed: {words}; the backup stays (delete Job \
                     {name} to try again)"
                );
                if status.message.as_deref() != Some(message.as_str()) {
                    report.warning("ExpireFailed", message.clone());
                }
                status.message = Some(message);
                Ok(Action::Done)
            }
        }
    }
}
