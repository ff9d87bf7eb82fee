//! The operator's two controllers on one informer factory: "database" (Databases, their
//! Deployments, Services, claims and Secrets) and "databasebackup" (DatabaseBackups, their
//! Jobs). Where both watch a kind, they share its informer: the Databases, the claims, the
//! DatabaseBackups (the Database controller reads them for restores and schedules). Each has
//! its own work queue and workers; they stop together.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube_client::Client;
use tokio_util::sync::CancellationToken;

use operator_runtime::controller::{self, Controller};
use operator_runtime::events::Recorder;
use operator_runtime::informer::{self, Factory, key_of, strip_annotations_and_managed_fields};
use operator_runtime::workqueue::{self, RateLimitingQueue};
use operator_runtime::write::Writer;

use crate::api::{Database, DatabaseBackup, PRIMARY_ANNOTATION, index};
use crate::backup::{self, BackupReconciler};
use crate::database::{self, DatabaseReconciler};
use crate::resources::meta::{LABEL_SELECTOR, MANAGER};
use crate::resources::view::{DeploymentView, PersistentVolumeClaimView, SecretView, ServiceView};

/// The controllers and their reconcilers, ready to run.
pub(super) struct Controllers {
    database: (Controller<Database>, Arc<DatabaseReconciler>),
    backup: (Controller<DatabaseBackup>, Arc<BackupReconciler>),
}

/// What every controller is built with.
pub(super) struct Settings {
    pub(super) workers: usize,
    pub(super) priority_queue: bool,
    pub(super) cache_sync_timeout: std::time::Duration,
    pub(super) queue_metrics: workqueue::Metrics,
    pub(super) controller_metrics: controller::Metrics,
    pub(super) rollout_marker: Option<String>,
    pub(super) backup_image: Option<String>,
}

impl Controllers {
    /// Creates the informers both controllers need on `factory` (before it starts) and wires
    /// them to the controllers.
    pub(super) fn build(factory: &Factory, client: &Client, recorder: &Recorder, settings: Settings) -> Self {
        // Before any view is decoded: the strings most children hold alike are shared.
        crate::desired::share_words();
        let databases = factory.informer::<Database>();
        // The children: only the operator's own (most of a cluster's are not), and the Secrets
        // as metadata (the operator never holds a password it does not need).
        let deployments = factory.informer_selected::<DeploymentView>(LABEL_SELECTOR);
        let services = factory.informer_selected::<ServiceView>(LABEL_SELECTOR);
        let claims = factory.informer_selected::<PersistentVolumeClaimView>(LABEL_SELECTOR);
        let secrets = factory.informer_selected::<SecretView>(LABEL_SELECTOR);
        let disruption_budgets = factory.informer_selected::<PodDisruptionBudget>(LABEL_SELECTOR);
        let jobs = factory.informer_selected::<Job>(LABEL_SELECTOR);
        let backups = factory.informer::<DatabaseBackup>();
        // Databases, DatabaseBackups, Jobs and PodDisruptionBudgets are cached whole, but for
        // their annotations: nothing reads them (but a Database's record of its primary), and
        // a user may write 256 KiB of them on each.
        databases.set_transform(Arc::new(cached_database));
        backups.set_transform(Arc::new(strip_annotations_and_managed_fields::<DatabaseBackup>));
        jobs.set_transform(Arc::new(strip_annotations_and_managed_fields::<Job>));
        disruption_budgets.set_transform(Arc::new(strip_annotations_and_managed_fields::<PodDisruptionBudget>));
        backups.add_indexer(index::BY_DATABASE, Arc::new(index::by_database));
        databases.add_indexer(index::BY_RESTORE_SOURCE, Arc::new(index::by_restore_source));
        let writer = Writer::new(client.clone(), MANAGER);

        let queue = |name: &str| {
            RateLimitingQueue::with_config(
                workqueue::Config::default()
                    .name(name)
                    .metrics(settings.queue_metrics.clone())
                    .prioritized(settings.priority_queue),
            )
        };
        let stores = database::Stores {
            databases: databases.store(),
            deployments: deployments.store(),
            services: services.store(),
            claims: claims.store(),
            secrets: secrets.store(),
            disruption_budgets: disruption_budgets.store(),
            backups: backups.store(),
        };
        let database_reconciler = DatabaseReconciler::new(
            writer.clone(),
            stores,
            recorder.clone(),
            settings.rollout_marker,
            settings.backup_image.clone(),
        );
        let database = controller::Builder::new("database", databases.clone())
            .owns(deployments.clone())
            .owns(services.clone())
            .owns(claims.clone())
            .owns(secrets.clone())
            .owns(disruption_budgets)
            // A retained claim or Secret has no owner: its label names its Database.
            .watches(claims.clone(), labelled_database(&databases))
            .watches(secrets, labelled_database(&databases))
            // A same-named object the Database does not control blocks it; when that object
            // changes or goes away, the Database must be looked at again. The caches show only
            // objects with the operator's label; a Database blocked by one without it is looked
            // at again every FOREIGN_RECHECK.
            .watches(deployments, same_name_database(&databases))
            .watches(services, same_name_database(&databases))
            // A restore waits for its backup (or the claim a deleted one kept), an upgrade for
            // the backup taken before it.
            .watches(backups.clone(), database::restore::databases_waiting_for(databases.store()))
            .watches(claims.clone(), database::restore::databases_restoring_from(databases.store()))
            .settled(database::status::settled)
            // The watch showing a status the reconciler wrote needs no reconcile.
            .own_statuses(database_reconciler.statuses())
            .workers(settings.workers)
            .cache_sync_timeout(settings.cache_sync_timeout)
            .queue(queue("database"))
            .metrics(settings.controller_metrics.clone())
            .build();

        let backup_stores = backup::Stores {
            backups: backups.store(),
            databases: databases.store(),
            claims: claims.store(),
            jobs: jobs.store(),
        };
        let backup_reconciler =
            BackupReconciler::new(writer, backup_stores, recorder.clone(), settings.backup_image.clone());
        let backup = controller::Builder::new("databasebackup", backups.clone())
            .owns(jobs)
            .owns(claims)
            // A backup waits for its Database to be Ready; its verification, for its throwaway
            // Database.
            .watches(databases.clone(), backup::backups_of(backups.store()))
            .owns(databases)
            .workers(settings.workers)
            .cache_sync_timeout(settings.cache_sync_timeout)
            .queue(queue("databasebackup"))
            .metrics(settings.controller_metrics)
            .build();
        Self { database: (database, Arc::new(database_reconciler)), backup: (backup, Arc::new(backup_reconciler)) }
    }

