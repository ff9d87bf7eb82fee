//! The Database reconcile: the Go sample's `syncHandler` (docs/design.md), done so that it
//! converges.
//!
//! For a key it reads the Database, its Deployment and its Service from the informers'
//! caches (never a GET per reconcile), builds the children it wants ([`super::children`]),
//! and writes with server-side apply only what differs ([`super::drift`]). The Go sample calls
//! Create on every sync and fails with AlreadyExists on every resync; here an unchanged
//! world costs no request at all.
//!
//! - A same-named child this Database does not control is never adopted or overwritten: the
//!   Database gets `Degraded=True, reason ResourceExists` and a Warning event.
//! - Every child kind is cached only as far as it carries the operator's label
//!   ([`LABEL_SELECTOR`]), so the operator's memory grows with its Databases, not with the
//!   cluster's Deployments and Services. A foreign object is then invisible, so a child missing
//!   from its cache is written create-only: a server-side apply carrying `resourceVersion: "1"`,
//!   a precondition no stored object meets (etcd's first write is revision 2). The apiserver
//!   creates the child when the name is free and answers 409 Conflict when anything holds it;
//!   the operator then reads that object: if this Database controls it (its label was removed,
//!   or the cache has not caught up with a create), it is applied as a cached child would be,
//!   which puts the label back; otherwise it is foreign. A create-only apply keeps server-side
//!   apply's ownership, so a field the operator stops setting later (a restore's init
//!   container) is removed; a plain create would leave it owned by an `Update` entry forever.
//! - A Database blocked by a foreign object is looked at again every [`FOREIGN_RECHECK`]:
//!   its cache does not see that object change or go away.
//! - A child the apiserver rejects (a spec that passes the CRD schema but cannot be
//!   realised) gets `reason InvalidSpec` and a Warning event, and is not retried until the
//!   Database changes: retrying the same spec cannot help, so there is no hot loop.
//! - Deletion needs no code: the children carry a controller ownerReference and go with the
//!   Database through garbage collection. A key whose Database is gone is done.
//! - With an engine, two more children come first: the credentials Secret (created once,
//!   never applied: see [`super::credentials`]) and the data claim ([`super::volume`]), both
//!   create-only when missing from their caches, as above.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, info};

use super::backups::{self, Restore, Scheduled};
use super::engine::Engine;
use super::status::{self, Blocker};
use super::view::{DeploymentView, PersistentVolumeClaimView, SecretView, ServiceView};
use super::written::Written;
use super::{Database, DatabaseStatus, UpgradeState, children, credentials, drift, upgrade, volume};
use crate::backup::{BackupPhase, DatabaseBackup};
use crate::controller::{Action, Reconciler};
use crate::events::{EventType, Recorder};
use crate::informer::Store;

/// A failed reconcile; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
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

impl Error {
    /// How long the apiserver asked us to wait, when it answered 429 Too Many Requests
    /// (API Priority and Fairness): its `Retry-After` (`details.retryAfterSeconds`), at
    /// least one second.
    pub fn retry_after(&self) -> Option<Duration> {
        let Error::Write { source: kube_client::Error::Api(status), .. } = self else { return None };
        (status.code == 429).then(|| {
            let seconds = status.details.as_ref().map_or(0, |d| d.retry_after_seconds).max(1);
            Duration::from_secs(u64::from(seconds))
        })
    }
}

/// The caches the reconcile reads.
#[derive(Clone, Debug)]
pub struct Stores {
    /// Databases.
    pub databases: Store<Database>,
    /// Deployments carrying the operator's label ([`LABEL_SELECTOR`]), views.
    pub deployments: Store<DeploymentView>,
    /// Services carrying the operator's label, views.
    pub services: Store<ServiceView>,
    /// Claims carrying the operator's label ([`LABEL_SELECTOR`]).
    pub claims: Store<PersistentVolumeClaimView>,
    /// Secrets carrying the operator's label, metadata only.
    pub secrets: Store<SecretView>,
    /// DatabaseBackups (the backup controller's cache): restores, schedules, backups before
    /// upgrades.
    pub backups: Store<DatabaseBackup>,
}

