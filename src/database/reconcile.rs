//! The Database reconciler: a pass of named phases over one Database, then its status.
//!
//! ```text
//! plan the image ─> ownership ─> restorable ─> credentials ─> volume ─> backup ready
//!   (upgrade.rs)                                (children.rs)             ─> workload
//!              ─> replicas (replicas.rs) ─> positions (positions.rs) ─> health ─> pods (pods.rs)
//!                  any phase may stop the pass: Blocked(reason) or Failed(error)
//! ─> status (status.rs) ─> schedule (schedule.rs) ─> write the status ─> publish the events
//! ```
//!
//! - Each phase reads the caches and returns a [`Step`]: go on, or a [`Halt`]. A blocked pass
//!   is not an error: the Database is reported (`Pending` for a wait, `Degraded` for a fault)
//!   with the blocker's reason, and only a fault the caches cannot show (a foreign object) is
//!   looked at again on a timer ([`FOREIGN_RECHECK`]). An error is retried with backoff; a
//!   server's `Retry-After` is honoured by the controller's worker.
//! - A child the apiserver rejects (a spec that passes the CRD schema but cannot be realised)
//!   blocks with reason `InvalidSpec` and is not retried until the Database changes: retrying
//!   the same spec cannot help, so there is no hot loop.
//! - Deletion needs no code: the children carry a controller ownerReference and go with the
//!   Database through garbage collection. A key whose Database is gone is done.
//! - Events are collected on the way ([`Report`]) and published once at the end, also when the
//!   pass failed: what was done is told. A blocker's event is published only while the stored
//!   status does not say it yet ([`Blocker::reported_in`]): the status, as this process last
//!   wrote it ([`Statuses`]), is the one record of what was said.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use operator_runtime::controller::{Action, ReconcileError, Reconciler};
use operator_runtime::events::{Recorder, Report};
use operator_runtime::informer::{Store, key_of};
use operator_runtime::write::{Created, Statuses, Writer};
use tracing::{debug, info};

use super::down::Down;
use super::following::Following;
use super::pods::{self, POD_GRACE};
use super::restore::{self, Restore};
use super::status::{self, Blocker};
use super::upgrade::{self, Plan};
use crate::api::{BackupPhase, Database, DatabaseBackup, DatabaseStatus, InstanceStatus, Role, UpgradeState};
use crate::engine::{self, Engine};
use crate::resources::meta::is_controlled_by;
use crate::resources::restore::restored;
use crate::resources::view::{DeploymentView, PersistentVolumeClaimView, SecretView, ServiceView};

/// A failed reconcile; retried with backoff, or when the server said ([`ReconcileError`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A write to the apiserver failed for a reason that may pass (conflict, timeout,
    /// throttling, an unavailable apiserver).
    #[error("writing {what} failed: {source}")]
    Write {
        /// What was being written, e.g. `Deployment shop/orders`.
        what: String,
        /// The client's error.
        #[source]
        source: kube_client::Error,
    },
    /// A read the cache cannot answer failed.
    #[error("reading {what} failed: {source}")]
    Read {
        /// What was being read.
        what: String,
        /// The client's error.
        #[source]
        source: kube_client::Error,
    },
    /// The operating system's random generator failed while generating a password.
    #[error("cannot generate a password: {0}")]
    Random(String),
}

impl ReconcileError for Error {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Write { source, .. } | Error::Read { source, .. } => operator_runtime::client::retry_after(source),
            Error::Random(_) => None,
        }
    }
}

/// Why a pass stopped before its end.
#[derive(Debug)]
pub(super) enum Halt {
    /// The Database cannot go on until something changes: reported in its status.
    Blocked(Blocker),
    /// Something failed that may pass: retried.
    Failed(Error),
}

impl From<Blocker> for Halt {
    fn from(blocker: Blocker) -> Self {
        Halt::Blocked(blocker)
    }
}

impl From<Error> for Halt {
    fn from(error: Error) -> Self {
        Halt::Failed(error)
    }
}

/// What a phase returns: go on (with a value), or stop here.
pub(super) type Step<T = ()> = Result<T, Halt>;

