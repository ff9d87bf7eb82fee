//! The status a Database should show, computed from what the operator observed.
//!
//! Three conditions, kept in the standard format (`type`, `status`, `reason`, `message`,
//! `lastTransitionTime`, `observedGeneration`):
//!
//! | condition     | True when                                                              |
//! |---------------|------------------------------------------------------------------------|
//! | `Ready`       | the Deployment has rolled out the current spec and a replica is ready  |
//! | `Progressing` | the operator is still bringing the children to the current spec        |
//! | `Degraded`    | a child cannot be realised, the database was ready and is not now, or |
//! |               | an upgrade failed or was refused (see [`super::upgrade`])               |
//!
//! `lastTransitionTime` changes only when a condition's status changes, so recomputing an
//! unchanged state yields an equal status and the operator writes nothing.

use super::upgrade::{Plan, UpgradeState, runs_ready};
use super::view::DeploymentView;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::{Database, DatabaseStatus, Phase};

/// Why the children of a Database could not be brought to the desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// An object of the same name exists and is not controlled by this Database; the
    /// operator never adopts or overwrites it.
    NotOwned {
        /// `Deployment` or `Service`.
        kind: &'static str,
        /// The object's name.
        name: String,
    },
    /// The apiserver rejected the child built from the Database (it passes the CRD schema but
    /// cannot be realised, e.g. an image with surrounding whitespace, or a name the CRD's name
    /// rule would refuse today on a Database stored before that rule existed).
    Rejected {
        /// `Deployment` or `Service`.
        kind: &'static str,
        /// The apiserver's message.
        message: String,
        /// Whether the Database's name is what was refused (the message quotes it as the
        /// invalid value, in the name or a label of the child): then renaming, not editing the
        /// spec, is the fix.
        name_is_the_cause: bool,
    },
    /// Something the Database's pod must wait for (the backup it is restored from): the pod is
    /// not created yet. Not a fault: the Database is `Pending`.
    Waiting {
        /// The condition reason, e.g. `WaitingForBackup`.
        reason: &'static str,
        /// What it waits for.
        message: String,
    },
    /// The backup the Database is to be restored from cannot be restored (it failed, or is a
    /// dump of another engine).
    Unrestorable {
        /// The condition reason, e.g. `RestoreFailed`.
        reason: &'static str,
        /// Why.
        message: String,
    },
    /// A ResourceQuota of the namespace refuses the child.
    QuotaExceeded {
        /// `PersistentVolumeClaim`, `Secret`, ...
        kind: &'static str,
        /// The quota's own message.
        message: String,
    },
    /// The claim names a StorageClass that does not exist: nothing will provision it.
    MissingStorageClass {
        /// The StorageClass.
        name: String,
    },
    /// The Deployment exists but cannot run its pods: its `ReplicaFailure` condition is
    /// True (e.g. pods forbidden by a ResourceQuota or rejected by admission), or its
    /// rollout exceeded its progress deadline.
    DeploymentFailing {
        /// The Deployment condition's reason, e.g. `FailedCreate`.
        reason: String,
        /// The Deployment condition's message.
        message: String,
    },
}

/// What this process last announced (a Warning or Normal event) for each blocked Database, by
/// key. The status says it too, once written; this covers the moment between the event and
/// the status write reaching the cache, when a second reconcile would announce it again.
/// Bounded by the Databases blocked now: an entry leaves when its Database is unblocked or gone.
/// Clones share the record.
#[derive(Clone, Debug, Default)]
pub struct Announced(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, (String, String)>>>);

impl Announced {
    /// Whether `blocker` is news for the Database `key` whose stored status is `status`:
    /// neither the status nor this process has said it. Remembers it either way.
    pub fn is_news(&self, key: &str, blocker: &Blocker, status: Option<&DatabaseStatus>) -> bool {
        let said = (blocker.reason().to_string(), blocker.message());
        let mut announced = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let news = !blocker.reported_in(status) && announced.get(key) != Some(&said);
        announced.insert(key.to_string(), said);
        news
    }

    /// The Database `key` is no longer blocked, or gone.
    pub fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(key);
    }
}

impl Blocker {
    /// Whether `status` already reports this blocker (a true condition with its reason and
    /// message): a Database that stays blocked for the same reason gets one event, not one
    /// per reconcile.
    pub fn reported_in(&self, status: Option<&DatabaseStatus>) -> bool {
        let (reason, message) = (self.reason(), self.message());
        status.is_some_and(|s| {
            s.conditions.iter().any(|c| c.status == "True" && c.reason == reason && c.message == message)
        })
    }