/// The label selector of the children's caches: only what the operator made.
pub const LABEL_SELECTOR: &str = "app.kubernetes.io/managed-by=database-operator";

/// How often a Database blocked by a foreign object is looked at again.
pub const FOREIGN_RECHECK: Duration = Duration::from_secs(30);

/// The resourceVersion of a create-only apply: no stored object has it (see the module's
/// documentation).
const NO_STORED_OBJECT: &str = "1";

/// The Database reconciler: caches to read from, a client to write with.
#[derive(Clone)]
pub struct DatabaseReconciler {
    client: Client,
    databases: Store<Database>,
    deployments: Store<DeploymentView>,
    services: Store<ServiceView>,
    claims: Store<PersistentVolumeClaimView>,
    secrets: Store<SecretView>,
    backups: Store<DatabaseBackup>,
    recorder: Recorder,
    announced: status::Announced,
    written: Written,
}

impl Debug for DatabaseReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseReconciler").field("databases", &self.databases.len()).finish_non_exhaustive()
    }
}

impl DatabaseReconciler {
    /// A reconciler reading the given caches and writing through `client`.
    pub fn new(client: Client, stores: Stores, recorder: Recorder) -> Self {
        let Stores { databases, deployments, services, claims, secrets, backups } = stores;
        Self {
            client,
            databases,
            deployments,
            services,
            claims,
            secrets,
            backups,
            recorder,
            announced: status::Announced::default(),
            written: Written::default(),
        }
    }