    /// The caches of Databases and DatabaseBackups both controllers read, for the per-Database
    /// metrics.
    pub(super) fn stores(&self) -> super::database_metrics::Stores {
        super::database_metrics::Stores {
            databases: self.database.0.primary().store(),
            backups: self.backup.0.primary().store(),
        }
    }

    /// Runs both until `drain` fires, then drains both (or aborts both, see
    /// [`Controller::run_until_aborted`]). The reconcilers, and so their event recorders, are
    /// dropped when both have stopped.
    pub(super) async fn run(self, drain: CancellationToken, abort: CancellationToken) -> Result<(), controller::Error> {
        let (database, database_reconciler) = self.database;
        let (backup, backup_reconciler) = self.backup;
        let (a, b) = futures::join!(
            database.run_until_aborted(database_reconciler, drain.clone(), abort.clone()),
            backup.run_until_aborted(backup_reconciler, drain, abort),
        );
        a.and(b)
    }
}

/// Maps any object to the key of the Database of the same namespace and name, if one exists.
fn same_name_database<C>(databases: &informer::Informer<Database>) -> impl Fn(&C) -> Vec<String> + Send + Sync + 'static
where
    C: kube_core::Resource<DynamicType = ()>,
{
    let store = databases.store();
    move |obj: &C| {
        let key = key_of(obj);
        if store.get(&key).is_some() { vec![key] } else { Vec::new() }
    }
}

/// Maps a child to the key of the Database its `app` label names, if one exists: the children
/// a Database leaves behind when retained have no owner to map them by.
fn labelled_database<C>(databases: &informer::Informer<Database>) -> impl Fn(&C) -> Vec<String> + Send + Sync + 'static
where
    C: kube_core::Resource<DynamicType = ()>,
{
    let store = databases.store();
    move |obj: &C| {
        let Some(name) = obj.meta().labels.as_ref().and_then(|l| l.get("app")) else { return Vec::new() };
        let key = format!("{}/{name}", obj.meta().namespace.as_deref().unwrap_or_default());
        if store.get(&key).is_some() { vec![key] } else { Vec::new() }
    }
}

/// A Database as the cache keeps it: without its managed fields, and of its annotations only
/// the record of its primary ([`PRIMARY_ANNOTATION`]).
fn cached_database(mut db: Database) -> Database {
    let primary = db.metadata.annotations.as_mut().and_then(|a| a.remove_entry(PRIMARY_ANNOTATION));
    let mut db = strip_annotations_and_managed_fields(db);
    db.metadata.annotations = primary.map(|entry| [entry].into());
    db
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DatabaseSpec, Size};

    #[test]
    fn a_cached_database_keeps_of_its_annotations_only_the_record_of_its_primary() {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
        db.metadata.annotations = Some([("big".to_string(), "x".repeat(1 << 16))].into());
        assert_eq!(cached_database(db.clone()).metadata.annotations, None);
        let record = (PRIMARY_ANNOTATION.to_string(), "orders-instance-2".to_string());
        db.metadata.annotations.as_mut().unwrap().insert(record.0.clone(), record.1.clone());
        assert_eq!(cached_database(db).metadata.annotations, Some([record].into()));
    }
}