/// The caches the reconcile reads.
#[derive(Clone, Debug)]
pub(crate) struct Stores {
    /// Databases.
    pub(crate) databases: Store<Database>,
    /// Deployments carrying the operator's label, views.
    pub(crate) deployments: Store<DeploymentView>,
    /// Services carrying the operator's label, views.
    pub(crate) services: Store<ServiceView>,
    /// Claims carrying the operator's label.
    pub(crate) claims: Store<PersistentVolumeClaimView>,
    /// Secrets carrying the operator's label, metadata only.
    pub(crate) secrets: Store<SecretView>,
    /// PodDisruptionBudgets carrying the operator's label (Databases of several instances).
    pub(crate) disruption_budgets: Store<PodDisruptionBudget>,
    /// DatabaseBackups (the backup controller's cache): restores, schedules, backups before
    /// upgrades.
    pub(crate) backups: Store<DatabaseBackup>,
}

/// How often a Database blocked by a foreign object is looked at again: its cache does not
/// see that object change or go away.
pub(crate) const FOREIGN_RECHECK: Duration = Duration::from_secs(30);

/// The Database reconciler: caches to read from, a writer, a recorder.
#[derive(Clone)]
pub(crate) struct DatabaseReconciler {
    pub(super) writer: Writer,
    pub(super) stores: Stores,
    recorder: Recorder,
    statuses: Statuses<DatabaseStatus>,
    /// Where each replica found behind stood, and since when.
    pub(super) following: Following,
    /// When each Database's primary was first seen not ready ([`super::failover`]).
    pub(super) down: Down,
    /// The rollout benchmark's marker on every Deployment (`--bench-rollout-marker`).
    pub(super) rollout_marker: Option<String>,
    /// The operator's own image, which fetches a restore's dump from a bucket (`--backup-image`).
    backup_image: Option<String>,
}

impl Debug for DatabaseReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseReconciler").field("databases", &self.stores.databases.len()).finish_non_exhaustive()
    }
}

/// One pass over one Database: what it has found and done so far.
pub(super) struct Pass<'a> {
    pub(super) db: &'a Database,
    pub(super) engine: Option<&'static dyn Engine>,
    pub(super) now: Time,
    pub(super) plan: Plan,
    pub(super) restore: Restore,
    /// The Deployment as the workload phase wrote or found it.
    pub(super) deployment: Option<Arc<DeploymentView>>,
    /// The uid of the data claim as the volume phase wrote or found it: `status.claimUID`.
    pub(super) claim_uid: Option<String>,
    /// Each instance, as the replicas phase found them (Databases of several instances).
    pub(super) instances: Vec<InstanceStatus>,
    /// The Database's pods, when the roles phase listed them.
    pub(super) pods: Option<Vec<Pod>>,
    /// The instance (its ordinal) whose Deployment starts the primary in this pass: the one
    /// the record names, or none while an old primary may still run ([`super::failover`]).
    pub(super) primary: Option<i32>,
    /// Where each instance stands in the WAL, as the positions phase asked (in the order of
    /// `instances`).
    pub(super) positions: Vec<Option<crate::engine::position::Position>>,
    /// When a phase asked for the Database to be looked at again, for what it cannot watch.
    pub(super) recheck: Option<Duration>,
    /// A fault a phase found that does not stop the pass: the Database is blocked by it once
    /// the last phase has found nothing else.
    pub(super) degraded: Option<Blocker>,
    pub(super) report: Report,
}

impl<'a> Pass<'a> {
    /// The key of a sibling of the Database: an object of its namespace named `name`.
    pub(super) fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.db.metadata.namespace.as_deref().unwrap_or_default())
    }

    pub(super) fn name(&self) -> String {
        self.db.metadata.name.clone().unwrap_or_default()
    }
}

impl DatabaseReconciler {
    /// A reconciler reading `stores` and writing through `writer`.
    pub(crate) fn new(
        writer: Writer,
        stores: Stores,
        recorder: Recorder,
        rollout_marker: Option<String>,
        backup_image: Option<String>,
    ) -> Self {
        Self {
            writer,
            stores,
            recorder,
            statuses: Statuses::default(),
            following: Following::default(),
            down: Down::default(),
            rollout_marker,
            backup_image,
        }
    }

    /// The record of the statuses this reconciler wrote, for the controller to tell their
    /// echoes ([`controller::Builder::own_statuses`](operator_runtime::controller::Builder::own_statuses)).
    pub(crate) fn statuses(&self) -> Statuses<DatabaseStatus> {
        self.statuses.clone()
    }