    async fn reconcile_database(&self, db: &Database) -> Result<Action, Error> {
        let key = crate::informer::key_of(db);
        let (live_deployment, live_service) = (self.deployments.get(&key), self.services.get(&key));
        let name = db.metadata.name.clone().unwrap_or_default();

        // Ownership first, for both children: writing one child while the other is foreign
        // would, e.g., point our Service at someone else's pods.
        let foreign = match (&live_deployment, &live_service) {
            (Some(d), _) if !children::is_controlled_by(d.as_ref(), db) => Some("Deployment"),
            (_, Some(s)) if !children::is_controlled_by(s.as_ref(), db) => Some("Service"),
            _ => None,
        };
        // Which image runs: spec.image, unless an upgrade to it was refused or rolled back, or
        // waits for the backup taken before it.
        let now = Time(Timestamp::now());
        let engine = children::engine_of(db);
        let namespace = db.metadata.namespace.clone().unwrap_or_default();
        let pre_upgrade_name = backups::pre_upgrade_backup_name(db, &db.spec.image);
        let pre_upgrade = self.backups.get(&format!("{namespace}/{pre_upgrade_name}"));
        let plan = upgrade::plan(
            db,
            engine,
            live_deployment.as_deref(),
            &now,
            pre_upgrade.as_ref().map(|b| b.status.as_ref().and_then(|s| s.phase).unwrap_or(BackupPhase::Pending)),
        );
        if plan.upgrade.as_ref().is_some_and(|u| u.state == UpgradeState::BackingUp) && pre_upgrade.is_none() {
            let mut backup = crate::backup::backup(&pre_upgrade_name, &name);
            backup.metadata.namespace = Some(namespace.clone());
            self.create_backup(db, &backup).await?;
        }
        let restore = backups::restore(db, &self.backups);
        // With an engine, the Secret and the claim come before the pods that use them; a
        // restore's pod waits for its backup.
        let prepared = match (foreign, engine, &restore) {
            (Some(kind), ..) => Err(Blocker::NotOwned { kind, name: name.clone() }),
            (None, _, Restore::Impossible { reason, message }) => {
                Err(Blocker::Unrestorable { reason, message: message.clone() })
            }
            (None, Some(engine), _) => self.prepare_engine(db, engine).await?.and_then(|()| match &restore {
                Restore::Waiting(message) => {
                    Err(Blocker::Waiting { reason: "WaitingForBackup", message: message.clone() })
                }
                _ => Ok(()),
            }),
            (None, None, _) => Ok(()),
        };
        let (deployment, blocker) = match prepared {
            Err(blocker) => (None, Some(blocker)),
            Ok(()) => {
                let mut desired = children::deployment_running(db, &plan.image);
                if let (Restore::From { claim, .. }, Some(engine)) = (&restore, engine) {
                    backups::with_restore(&mut desired, engine, claim);
                }
                let deployment_ours = |d: &DeploymentView| children::is_controlled_by(d, db);
                let service_ours = |s: &ServiceView| children::is_controlled_by(s, db);
                let (deployment, service) = if live_deployment.is_some() {
                    // The two children are independent: write them concurrently, one round trip.
                    futures::try_join!(
                        self.ensure(db, desired, live_deployment, deployment_ours),
                        self.ensure(db, children::service(db), live_service, service_ours),
                    )?
                } else {
                    // A Deployment the cache cannot show may be foreign: then no Service of ours
                    // may front its pods, so the Deployment goes first.
                    let deployment = self.ensure(db, desired, None, deployment_ours).await?;
                    let service = match deployment {
                        Ok(_) => self.ensure(db, children::service(db), live_service, service_ours).await?,
                        // Not written: the Deployment's blocker is what the Database reports.
                        Err(_) => Ok((Arc::default(), Wrote::Nothing)),
                    };
                    (deployment, service)
                };
                let writes = [("Deployment", name.as_str(), wrote(&deployment)), ("Service", &name, wrote(&service))];
                self.announce(db, &writes);
                match (deployment, service) {
                    (Err(blocker), _) => (None, Some(blocker)),
                    (Ok((deployment, _)), Err(blocker)) => (Some(deployment), Some(blocker)),
                    (Ok((deployment, _)), Ok(_)) => {
                        let failing = Blocker::from_deployment(&deployment);
                        (Some(deployment), failing)
                    }
                }
            }
        };
        match &blocker {
            None => self.announced.forget(&key),
            Some(blocker) if self.announced.is_news(&key, blocker, db.status.as_ref()) => {
                let kind =
                    if matches!(blocker, Blocker::Waiting { .. }) { EventType::Normal } else { EventType::Warning };
                self.recorder.publish(db, kind, blocker.reason(), "Reconcile", &blocker.message());
            }
            Some(_) => {}
        }
        let mut status = status::desired(db, deployment.as_deref(), blocker.as_ref(), &plan, &now);
        if let Restore::From { backup, .. } = &restore
            && deployment.as_deref().is_some_and(|d| backups::restored(d, &plan.image))
        {
            info!(backup = %backup, "restored");
            status.restored_from = Some(backup.clone());
        }
        let next_backup = self.run_schedule(db, &mut status, &now).await?;
        if db.status.as_ref() != Some(&status) {
            let api: Api<Database> = Api::namespaced(self.client.clone(), &namespace);
            let body = serde_json::json!({
                "apiVersion": Database::api_version(&()),
                "kind": Database::kind(&()),
                "status": status,
            });
            let stored = api
                .patch_status(db.metadata.name.as_deref().unwrap_or_default(), &apply_params(), &Patch::Apply(&body))
                .await
                .map_err(|source| Error::Write {
                    what: format!("status of Database {}", crate::informer::key_of(db)),
                    source,
                })?;
            self.written.wrote(&key, db, &status, &stored);
            let changed =
                db.status.as_ref().map_or_else(|| Some("status".into()), |live| drift::difference(&status, live));
            info!(phase = ?status.phase, ready = status.ready_replicas.unwrap_or_default(), changed = %changed.unwrap_or_default(), "wrote status");
        }
        // An upgrade in progress is looked at again at its deadline, a schedule at its next
        // time, a foreign object after a while, even if nothing changes.
        let foreign = matches!(blocker, Some(Blocker::NotOwned { .. })).then_some(FOREIGN_RECHECK);
        let recheck = [plan.recheck_after, next_backup, foreign].into_iter().flatten().min();
        Ok(recheck.map_or(Action::Done, Action::RequeueAfter))
    }