    /// The Blocker a Deployment's own conditions report, if any.
    pub fn from_deployment(deployment: &DeploymentView) -> Option<Self> {
        let conditions = deployment.status.as_ref()?.conditions.as_ref()?;
        conditions
            .iter()
            .find(|c| {
                (c.type_ == "ReplicaFailure" && c.status == "True")
                    || (c.type_ == "Progressing"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
            })
            .map(|c| Blocker::DeploymentFailing {
                reason: c.reason.clone().unwrap_or_else(|| c.type_.clone()),
                message: c.message.clone().unwrap_or_default(),
            })
    }

    /// The condition reason: `ResourceExists`, `InvalidSpec`, or the Deployment's reason.
    pub fn reason(&self) -> &str {
        match self {
            Blocker::NotOwned { .. } => "ResourceExists",
            Blocker::Rejected { .. } => "InvalidSpec",
            Blocker::Waiting { reason, .. } | Blocker::Unrestorable { reason, .. } => reason,
            Blocker::MissingStorageClass { .. } => "StorageClassNotFound",
            Blocker::QuotaExceeded { .. } => "QuotaExceeded",
            Blocker::DeploymentFailing { reason, .. } => reason,
        }
    }

    /// A message for a kubectl user: what is wrong and what to do.
    pub fn message(&self) -> String {
        match self {
            Blocker::NotOwned { kind, name } => format!(
                "{kind} {name:?} already exists and is not managed by this Database; \
                 delete or rename it, or rename the Database"
            ),
            Blocker::Rejected { kind, message, name_is_the_cause: true } => format!(
                "the {kind} for this Database was rejected by the API server because of the Database's name: {message}; \
                 a name cannot change: create the Database again under a DNS-1035 name (at most 63 characters: \
                 lowercase letters, digits and '-', starting with a letter) and delete this one"
            ),
            Blocker::Rejected { kind, message, name_is_the_cause: false } => {
                format!("the {kind} for this spec was rejected by the API server: {message}; fix the Database spec")
            }
            Blocker::Waiting { message, .. } | Blocker::Unrestorable { message, .. } => message.clone(),
            Blocker::QuotaExceeded { kind, message } => format!(
                "the {kind} for this Database is refused by the namespace's quota: {message}; raise the quota or free \
                 some of it (kubectl describe resourcequota)"
            ),
            Blocker::MissingStorageClass { name } => format!(
                "StorageClass {name:?} (spec.storage.storageClassName) does not exist, so the claim cannot be provisioned; \
                 create it, or create the Database again with a class that exists (kubectl get storageclass): a \
                 claim's class cannot change"
            ),
            Blocker::DeploymentFailing { message, .. } => {
                format!("the Deployment cannot run the database: {message}")
            }
        }
    }
}

/// The status `db` should have, given its Deployment as last seen (if any), what blocked the
/// reconcile (if anything) and the image plan. `now` stamps conditions whose status changed.
pub fn desired(
    db: &Database,
    deployment: Option<&DeploymentView>,
    blocker: Option<&Blocker>,
    plan: &Plan,
    now: &Time,
) -> DatabaseStatus {
    let generation = db.metadata.generation;
    let previous = db.status.as_ref();
    let ready_replicas = deployment.and_then(|d| d.status.as_ref()?.ready_replicas).unwrap_or(0);
    let rolled_out = deployment.is_some_and(rolled_out);
    // Ready before, or Degraded because it lost its replicas after being ready.
    let was_ready = previous.is_some_and(|s| match s.phase {
        Some(Phase::Ready) => true,
        Some(Phase::Degraded) => s.conditions.iter().any(|c| c.type_ == "Degraded" && c.reason == "NoReadyReplicas"),
        _ => false,
    });

    let progressing_now = (true, "Reconciling", "the Deployment is rolling out the current spec".to_string());
    let upgrade = plan.upgrade.as_ref();
    let ready_now = (true, "DeploymentReady", format!("{ready_replicas} replica(s) ready"));
    let not_ready_now = (false, "DeploymentNotReady", "no replica of the Deployment is ready".to_string());
    let (phase, ready, progressing, degraded) = match (blocker, upgrade) {
        (Some(Blocker::Waiting { reason, message }), _) => (
            Phase::Pending,
            (false, *reason, message.clone()),
            (true, *reason, message.clone()),
            (false, "AsExpected", "nothing is wrong yet".to_string()),
        ),
        (Some(blocker), _) => (
            Phase::Degraded,
            (false, blocker.reason(), blocker.message()),
            (false, blocker.reason(), "the operator cannot proceed until the problem is fixed".to_string()),
            (true, blocker.reason(), blocker.message()),
        ),
        // An upgrade that failed or was refused: the database may well serve (the old image,
        // or the new one that is not Ready), but the spec is not what runs.
        (None, Some(upgrade)) if !matches!(upgrade.state, UpgradeState::Upgrading | UpgradeState::BackingUp) => {
            let (reason, message) = match upgrade.state {
                UpgradeState::Refused => (
                    "MajorVersionUpgrade",
                    format!(
                        "{} to {} changes the engine's major version, which cannot read the old data directory: it \
                         was not rolled, and {} still runs. Take a DatabaseBackup and restore it into a new \
                         Database (spec.restoreFrom), or set spec.upgrade.allowMajor if the image migrates its data",
                        upgrade.from, upgrade.to, upgrade.from
                    ),
                ),
                UpgradeState::BackupFailed => (
                    "UpgradeBackupFailed",
                    format!(
                        "the backup taken before upgrading from {} to {} failed (see its DatabaseBackup): the new \
                         image was not rolled. Change spec.image, or unset spec.upgrade.backupFirst, to go on",
                        upgrade.from, upgrade.to
                    ),
                ),
                UpgradeState::RolledBack => (
                    "UpgradeFailed",
                    format!(
                        "{} did not become ready within spec.upgrade.timeout; rolled back to {} (spec.upgrade.policy \
                         Rollback). Change spec.image to try again",
                        upgrade.to, upgrade.from
                    ),
                ),
                _ => (
                    "UpgradeFailed",
                    format!(
                        "{} did not become ready within spec.upgrade.timeout; the Deployment keeps it (spec.upgrade.policy \
                         Rollback would go back to {})",
                        upgrade.to, upgrade.from
                    ),
                ),
            };
            let ready = if ready_replicas > 0 { ready_now.clone() } else { not_ready_now.clone() };
            (Phase::Degraded, ready, (false, reason, message.clone()), (true, reason, message))
        }
        (None, Some(upgrade)) => (
            if ready_replicas > 0 { Phase::Ready } else { Phase::Pending },
            if ready_replicas > 0 { ready_now.clone() } else { not_ready_now.clone() },
            if upgrade.state == UpgradeState::BackingUp {
                (true, "BackingUp", format!("taking a backup before upgrading from {} to {}", upgrade.from, upgrade.to))
            } else {
                (
                    true,
                    "Upgrading",
                    format!(
                        "upgrading from {} to {}: waiting for the new pod to become ready",
                        upgrade.from, upgrade.to
                    ),
                )
            },
            (false, "AsExpected", "the upgrade is in progress".to_string()),
        ),
        // Once ready, a rollout that keeps a replica ready (a new image, a new size) stays Ready.
        (None, None) if ready_replicas > 0 && (rolled_out || was_ready) => (
            Phase::Ready,
            ready_now.clone(),
            if rolled_out {
                (false, "ReconcileComplete", "the Deployment and Service match the spec".to_string())
            } else {
                progressing_now
            },
            (false, "AsExpected", "the database is running as expected".to_string()),
        ),
        (None, None) if was_ready => (
            Phase::Degraded,
            (false, "NoReadyReplicas", "the database was ready and has no ready replica now".to_string()),
            progressing_now,
            (true, "NoReadyReplicas", "the database was ready and has no ready replica now".to_string()),
        ),
        (None, None) => (
            Phase::Pending,
            (
                false,
                "DeploymentNotReady",
                "waiting for the Deployment to roll out and a replica to become ready".to_string(),
            ),
            progressing_now,
            (false, "AsExpected", "nothing is wrong yet".to_string()),
        ),
    };

    let condition = |type_: &str, (status, reason, message): (bool, &str, String)| {
        let status = if status { "True" } else { "False" }.to_string();
        let last_transition_time = previous
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message,
            last_transition_time,
            observed_generation: generation,
        }
    };
    let engine = crate::database::children::engine_of(db);
    DatabaseStatus {
        observed_generation: generation,
        ready_replicas: Some(ready_replicas),
        phase: Some(phase),
        secret_name: engine.map(|_| crate::database::credentials::secret_name(db)),
        current_image: if deployment.is_some_and(|d| runs_ready(d, &plan.image)) {
            Some(plan.image.clone())
        } else {
            previous.and_then(|s| s.current_image.clone())
        },
        upgrade: plan.upgrade.clone().map(Box::new),
        // What the reconcile sets itself (restore, schedule), kept until it does.
        restored_from: previous.and_then(|s| s.restored_from.clone()),
        last_scheduled_backup: previous.and_then(|s| s.last_scheduled_backup.clone()),
        endpoint: engine.map(|engine| crate::database::credentials::endpoint(db, engine)),
        conditions: vec![
            condition("Ready", ready),
            condition("Progressing", progressing),
            condition("Degraded", degraded),
        ],
    }
}