    /// One pass: the phases, then the status; the events it collected are published at the end.
    async fn reconcile_database(&self, db: &Database) -> Result<Action, Error> {
        let mut pass = Pass {
            db,
            engine: engine::of_database(db),
            now: now(),
            plan: Plan::steady(&db.spec.image),
            restore: restore::restore(db, &self.stores.backups, &self.stores.claims, self.backup_image.as_deref()),
            deployment: None,
            claim_uid: None,
            instances: Vec::new(),
            pods: None,
            primary: None,
            positions: Vec::new(),
            recheck: None,
            degraded: None,
            report: Report::default(),
        };
        let outcome = self.run(&mut pass).await;
        let report = std::mem::take(&mut pass.report);
        self.recorder.publish_report(db, "Reconcile", report);
        outcome
    }

    async fn run(&self, pass: &mut Pass<'_>) -> Result<Action, Error> {
        pass.plan = self.plan_image(pass).await?;
        let blocker = match self.phases(pass).await {
            Ok(()) => None,
            Err(Halt::Blocked(blocker)) => Some(blocker),
            Err(Halt::Failed(error)) => return Err(error),
        };
        let restored = restored_now(pass).is_some();
        let observed = status::Seen {
            deployment: pass.deployment.as_deref(),
            blocker: blocker.as_ref(),
            restored,
            instances: &pass.instances,
        };
        let mut status = status::desired(pass.db, &observed, &pass.plan, &pass.now);
        if let Some(uid) = pass.claim_uid.take() {
            status.claim_uid = Some(uid);
        }
        if let Some(blocker) = &blocker
            && !blocker.reported_in(pass.db.status.as_ref())
        {
            let (reason, message) = (blocker.reason(), blocker.message());
            match blocker {
                Blocker::Waiting { .. } => pass.report.normal(reason, message),
                _ => pass.report.warning(reason, message),
            }
        }
        self.mark_restored(pass, &mut status);
        // The status is written also when the schedule failed: it says what the pass found.
        let schedule = self.run_schedule(pass, &mut status).await;
        self.report_verification(pass, &mut status);
        self.write_status(pass.db, &status).await?;
        let next_backup = schedule?;
        // An upgrade in progress is looked at again at its deadline, a schedule at its next
        // time, a foreign object after a while, even if nothing changes.
        let foreign = matches!(blocker, Some(Blocker::NotOwned { .. })).then_some(FOREIGN_RECHECK);
        // Pods are not watched: one that does not run is looked at again on a timer.
        let pod = (not_running(pass) || pass.instances.iter().any(|i| !i.ready)).then_some(POD_GRACE);
        let recheck = [pass.plan.recheck_after, next_backup, foreign, pod, pass.recheck].into_iter().flatten().min();
        Ok(recheck.map_or(Action::Done, Action::RequeueAfter))
    }

    /// The phases that bring the children to the spec, in order; the first that cannot go on
    /// stops the pass. Ownership comes first, for both children: writing one while the other
    /// is foreign would, e.g., point our Service at someone else's pods.
    async fn phases(&self, pass: &mut Pass<'_>) -> Step {
        self.ownership(pass)?;
        restorable(pass)?;
        if let Some(engine) = pass.engine {
            self.credentials(pass, engine).await?;
            self.volume(pass).await?;
            backup_ready(pass)?;
        }
        self.roles(pass).await?;
        self.workload(pass).await?;
        self.replicas(pass).await?;
        self.positions(pass).await?;
        self.failover(pass).await?;
        health(pass)?;
        self.pods(pass).await?;
        pass.degraded.take().map_or(Ok(()), |blocker| Err(blocker.into()))
    }