    /// The schedule of `spec.backup`: takes the backup that is due (recording its time in
    /// `status`), deletes the oldest finished ones beyond `keep`, and reports the schedule in the
    /// `BackupScheduled` condition. Returns when the next backup is due.
    async fn run_schedule(
        &self,
        db: &Database,
        status: &mut DatabaseStatus,
        now: &Time,
    ) -> Result<Option<Duration>, Error> {
        let (next, condition) = match backups::scheduled(db, now) {
            Scheduled::None => return Ok(None),
            Scheduled::Invalid(message) => {
                self.recorder.publish(db, EventType::Warning, "InvalidSchedule", "Reconcile", &message);
                (None, (false, "InvalidSchedule", message))
            }
            Scheduled::Wait { recheck_after } => {
                (Some(recheck_after), (true, "Scheduled", "backups are taken on spec.backup.schedule".to_string()))
            }
            Scheduled::Due { at, recheck_after } => {
                self.create_backup(db, &backups::scheduled_backup(db, &at)).await?;
                status.last_scheduled_backup = Some(at);
                (Some(recheck_after), (true, "Scheduled", "backups are taken on spec.backup.schedule".to_string()))
            }
        };
        status::set_condition(status, db.status.as_ref(), "BackupScheduled", condition, now);
        let api: Api<DatabaseBackup> =
            Api::namespaced(self.client.clone(), db.metadata.namespace.as_deref().unwrap_or_default());
        for name in backups::beyond_keep(db, &self.backups) {
            match api.delete(&name, &Default::default()).await {
                Ok(_) => info!(backup = %name, "deleted a scheduled backup beyond spec.backup.keep"),
                Err(kube_client::Error::Api(status)) if status.is_not_found() => {}
                Err(source) => return Err(Error::Write { what: format!("DatabaseBackup {name} (delete)"), source }),
            }
        }
        Ok(next)
    }

    /// Creates a DatabaseBackup of `db` (one that exists already is the one wanted: the names
    /// are one per scheduled time, one per upgrade). Not owned by the Database: a backup
    /// outlives what it backs up.
    async fn create_backup(&self, db: &Database, backup: &DatabaseBackup) -> Result<(), Error> {
        let api: Api<DatabaseBackup> =
            Api::namespaced(self.client.clone(), db.metadata.namespace.as_deref().unwrap_or_default());
        let name = backup.metadata.name.clone().unwrap_or_default();
        let params =
            kube_client::api::PostParams { field_manager: Some(children::MANAGER.into()), ..Default::default() };
        match api.create(&params, backup).await {
            Ok(_) => {
                info!(backup = %name, "created DatabaseBackup");
                let note = format!("created DatabaseBackup {name}");
                self.recorder.publish(db, EventType::Normal, "BackupCreated", "Reconcile", &note);
                Ok(())
            }
            Err(kube_client::Error::Api(status)) if status.is_already_exists() => Ok(()),
            Err(source) => Err(Error::Write { what: format!("DatabaseBackup {name}"), source }),
        }
    }