/// Whether `db` needs nothing urgent: its status describes its current generation and says
/// Ready. The controller queues a settled Database's child churn and status-only changes at low
/// priority ([`crate::controller::Builder::settled`]); a new, changed or unready one stays
/// normal, so its way to Ready never waits behind a fleet-wide change.
pub fn settled(db: &Database) -> bool {
    db.status.as_ref().is_some_and(|status| {
        status.observed_generation.is_some()
            && status.observed_generation == db.metadata.generation
            && status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// Sets the condition `type_` of `status`, keeping its `lastTransitionTime` from `previous`
/// unless its status changed.
pub fn set_condition(
    status: &mut DatabaseStatus,
    previous: Option<&DatabaseStatus>,
    type_: &str,
    (ok, reason, message): (bool, &str, String),
    now: &Time,
) {
    let value = if ok { "True" } else { "False" }.to_string();
    let last_transition_time = previous
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == value)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    status.conditions.retain(|c| c.type_ != type_);
    status.conditions.push(Condition {
        type_: type_.to_string(),
        status: value,
        reason: reason.to_string(),
        message,
        last_transition_time,
        observed_generation: status.observed_generation,
    });
}

/// Whether the Deployment controller has acted on the Deployment's latest spec and every
/// replica runs it.
fn rolled_out(deployment: &DeploymentView) -> bool {
    let Some(status) = &deployment.status else { return false };
    let wanted = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    status.observed_generation >= deployment.metadata.generation
        && status.updated_replicas.unwrap_or(0) >= wanted
        && status.replicas.unwrap_or(0) <= wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of a Database whose image is not changing.
    fn steady() -> Plan {
        Plan::steady("postgres:17")
    }
    use crate::database::view::{DeploymentConditionView, DeploymentStatusView};
    use crate::database::{DatabaseSpec, Size};
    use k8s_openapi::jiff::Timestamp;

    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn database() -> Database {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
        db.metadata.generation = Some(3);
        db
    }

    fn deployment(ready: i32) -> DeploymentView {
        let full = crate::database::children::deployment(&database());
        let mut d: DeploymentView = serde_json::from_value(serde_json::to_value(full).unwrap()).unwrap();
        d.metadata.generation = Some(1);
        d.status = Some(DeploymentStatusView {
            observed_generation: Some(1),
            replicas: Some(1),
            updated_replicas: Some(1),
            ready_replicas: Some(ready),
            ..Default::default()
        });
        d
    }

    fn condition<'a>(status: &'a DatabaseStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn database_without_a_ready_replica_is_pending_and_progressing() {
        let status = desired(&database(), Some(&deployment(0)), None, &steady(), &time(10));
        assert_eq!(status.phase, Some(Phase::Pending));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(condition(&status, "Ready").status, "False");
        assert_eq!(condition(&status, "Progressing").status, "True");
    }

    #[test]
    fn rolled_out_deployment_with_a_ready_replica_makes_the_database_ready() {
        let status = desired(&database(), Some(&deployment(1)), None, &steady(), &time(10));
        assert_eq!(status.phase, Some(Phase::Ready));
        assert_eq!(status.ready_replicas, Some(1));
        assert_eq!(condition(&status, "Ready").reason, "DeploymentReady");
    }

    #[test]
    fn only_a_ready_database_whose_status_describes_its_generation_is_settled() {
        let mut db = database();
        assert!(!settled(&db), "no status yet");
        db.status = Some(desired(&db, Some(&deployment(0)), None, &steady(), &time(10)));
        assert!(!settled(&db), "not ready");
        db.status = Some(desired(&db, Some(&deployment(1)), None, &steady(), &time(10)));
        assert!(settled(&db));
        db.metadata.generation = Some(4);
        assert!(!settled(&db), "a spec the operator has not acted on");
    }

    #[test]
    fn ready_database_that_loses_its_replica_is_degraded() {
        let mut db = database();
        db.status = Some(desired(&db, Some(&deployment(1)), None, &steady(), &time(10)));
        let status = desired(&db, Some(&deployment(0)), None, &steady(), &time(20));
        assert_eq!(status.phase, Some(Phase::Degraded));
        assert_eq!(condition(&status, "Degraded").status, "True");
    }

    #[test]
    fn foreign_child_blocks_with_resource_exists() {
        let blocker = Blocker::NotOwned { kind: "Deployment", name: "orders".into() };
        let status = desired(&database(), None, Some(&blocker), &steady(), &time(10));
        assert_eq!(status.phase, Some(Phase::Degraded));
        let degraded = condition(&status, "Degraded");
        assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "ResourceExists"));
        assert!(degraded.message.contains("not managed by this Database"), "{}", degraded.message);
    }

    #[test]
    fn a_blocker_is_news_once_until_it_changes_or_goes_away() {
        let announced = Announced::default();
        let blocker = Blocker::NotOwned { kind: "Deployment", name: "orders".into() };
        assert!(announced.is_news("ns/orders", &blocker, None));
        assert!(!announced.is_news("ns/orders", &blocker, None), "the status write has not reached the cache yet");
        assert!(announced.is_news("ns/other", &blocker, None));
        let other = Blocker::NotOwned { kind: "Service", name: "orders".into() };
        assert!(announced.is_news("ns/orders", &other, None));
        announced.forget("ns/orders");
        assert!(announced.is_news("ns/orders", &other, None), "blocked again after a recovery");
        let status = desired(&database(), None, Some(&other), &steady(), &time(10));
        assert!(
            !Announced::default().is_news("ns/orders", &other, Some(&status)),
            "a restarted operator reads the status"
        );
    }

    #[test]
    fn a_blocker_is_reported_once_until_its_reason_or_message_changes() {
        let blocker = Blocker::NotOwned { kind: "Deployment", name: "orders".into() };
        assert!(!blocker.reported_in(None));
        let status = desired(&database(), None, Some(&blocker), &steady(), &time(10));
        assert!(blocker.reported_in(Some(&status)));
        let other = Blocker::NotOwned { kind: "Service", name: "orders".into() };
        assert!(!other.reported_in(Some(&status)), "another message is news");
        let waiting = Blocker::Waiting { reason: "WaitingForBackup", message: "m".into() };
        let status = desired(&database(), None, Some(&waiting), &steady(), &time(10));
        assert!(waiting.reported_in(Some(&status)), "a wait is reported in Progressing");
    }

    #[test]
    fn deployment_that_cannot_create_pods_is_reported_with_its_reason() {
        let mut failing = deployment(0);
        failing.status.as_mut().unwrap().conditions = Some(vec![DeploymentConditionView {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            reason: Some("FailedCreate".into()),
            message: Some("pods \"orders-1\" is forbidden: exceeded quota".into()),
        }]);
        let blocker = Blocker::from_deployment(&failing).expect("a failing Deployment blocks");
        let status = desired(&database(), Some(&failing), Some(&blocker), &steady(), &time(10));
        assert_eq!(status.phase, Some(Phase::Degraded));
        let degraded = condition(&status, "Degraded");
        assert_eq!(degraded.reason, "FailedCreate");
        assert!(degraded.message.contains("exceeded quota"), "{}", degraded.message);
        assert!(Blocker::from_deployment(&deployment(1)).is_none());
    }

    #[test]
    fn unchanged_state_keeps_transition_times_so_the_status_is_equal() {
        let mut db = database();
        let first = desired(&db, Some(&deployment(1)), None, &steady(), &time(10));
        db.status = Some(first.clone());
        let again = desired(&db, Some(&deployment(1)), None, &steady(), &time(99));
        assert_eq!(first, again);
    }

    #[test]
    fn a_condition_that_flips_gets_a_new_transition_time() {
        let mut db = database();
        db.status = Some(desired(&db, Some(&deployment(0)), None, &steady(), &time(10)));
        let status = desired(&db, Some(&deployment(1)), None, &steady(), &time(20));
        assert_eq!(condition(&status, "Ready").last_transition_time, time(20));
    }

    /// The regression test of "fix the Database spec" said when the name was what the
    /// apiserver refused: the spec cannot fix a name.
    #[test]
    fn a_rejection_of_the_name_says_to_rename_not_to_fix_the_spec() {
        let by_name = Blocker::Rejected {
            kind: "Service",
            message: r#"Service "a.b" is invalid: metadata.name: Invalid value: "a.b": a DNS-1035 label must..."#
                .into(),
            name_is_the_cause: true,
        };
        assert!(by_name.message().contains("because of the Database's name"), "{}", by_name.message());
        assert!(!by_name.message().contains("fix the Database spec"), "{}", by_name.message());
        let by_spec = Blocker::Rejected {
            kind: "Deployment",
            message: "spec.template.spec.containers[0].image: Invalid value: \" postgres\"".into(),
            name_is_the_cause: false,
        };
        assert!(by_spec.message().ends_with("fix the Database spec"), "{}", by_spec.message());
        assert_eq!(by_name.reason(), "InvalidSpec");
    }
}