    /// Why the pod of a Database with an engine does not run, once its Deployment has not been
    /// ready for [`POD_GRACE`], or why a replica's does not, once the last status showed it not
    /// ready either ([`pods`]): one list of its pods.
    async fn pods(&self, pass: &Pass<'_>) -> Step {
        let db = pass.db;
        let not_ready_since = db.status.as_ref().and_then(|s| {
            let ready = s.conditions.iter().find(|c| c.type_ == "Ready" && c.status == "False")?;
            Some(ready.last_transition_time.0)
        });
        let long_enough = not_ready_since.is_some_and(|since| {
            pass.now.0.duration_since(since).try_into().is_ok_and(|waited: Duration| waited >= POD_GRACE)
        });
        let primary = not_running(pass) && long_enough;
        let stuck = stuck_replicas(pass);
        if !primary && stuck.is_empty() {
            return Ok(());
        }
        let listed = match &pass.pods {
            Some(pods) => pods,
            None => &self.instance_pods(pass).await?,
        };
        let found = if primary { pods::diagnose(listed) } else { pods::diagnose_replicas(listed, &stuck) };
        match found {
            Some(blocker) => Err(blocker.into()),
            None => Ok(()),
        }
    }

    /// Which image runs: `spec.image`, unless an upgrade to it was refused or rolled back, or
    /// waits for the backup taken before it, which this phase creates.
    async fn plan_image(&self, pass: &mut Pass<'_>) -> Result<Plan, Error> {
        let db = pass.db;
        let live = self.stores.deployments.get(&key_of(db));
        let backup_name = upgrade::pre_upgrade_backup_name(db, &db.spec.image);
        let pre_upgrade = self.stores.backups.get(&pass.key(&backup_name));
        let phase =
            pre_upgrade.as_ref().map(|b| b.status.as_ref().and_then(|s| s.phase).unwrap_or(BackupPhase::Pending));
        let plan = upgrade::plan(db, pass.engine, live.as_deref(), &pass.now, phase);
        if plan.upgrade.as_ref().is_some_and(|u| u.state == UpgradeState::BackingUp) && pre_upgrade.is_none() {
            self.create_backup(pass, &upgrade::pre_upgrade_backup(db, &backup_name)).await?;
        }
        Ok(plan)
    }

    /// A same-named Deployment or Service that this Database does not control blocks it.
    fn ownership(&self, pass: &Pass<'_>) -> Step {
        let key = key_of(pass.db);
        let foreign = |controlled: Option<bool>, kind| match controlled {
            Some(false) => Err(Blocker::NotOwned { kind, name: pass.name() }),
            _ => Ok(()),
        };
        let ours = |meta: &kube_core::ObjectMeta| is_controlled_by(meta, pass.db);
        foreign(self.stores.deployments.get(&key).map(|d| ours(&d.metadata)), "Deployment")?;
        foreign(self.stores.services.get(&key).map(|s| ours(&s.metadata)), "Service")?;
        Ok(())
    }

    /// Marks the restore done once the restored server has been Ready.
    fn mark_restored(&self, pass: &Pass<'_>, status: &mut DatabaseStatus) {
        if let Some(backup) = restored_now(pass) {
            info!(backup = %backup, "restored");
            status.restored_from = Some(backup.to_string());
        }
    }

    /// Writes `status` when it differs from the stored one, and remembers it until the cache
    /// shows it.
    async fn write_status(&self, db: &Database, status: &DatabaseStatus) -> Result<(), Error> {
        if db.status.as_ref() == Some(status) {
            return Ok(());
        }
        let key = key_of(db);
        let stored = self
            .writer
            .apply_status(db, status)
            .await
            .map_err(|source| Error::Write { what: format!("status of Database {key}"), source })?;
        let (read, written) = (db.metadata.resource_version.as_deref(), stored.metadata.resource_version.as_deref());
        self.statuses.wrote(&key, read, status, written);
        let changed = db
            .status
            .as_ref()
            .map_or_else(|| Some("status".into()), |live| operator_runtime::drift::difference(status, live));
        info!(phase = ?status.phase, ready = status.ready_replicas.unwrap_or_default(), changed = %changed.unwrap_or_default(), "wrote status");
        Ok(())
    }

    /// Creates a DatabaseBackup of the Database (one that exists already is the one wanted: the
    /// names are one per scheduled time, one per upgrade). Not owned by the Database: a backup
    /// outlives what it backs up.
    pub(super) async fn create_backup(&self, pass: &mut Pass<'_>, backup: &DatabaseBackup) -> Result<(), Error> {
        let name = backup.metadata.name.clone().unwrap_or_default();
        match self.writer.create(backup).await {
            Ok(Created::New) => {
                info!(backup = %name, "created DatabaseBackup");
                pass.report.normal("BackupCreated", format!("created DatabaseBackup {name}"));
                Ok(())
            }
            Ok(Created::Existed(_)) => Ok(()),
            Err(source) => Err(Error::Write { what: format!("DatabaseBackup {name}"), source }),
        }
    }
}