    /// The Secret (generated ones only) and the claim of a Database with an engine. The inner
    /// `Err` is what blocks the Database.
    async fn prepare_engine(&self, db: &Database, engine: &dyn Engine) -> Result<Result<(), Blocker>, Error> {
        let namespace = db.metadata.namespace.as_deref().unwrap_or_default();
        if credentials::generated(db) {
            let name = credentials::secret_name(db);
            match self.secrets.get(&format!("{namespace}/{name}")) {
                Some(live) if children::is_controlled_by(live.as_ref(), db) => {}
                Some(_) => return Ok(Err(Blocker::NotOwned { kind: "Secret", name })),
                None => {
                    let secret = credentials::new_secret(db, engine).map_err(|e| Error::Random(e.to_string()))?;
                    if let Err(blocker) = self.create(db, &secret).await? {
                        return Ok(Err(blocker));
                    }
                }
            }
        }
        let key = format!("{namespace}/{}", volume::claim_name(db));
        let live = self.claims.get(&key);
        match &live {
            Some(claim) if !volume::is_ours(claim, db) => {
                return Ok(Err(Blocker::NotOwned { kind: "PersistentVolumeClaim", name: volume::claim_name(db) }));
            }
            _ => {
                let ours = |claim: &PersistentVolumeClaimView| volume::is_ours(claim, db);
                let written = match self.ensure(db, volume::claim(db, live.as_deref()), live.clone(), ours).await? {
                    Ok((written, wrote)) => {
                        self.announce(db, &[("PersistentVolumeClaim", &volume::claim_name(db), wrote)]);
                        written
                    }
                    Err(blocker) => return Ok(Err(blocker)),
                };
                if let Some(blocker) = self.missing_storage_class(db, &written).await? {
                    return Ok(Err(blocker));
                }
            }
        }
        Ok(Ok(()))
    }

    /// Whether a claim that waits to be bound waits for a StorageClass that does not exist
    /// (the claim's own events say so too, but the Database is where a user looks). A read the
    /// operator may not make (the namespaced RBAC grants no cluster-scoped reads) tells nothing.
    async fn missing_storage_class(
        &self,
        db: &Database,
        claim: &PersistentVolumeClaimView,
    ) -> Result<Option<Blocker>, Error> {
        let wanted = db.spec.storage.as_ref().and_then(|s| s.storage_class_name.clone());
        let (Some(name), Some("Pending")) = (wanted, claim.phase()) else { return Ok(None) };
        let classes: Api<StorageClass> = Api::all(self.client.clone());
        match classes.get_opt(&name).await {
            Ok(None) => Ok(Some(Blocker::MissingStorageClass { name })),
            Ok(Some(_)) => Ok(None),
            Err(kube_client::Error::Api(status)) if status.code == 403 => Ok(None),
            Err(source) => Err(Error::Read { what: format!("StorageClass {name}"), source }),
        }
    }

    /// Creates a child that is absent from its (label-filtered) cache. A 409 means an object
    /// of that name exists that the cache does not show: foreign, unless it is ours after all
    /// (created a moment ago, not yet in the cache), which its metadata tells.
    async fn create<T>(&self, db: &Database, child: &T) -> Result<Result<(), Blocker>, Error>
    where
        T: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        let kind = T::kind(&());
        let name = child.meta().name.clone().unwrap_or_default();
        let api: Api<T> = Api::namespaced(self.client.clone(), child.meta().namespace.as_deref().unwrap_or_default());
        match api
            .create(
                &kube_client::api::PostParams { field_manager: Some(children::MANAGER.into()), ..Default::default() },
                child,
            )
            .await
        {
            Ok(_) => {
                info!(child = %crate::informer::key_of(child), reason = "Created", "wrote {kind}");
                self.announce(db, &[(&kind, &name, Wrote::Created)]);
                Ok(Ok(()))
            }
            Err(kube_client::Error::Api(status)) if status.is_already_exists() => {
                let existing = api
                    .get_metadata(&name)
                    .await
                    .map_err(|source| Error::Read { what: format!("{kind} {name}"), source })?;
                if children::is_controlled_by(&existing, db) {
                    Ok(Ok(()))
                } else {
                    Ok(Err(Blocker::NotOwned { kind: kind_name(&kind), name }))
                }
            }
            Err(error) => refusal(db, &kind, &crate::informer::key_of(child), error).map(Err),
        }
    }

    /// Brings one child to `desired`, writing only when its cached `live` view differs;
    /// returns the child as written, read as a view, and what was written (the caller tells
    /// it in the Database's events, [`notes`]). A child missing from the cache is
    /// written create-only; if an object holds its name already, `ours` decides: applied as a
    /// cached child would be, or [`Blocker::NotOwned`]. The inner `Err` is what blocks the
    /// Database: that, or the apiserver's refusal of the child.
    async fn ensure<T, V>(
        &self,
        db: &Database,
        mut desired: T,
        live: Option<Arc<V>>,
        ours: impl Fn(&V) -> bool,
    ) -> Result<Result<(Arc<V>, Wrote), Blocker>, Error>
    where
        T: Resource<DynamicType = ()> + Debug + Serialize,
        V: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        let kind = T::kind(&());
        let key = crate::informer::key_of(&desired);
        let api: Api<V> = Api::namespaced(self.client.clone(), desired.meta().namespace.as_deref().unwrap_or_default());
        let name = desired.meta().name.clone().unwrap_or_default();
        let live = match live {
            Some(live) => live,
            None => {
                desired.meta_mut().resource_version = Some(NO_STORED_OBJECT.into());
                let created = api.patch(&name, &apply_params(), &Patch::Apply(&desired)).await;
                desired.meta_mut().resource_version = None;
                match created {
                    Ok(written) => {
                        info!(child = %key, reason = "Created", differed = "", "wrote {kind}");
                        return Ok(Ok((Arc::new(written), Wrote::Created)));
                    }
                    Err(kube_client::Error::Api(status)) if status.is_conflict() => {
                        let existing = api
                            .get(&name)
                            .await
                            .map_err(|source| Error::Read { what: format!("{kind} {key}"), source })?;
                        if !ours(&existing) {
                            return Ok(Err(Blocker::NotOwned { kind: kind_name(&kind), name }));
                        }
                        Arc::new(existing)
                    }
                    Err(error) => return refusal(db, &kind, &key, error).map(Err),
                }
            }
        };
        // The field that differs: what the write repairs.
        let Some(field) = drift::difference(&desired, live.as_ref()) else { return Ok(Ok((live, Wrote::Nothing))) };
        match api.patch(&name, &apply_params(), &Patch::Apply(&desired)).await {
            Ok(written) => {
                info!(child = %key, reason = "Updated", differed = %field, "wrote {kind}");
                Ok(Ok((Arc::new(written), Wrote::Updated(field))))
            }
            Err(error) => refusal(db, &kind, &key, error).map(Err),
        }
    }

    /// Publishes the events that tell what one reconcile wrote ([`notes`]).
    fn announce(&self, db: &Database, writes: &[(&str, &str, Wrote)]) {
        for (reason, note) in notes(writes) {
            self.recorder.publish(db, EventType::Normal, reason, "Reconcile", &note);
        }
    }
}

/// What the write of one child did.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Wrote {
    /// Nothing differed; nothing was written.
    Nothing,
    /// The child was created.
    Created,
    /// The child was brought back to the spec; the first field that differed.
    Updated(String),
}

/// A failed write of a child: the apiserver's refusal of it blocks the Database (retrying the
/// same child cannot help); anything else is an error to retry.
fn refusal(db: &Database, kind: &str, key: &str, error: kube_client::Error) -> Result<Blocker, Error> {
    match error {
        kube_client::Error::Api(status) if is_quota(&status) => {
            Ok(Blocker::QuotaExceeded { kind: kind_name(kind), message: status.message })
        }
        kube_client::Error::Api(status) if status.code == 400 || status.code == 422 => {
            Ok(rejected(db, kind_name(kind), status.message))
        }
        source => Err(Error::Write { what: format!("{kind} {key}"), source }),
    }
}

/// What [`DatabaseReconciler::ensure`] wrote, if it wrote.
fn wrote<V>(ensured: &Result<(Arc<V>, Wrote), Blocker>) -> Wrote {
    ensured.as_ref().map_or(Wrote::Nothing, |(_, wrote)| wrote.clone())
}