/// Now, as a status time.
pub(crate) fn now() -> Time {
    Time(Timestamp::now())
}

/// The backup restored, when this pass records the restore: the pod that loaded it runs the
/// plan's image Ready. The next pass replaces that pod by one without the restore's init
/// container, once the record is written (the other order could restore twice).
fn restored_now<'a>(pass: &'a Pass<'_>) -> Option<&'a str> {
    match &pass.restore {
        Restore::From { backup, .. } if pass.deployment.as_deref().is_some_and(|d| restored(d, &pass.plan.image)) => {
            Some(backup)
        }
        _ => None,
    }
}

/// A restore from a backup that failed, or of another engine, blocks the Database.
fn restorable(pass: &Pass<'_>) -> Step {
    match &pass.restore {
        Restore::Impossible { reason, message } => {
            Err(Blocker::Unrestorable { reason, message: message.clone() }.into())
        }
        _ => Ok(()),
    }
}

/// A restore's pod waits for its backup to complete.
fn backup_ready(pass: &Pass<'_>) -> Step {
    match &pass.restore {
        Restore::Waiting(message) => {
            Err(Blocker::Waiting { reason: "WaitingForBackup", message: message.clone() }.into())
        }
        _ => Ok(()),
    }
}

/// Whether the Database has an engine and a Deployment that does not run its image Ready,
/// outside an upgrade (whose timeout and policy decide what happens, and say so).
fn not_running(pass: &Pass<'_>) -> bool {
    pass.engine.is_some()
        && pass.plan.upgrade.is_none()
        && pass.deployment.as_deref().is_some_and(|d| !d.runs_ready(&pass.plan.image))
}

/// The replicas of a Database whose primary runs that are not ready, and were not at the last
/// status either (none during an upgrade, whose own timeout decides).
fn stuck_replicas<'p>(pass: &'p Pass<'_>) -> Vec<&'p str> {
    if pass.plan.upgrade.is_some() || not_running(pass) {
        return Vec::new();
    }
    let before = pass.db.status.as_ref().map_or(&[][..], |s| &s.instances[..]);
    let not_ready_before = |name: &str| before.iter().any(|b| b.name == name && !b.ready);
    pass.instances
        .iter()
        .filter(|i| i.role == Some(Role::Replica) && !i.ready && not_ready_before(&i.name))
        .map(|i| i.name.as_str())
        .collect()
}

/// A Deployment that cannot run its pods blocks the Database, in its own words.
fn health(pass: &Pass<'_>) -> Step {
    match pass.deployment.as_deref().and_then(Blocker::from_deployment) {
        Some(blocker) => Err(blocker.into()),
        None => Ok(()),
    }
}

impl Reconciler for DatabaseReconciler {
    type Error = Error;

    async fn reconcile(&self, key: &str) -> Result<Action, Error> {
        let Some(db) = self.stores.databases.get(key) else {
            self.statuses.forget(key);
            debug!("Database is gone; nothing to do");
            return Ok(Action::Done);
        };
        if db.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        // A status this process wrote and the cache has not shown yet is the current one.
        let db = match self.statuses.catch_up(key, db.metadata.resource_version.as_deref()) {
            Some(status) => Arc::new(Database { status: Some(status), ..Database::clone(&db) }),
            None => db,
        };
        self.reconcile_database(&db).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_core::Status;
    use kube_core::response::StatusDetails;

    fn write_error(code: u16, retry_after_seconds: u32) -> Error {
        let status = Status {
            code,
            details: Some(StatusDetails {
                name: "a".into(),
                group: "apps".into(),
                kind: "deployments".into(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds,
            }),
            ..Default::default()
        };
        Error::Write { what: "Deployment ns/a".into(), source: kube_client::Error::Api(Box::new(status)) }
    }

    #[test]
    fn too_many_requests_is_retried_after_the_servers_delay() {
        assert_eq!(write_error(429, 7).retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(write_error(429, 0).retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn other_errors_use_the_queues_backoff() {
        assert_eq!(write_error(409, 7).retry_after(), None);
        assert_eq!(write_error(500, 0).retry_after(), None);
    }
}