/// The events that tell what one reconcile wrote, given `(kind, name, what)` per child: one
/// `Created` naming every child it created, one `Updated` naming every child it repaired and
/// the field that differed in each. A new Database gets one event for its Deployment and
/// Service, not two: half the event writes of the reconcile that creates them.
fn notes(writes: &[(&str, &str, Wrote)]) -> Vec<(&'static str, String)> {
    let created: Vec<String> = writes
        .iter()
        .filter(|(.., wrote)| *wrote == Wrote::Created)
        .map(|(kind, name, _)| format!("{kind} {name}"))
        .collect();
    let updated: Vec<String> = writes
        .iter()
        .filter_map(|(kind, name, wrote)| match wrote {
            Wrote::Updated(field) => Some(format!("{kind} {name} ({field} differed)")),
            _ => None,
        })
        .collect();
    let mut events = Vec::new();
    if !created.is_empty() {
        events.push(("Created", format!("created {}", created.join(" and "))));
    }
    if !updated.is_empty() {
        events.push(("Updated", format!("updated {} to match the Database spec", updated.join(" and "))));
    }
    events
}

/// The blocker for a child the apiserver refused.
fn rejected(db: &Database, kind: &'static str, message: String) -> Blocker {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    // The apiserver quotes the refused value ("Invalid value: \"<name>\""); the object's name
    // alone is quoted in every refusal ("deployments.apps \"x\"").
    let name_is_the_cause = message.contains(&format!("Invalid value: \"{name}\""));
    Blocker::Rejected { kind, message, name_is_the_cause }
}

/// A refusal by a ResourceQuota: only the cluster's owner can change it, so it is reported
/// like an invalid spec (a condition and a Warning with the quota's own words), not retried.
fn is_quota(status: &kube_core::Status) -> bool {
    status.code == 403 && status.message.contains("exceeded quota")
}

/// The kinds the reconcile writes, as `'static` names for a [`Blocker`].
fn kind_name(kind: &str) -> &'static str {
    match kind {
        "Secret" => "Secret",
        "PersistentVolumeClaim" => "PersistentVolumeClaim",
        "Service" => "Service",
        _ => "Deployment",
    }
}

/// Server-side apply as `database-operator`, taking over fields another manager set on our
/// own children (a `kubectl edit` of replicas is drift to undo, not a conflict to report).
fn apply_params() -> PatchParams {
    PatchParams::apply(children::MANAGER).force()
}

impl Reconciler for DatabaseReconciler {
    type Error = Error;

    async fn reconcile(&self, key: &str) -> Result<Action, Error> {
        let Some(db) = self.databases.get(key) else {
            self.announced.forget(key);
            self.written.forget(key);
            debug!("Database is gone; nothing to do");
            return Ok(Action::Done);
        };
        if db.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        // A status this process wrote and the cache has not shown yet is the current one.
        let db = self.written.catch_up(key, db);
        match self.reconcile_database(&db).await {
            // Throttled by the apiserver: come back when it says, not on our backoff.
            Err(err) if err.retry_after().is_some() => {
                let delay = err.retry_after().unwrap_or_default();
                tracing::warn!(error = %err, ?delay, "the API server is throttling us; retrying when it asks");
                Ok(Action::RequeueAfter(delay))
            }
            other => other,
        }
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
    fn one_event_names_every_child_created_and_one_every_child_updated() {
        let image = Wrote::Updated("spec.template.spec.containers[database].image".into());
        assert_eq!(
            notes(&[("Deployment", "orders", Wrote::Created), ("Service", "orders", Wrote::Created)]),
            [("Created", "created Deployment orders and Service orders".to_string())]
        );
        assert_eq!(
            notes(&[("Deployment", "orders", image.clone()), ("Service", "orders", Wrote::Nothing)]),
            [(
                "Updated",
                "updated Deployment orders (spec.template.spec.containers[database].image differed) to match the \
                 Database spec"
                    .to_string()
            )]
        );
        assert_eq!(
            notes(&[("Deployment", "orders", image), ("Service", "orders", Wrote::Created)]).len(),
            2,
            "a created child and an updated one: one event each"
        );
        assert!(notes(&[("Deployment", "orders", Wrote::Nothing), ("Service", "orders", Wrote::Nothing)]).is_empty());
    }

    #[test]
    fn other_errors_use_the_queues_backoff() {
        assert_eq!(write_error(409, 7).retry_after(), None);
        assert_eq!(write_error(500, 0).retry_after(), None);
    }
}
