//! The status a Database should show, computed from what the operator observed.
//!
//! Three conditions, kept in the standard format ([`operator_runtime::conditions`]), and a
//! phase that sums them up:
//!
//! | condition     | True when                                                              |
//! |---------------|------------------------------------------------------------------------|
//! | `Ready`       | the Deployment has rolled out the current spec and a replica is ready  |
//! | `Progressing` | the operator is still bringing the children to the current spec        |
//! | `Degraded`    | a child cannot be realised, the database was ready and is not now, or |
//! |               | an upgrade failed or was refused (see [`super::upgrade`])               |
//!
//! A replica that does not run (a Database of several instances) makes the Database
//! `Degraded` in its pod's words while `Ready` stays the primary's: the primary serves.
//!
//! `lastTransitionTime` changes only when a condition's status changes, so recomputing an
//! unchanged state yields an equal status and the operator writes nothing. The status is also
//! the record of what the operator has said: a [`Blocker`] gets its event only while the
//! stored status does not report it yet ([`Blocker::reported_in`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operator_runtime::conditions::{self, State};

use super::upgrade::Plan;
use crate::api::{Database, DatabaseStatus, InstanceStatus, Phase, Role, UpgradeState, UpgradeStatus};
use crate::engine;
use crate::resources::{secret, view::DeploymentView};

/// The Ready reason of a Database whose Deployment replaces its pod: a ready one's, or a
/// restored one's.
const RESTARTING: &str = "Restarting";

/// Why a restored Database restarts.
const RESTORED: &str =
    "the restore is done: the pod that loaded it is replaced by one without the restore's init container";

/// Why the children of a Database could not be brought to the desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Blocker {
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
    /// The generated Secret is gone while the data claim, initialised with its password,
    /// is there: a new password would lock every client out, so none is made.
    CredentialsLost {
        /// The Secret's name.
        secret: String,
        /// The claim's name.
        claim: String,
    },
    /// The claim this Database's data lives on (its uid in `status.claimUID`) is gone: a new
    /// one would be empty, and the engine would start a new database on it as if nothing were
    /// lost, so none is made.
    ClaimLost {
        /// The Database's name.
        database: String,
        /// The claim's name.
        claim: String,
        /// The uid the status recorded.
        uid: String,
    },
    /// A claim of the Database's claim's name and labels is there, but it is not the one the
    /// Database's data lived on (another uid): it is not adopted.
    ClaimReplaced {
        /// The Database's name.
        database: String,
        /// The claim's name.
        claim: String,
        /// The uid the status recorded.
        uid: String,
        /// The uid of the claim there now.
        found: String,
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
    /// The Database's pod has not run for a while, for a cause its status gives
    /// ([`super::pods`]).
    PodFailing {
        /// The kubelet's waiting reason (`CreateContainerConfigError`, `ImagePullBackOff`,
        /// `CrashLoopBackOff`, ...), `VolumeFull` (a server that exits on a full volume) or
        /// `Unschedulable`.
        reason: String,
        /// The cause, with the pod and the container named.
        message: String,
    },
    /// A replica's pod (a Database of several instances) has not run for a while, for a cause
    /// its status gives, as [`Blocker::PodFailing`]'s: an instance the nodes cannot place is
    /// `Unschedulable`, one whose node stopped reporting `NodeUnreachable`. The primary serves:
    /// the Database is `Degraded`, its `Ready` the primary's.
    ReplicaFailing {
        /// As [`Blocker::PodFailing`]'s, or `NodeUnreachable`.
        reason: String,
        /// The cause, with the pod and the container named.
        message: String,
    },
}

impl Blocker {
    /// Whether `status` already reports this blocker: a Database that stays blocked for the
    /// same reason gets one event, not one per reconcile, and a restarted operator does not
    /// tell it again. A wait is said in `Progressing`, a fault in `Degraded`.
    pub(crate) fn reported_in(&self, status: Option<&DatabaseStatus>) -> bool {
        let type_ = if matches!(self, Blocker::Waiting { .. }) { "Progressing" } else { "Degraded" };
        let said = State::yes(self.reason(), self.message());
        status.is_some_and(|s| conditions::reports(&s.conditions, type_, &said))
    }

    /// The Blocker a Deployment's own conditions report, if any.
    pub(crate) fn from_deployment(deployment: &DeploymentView) -> Option<Self> {
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
                reason: c.reason.as_deref().unwrap_or(&c.type_).to_string(),
                message: c.message.as_deref().unwrap_or_default().to_string(),
            })
    }

    /// The condition reason: `ResourceExists`, `InvalidSpec`, or the Deployment's reason.
    pub(crate) fn reason(&self) -> &str {
        match self {
            Blocker::NotOwned { .. } => "ResourceExists",
            Blocker::Rejected { .. } => "InvalidSpec",
            Blocker::Waiting { reason, .. } | Blocker::Unrestorable { reason, .. } => reason,
            Blocker::MissingStorageClass { .. } => "StorageClassNotFound",
            Blocker::QuotaExceeded { .. } => "QuotaExceeded",
            Blocker::CredentialsLost { .. } => "CredentialsLost",
            Blocker::ClaimLost { .. } => "ClaimLost",
            Blocker::ClaimReplaced { .. } => "ClaimReplaced",
            Blocker::DeploymentFailing { reason, .. }
            | Blocker::PodFailing { reason, .. }
            | Blocker::ReplicaFailing { reason, .. } => reason,
        }
    }

    /// A message for a kubectl user: what is wrong and what to do.
    pub(crate) fn message(&self) -> String {
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
            Blocker::CredentialsLost { secret, claim } => format!(
                "Secret {secret:?} is gone, and claim {claim:?} holds data initialised with the password it held: a \
                 new password would lock every client out, so none is generated; create Secret {secret:?} again with \
                 the keys username and password (the database's own), or set spec.credentials.secretName to a Secret \
                 that holds them"
            ),
            Blocker::ClaimLost { database, claim, uid } => format!(
                "claim {claim:?} (uid {uid}), which held this Database's data, is gone: a new claim would be empty, so \
                 none is made; restore the data into a new Database (spec.restoreFrom), or, to start this one empty, \
                 remove status.claimUID: {}",
                accept_claim_command(database)
            ),
            Blocker::ClaimReplaced { database, claim, uid, found } => format!(
                "claim {claim:?} is uid {found}, not uid {uid}, which held this Database's data: it is not adopted; \
                 delete it, or, if its data is this Database's (a restored volume), accept it by removing \
                 status.claimUID: {}",
                accept_claim_command(database)
            ),
            Blocker::MissingStorageClass { name } => format!(
                "StorageClass {name:?} (spec.storage.storageClassName) does not exist, so the claim cannot be provisioned; \
                 create it, or create the Database again with a class that exists (kubectl get storageclass): a \
                 claim's class cannot change"
            ),
            Blocker::DeploymentFailing { message, .. } => {
                format!("the Deployment cannot run the database: {message}")
            }
            Blocker::PodFailing { message, .. } => message.clone(),
            Blocker::ReplicaFailing { message, .. } => format!("{message}; the primary serves meanwhile"),
        }
    }
}

/// The command that removes the `status.claimUID` of Database `database`, for a message.
fn accept_claim_command(database: &str) -> String {
    format!(
        "kubectl patch database {database} --subresource=status --type=json \
         -p '[{{\"op\":\"remove\",\"path\":\"/status/claimUID\"}}]'"
    )
}

/// The phase and the three conditions a status shows.
#[derive(Debug)]
struct Summary {
    phase: Phase,
    ready: State,
    progressing: State,
    degraded: State,
}

/// What the status follows from the Deployment and the status before.
#[derive(Debug)]
struct Observed {
    ready_replicas: i32,
    rolled_out: bool,
    /// The Deployment is replacing its pods with a new revision ([`DeploymentView::replacing_pods`]).
    replacing: bool,
    /// Ready before; or restarting, or Degraded because it lost its replicas, after being ready.
    was_ready: bool,
    /// The restore was recorded in this pass: its pod is replaced next.
    restored: bool,
    /// The stored status says `Restarting`, and why.
    restarting: Option<String>,
}

impl Observed {
    fn ready(&self) -> State {
        if self.ready_replicas > 0 {
            State::yes("DeploymentReady", format!("{} replica(s) ready", self.ready_replicas))
        } else {
            State::no("DeploymentNotReady", "no replica of the Deployment is ready")
        }
    }
}

/// What a pass saw and did that the status depends on.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen<'a> {
    /// The Deployment as last seen, if any.
    pub(crate) deployment: Option<&'a DeploymentView>,
    /// What blocked the pass, if anything.
    pub(crate) blocker: Option<&'a Blocker>,
    /// The pass recorded a restore: the pod that loaded it serves, and is replaced next.
    pub(crate) restored: bool,
    /// Each instance, when the Database has several (`spec.instances`); the first is the
    /// primary, whose Deployment is `deployment`.
    pub(crate) instances: &'a [InstanceStatus],
}

/// The image that last became Ready: the plan's once the Deployment runs it Ready.
fn current_image(
    deployment: Option<&DeploymentView>,
    plan: &Plan,
    previous: Option<&DatabaseStatus>,
) -> Option<String> {
    if deployment.is_some_and(|d| d.runs_ready(&plan.image)) {
        Some(plan.image.clone())
    } else {
        previous.and_then(|s| s.current_image.clone())
    }
}

/// The ready count: the Deployment's, or with several instances theirs (the phase is still
/// the primary's).
fn ready_count(instances: &[InstanceStatus], deployment_ready: i32) -> i32 {
    if instances.is_empty() {
        return deployment_ready;
    }
    i32::try_from(instances.iter().filter(|i| i.ready).count()).unwrap_or(i32::MAX)
}

/// Whether the status before says the database was ready: Ready, restarting after being
/// ready, or Degraded because it lost its replicas, or because a replica does not run (which
/// leaves the primary's Ready as it was).
fn was_ready(s: &DatabaseStatus) -> bool {
    let reason = |type_: &str, reason: &str| s.conditions.iter().any(|c| c.type_ == type_ && c.reason == reason);
    match s.phase {
        Some(Phase::Ready) => true,
        Some(Phase::Pending) => reason("Ready", RESTARTING),
        Some(Phase::Degraded) => {
            reason("Degraded", "NoReadyReplicas")
                || (!s.instances.is_empty() && s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        }
        None => false,
    }
}

/// The status `db` should have, given what the pass saw and the image plan. `now` stamps
/// conditions whose status changed.
pub(crate) fn desired(db: &Database, seen: &Seen<'_>, plan: &Plan, now: &Time) -> DatabaseStatus {
    let Seen { deployment, blocker, restored, instances } = *seen;
    let previous = db.status.as_ref();
    let observed = Observed {
        ready_replicas: deployment.and_then(|d| d.status.as_ref()?.ready_replicas).unwrap_or(0),
        rolled_out: deployment.is_some_and(DeploymentView::rolled_out),
        replacing: deployment.is_some_and(DeploymentView::replacing_pods),
        restored,
        was_ready: previous.is_some_and(was_ready),
        restarting: previous.filter(|s| s.phase == Some(Phase::Pending)).and_then(|s| {
            let ready = s.conditions.iter().find(|c| c.type_ == "Ready" && c.reason == RESTARTING)?;
            Some(ready.message.clone())
        }),
    };
    let summary = match (blocker, plan.upgrade.as_ref()) {
        (Some(blocker), _) => blocked(blocker, &observed),
        // An upgrade that failed or was refused: the database may well serve (the old image,
        // or the new one that is not Ready), but the spec is not what runs.
        (None, Some(upgrade)) if !matches!(upgrade.state, UpgradeState::Upgrading | UpgradeState::BackingUp) => {
            upgrade_failed(upgrade, &observed)
        }
        (None, Some(upgrade)) => upgrading(upgrade, &observed),
        (None, None) => steady(&observed),
    };
    let generation = db.metadata.generation;
    let stored = previous.map_or(&[][..], |s| &s.conditions[..]);
    let condition = |type_: &str, state: State| conditions::condition(stored, type_, state, generation, now);
    let engine = engine::of_database(db);
    DatabaseStatus {
        observed_generation: generation,
        ready_replicas: Some(ready_count(instances, observed.ready_replicas)),
        current_primary: instances.iter().find(|i| i.role == Some(Role::Primary)).map(|i| i.name.clone()),
        instances: instances.to_vec(),
        phase: Some(summary.phase),
        secret_name: engine.map(|_| secret::secret_name(db)),
        current_image: current_image(deployment, plan, previous),
        upgrade: plan.upgrade.clone().map(Box::new),
        // What the reconcile sets itself (restore, schedule), kept until it does.
        restored_from: previous.and_then(|s| s.restored_from.clone()),
        claim_uid: previous.and_then(|s| s.claim_uid.clone()),
        last_scheduled_backup: previous.and_then(|s| s.last_scheduled_backup.clone()),
        endpoint: engine.map(|engine| secret::endpoint(db, engine)),
        conditions: vec![
            condition("Ready", summary.ready),
            condition("Progressing", summary.progressing),
            condition("Degraded", summary.degraded),
        ],
    }
}

/// A Database its reconcile could not bring to the spec: a wait (`Pending`) or a fault
/// (`Degraded`), in the blocker's words.
fn blocked(blocker: &Blocker, observed: &Observed) -> Summary {
    let (reason, message) = (blocker.reason(), blocker.message());
    match blocker {
        Blocker::ReplicaFailing { .. } => Summary {
            phase: Phase::Degraded,
            ready: observed.ready(),
            progressing: State::no(reason, "the operator cannot proceed until the problem is fixed"),
            degraded: State::yes(reason, message),
        },
        Blocker::Waiting { .. } => Summary {
            phase: Phase::Pending,
            ready: State::no(reason, message.clone()),
            progressing: State::yes(reason, message),
            degraded: State::no("AsExpected", "nothing is wrong yet"),
        },
        _ => Summary {
            phase: Phase::Degraded,
            ready: State::no(reason, message.clone()),
            progressing: State::no(reason, "the operator cannot proceed until the problem is fixed"),
            degraded: State::yes(reason, message),
        },
    }
}

/// An upgrade that was refused, whose backup failed, or that timed out.
fn upgrade_failed(upgrade: &UpgradeStatus, observed: &Observed) -> Summary {
    let (from, to) = (&upgrade.from, &upgrade.to);
    let (reason, message) = match upgrade.state {
        UpgradeState::Refused => {
            let change = if [from, to].into_iter().all(|image| super::upgrade::names_a_version(image)) {
                "changes the engine's major version, which cannot read the old data directory".to_string()
            } else {
                "may change the engine's major version (a tag that names no version, as latest or a digest, may be \
                 any), which could not read the old data directory"
                    .to_string()
            };
            (
                "MajorVersionUpgrade",
                format!(
                    "{from} to {to} {change}: it was not rolled, and {from} still runs. Take a DatabaseBackup and \
                     restore it into a new Database (spec.restoreFrom), or set spec.upgrade.allowMajor if the image \
                     migrates its data"
                ),
            )
        }
        UpgradeState::BackupFailed => (
            "UpgradeBackupFailed",
            format!(
                "the backup taken before upgrading from {from} to {to} failed (see its DatabaseBackup): the new \
                 image was not rolled. Change spec.image, or unset spec.upgrade.backupFirst, to go on"
            ),
        ),
        UpgradeState::RolledBack => (
            "UpgradeFailed",
            format!(
                "{to} did not become ready within spec.upgrade.timeout; rolled back to {from} (spec.upgrade.policy \
                 Rollback). Change spec.image to try again"
            ),
        ),
        UpgradeState::NotRolledBack => (
            "UpgradeFailed",
            format!(
                "{to} did not become ready within spec.upgrade.timeout; the Deployment keeps it and was not rolled \
                 back to {from}: the upgrade changes (or may change) the major version, and {from} must not start \
                 on data {to} may have migrated. Restore the backup taken before the upgrade into a new Database \
                 (spec.restoreFrom), or fix {to}"
            ),
        ),
        _ => (
            "UpgradeFailed",
            format!(
                "{to} did not become ready within spec.upgrade.timeout; the Deployment keeps it (spec.upgrade.policy \
                 Rollback would go back to {from})"
            ),
        ),
    };
    Summary {
        phase: Phase::Degraded,
        ready: observed.ready(),
        progressing: State::no(reason, message.clone()),
        degraded: State::yes(reason, message),
    }
}

/// An upgrade in progress: its backup being taken, or the new image rolling out.
fn upgrading(upgrade: &UpgradeStatus, observed: &Observed) -> Summary {
    let (from, to) = (&upgrade.from, &upgrade.to);
    let progressing = if upgrade.state == UpgradeState::BackingUp {
        State::yes("BackingUp", format!("taking a backup before upgrading from {from} to {to}"))
    } else {
        State::yes("Upgrading", format!("upgrading from {from} to {to}: waiting for the new pod to become ready"))
    };
    Summary {
        phase: if observed.ready_replicas > 0 { Phase::Ready } else { Phase::Pending },
        ready: observed.ready(),
        progressing,
        degraded: State::no("AsExpected", "the upgrade is in progress"),
    }
}

/// Nothing blocks and no upgrade runs: Ready once rolled out (and, once Ready, through a
/// rollout while a replica is still ready), Pending before it, and Pending again while a ready
/// database's Deployment replaces its pod (`Restarting`: a new size; the `Recreate` strategy
/// stops the old pod before the new one starts). A restored Database is Pending `Restarting`
/// from the pass that records its restore, whose pod is replaced next: its first Ready is the
/// pod it keeps. Degraded when a ready
/// database lost its replicas otherwise: a pod that stopped being ready with no rollout under
/// way, or a rollout past the Deployment's progress deadline. A new pod that cannot run is
/// told sooner, by its own reason ([`super::pods`]).
fn steady(observed: &Observed) -> Summary {
    let rolling = State::yes("Reconciling", "the Deployment is rolling out the current spec");
    // A restart goes on from the moment it is said until the Deployment has rolled out, though
    // the old pod may still serve for a while: a restored Database's first Ready is final.
    let restart =
        observed.replacing && (observed.restarting.is_some() || (observed.was_ready && observed.ready_replicas == 0));
    if observed.restored || restart {
        let why = match &observed.restarting {
            _ if observed.restored => RESTORED.to_string(),
            Some(said) => said.clone(),
            None => "the Deployment is replacing the database's pod to roll out the current spec: the old pod stops \
                     before the new one starts"
                .to_string(),
        };
        return Summary {
            phase: Phase::Pending,
            ready: State::no(RESTARTING, why),
            progressing: rolling,
            degraded: State::no("AsExpected", "a restart the operator rolls: nothing is wrong"),
        };
    }
    if observed.ready_replicas > 0 && (observed.rolled_out || observed.was_ready) {
        return Summary {
            phase: Phase::Ready,
            ready: observed.ready(),
            progressing: if observed.rolled_out {
                State::no("ReconcileComplete", "the Deployment and Service match the spec")
            } else {
                rolling
            },
            degraded: State::no("AsExpected", "the database is running as expected"),
        };
    }
    if observed.was_ready {
        let lost = "the database was ready and has no ready replica now";
        return Summary {
            phase: Phase::Degraded,
            ready: State::no("NoReadyReplicas", lost),
            progressing: rolling,
            degraded: State::yes("NoReadyReplicas", lost),
        };
    }
    Summary {
        phase: Phase::Pending,
        ready: State::no("DeploymentNotReady", "waiting for the Deployment to roll out and a replica to become ready"),
        progressing: rolling,
        degraded: State::no("AsExpected", "nothing is wrong yet"),
    }
}

/// Whether `db` needs nothing urgent: its status describes its current generation and says
/// Ready. The controller queues a settled Database's child churn and status-only changes at low
/// priority ([`operator_runtime::controller::Builder::settled`]); a new, changed or unready one
/// stays normal, so its way to Ready never waits behind a fleet-wide change.
pub(crate) fn settled(db: &Database) -> bool {
    db.status.as_ref().is_some_and(|status| {
        status.observed_generation.is_some()
            && status.observed_generation == db.metadata.generation
            && status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::api::{DatabaseSpec, Size};
    use crate::resources::view::{DeploymentConditionView, DeploymentStatusView};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use k8s_openapi::jiff::Timestamp;

    /// The plan of a Database whose image is not changing.
    fn no_upgrade() -> Plan {
        Plan::steady("postgres:17")
    }

    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn database() -> Database {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
        db.metadata.generation = Some(3);
        db
    }

    fn deployment(ready: i32) -> DeploymentView {
        let full = crate::resources::workload::deployment(&database());
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

    /// [`super::desired`] of a pass that recorded no restore.
    fn desired(
        db: &Database,
        deployment: Option<&DeploymentView>,
        blocker: Option<&Blocker>,
        plan: &Plan,
        now: &Time,
    ) -> DatabaseStatus {
        super::desired(db, &Seen { deployment, blocker, restored: false, instances: &[] }, plan, now)
    }

    fn condition<'a>(status: &'a DatabaseStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn database_without_a_ready_replica_is_pending_and_progressing() {
        let status = desired(&database(), Some(&deployment(0)), None, &no_upgrade(), &time(10));
        assert_eq!(status.phase, Some(Phase::Pending));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(condition(&status, "Ready").status, "False");
        assert_eq!(condition(&status, "Progressing").status, "True");
    }

    #[test]
    fn rolled_out_deployment_with_a_ready_replica_makes_the_database_ready() {
        let status = desired(&database(), Some(&deployment(1)), None, &no_upgrade(), &time(10));
        assert_eq!(status.phase, Some(Phase::Ready));
        assert_eq!(status.ready_replicas, Some(1));
        assert_eq!(condition(&status, "Ready").reason, "DeploymentReady");
    }

    #[test]
    fn a_replica_that_cannot_run_degrades_the_database_while_its_primary_stays_ready_and_says_so_once() {
        let db = database();
        let instances = [
            InstanceStatus { name: "orders".into(), role: Some(Role::Primary), ready: true, ..Default::default() },
            InstanceStatus {
                name: "orders-instance-2".into(),
                role: Some(Role::Replica),
                ready: false,
                ..Default::default()
            },
        ];
        let blocker = Blocker::ReplicaFailing {
            reason: "Unschedulable".into(),
            message: "pod orders-instance-2-5d9f cannot be scheduled: 0/1 nodes are available".into(),
        };
        let seen =
            Seen { deployment: Some(&deployment(1)), blocker: Some(&blocker), restored: false, instances: &instances };
        let status = super::desired(&db, &seen, &no_upgrade(), &time(10));
        assert_eq!((status.phase, status.ready_replicas), (Some(Phase::Degraded), Some(1)));
        assert_eq!(
            (condition(&status, "Ready").status.as_str(), condition(&status, "Ready").reason.as_str()),
            ("True", "DeploymentReady")
        );
        let degraded = condition(&status, "Degraded");
        assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "Unschedulable"));
        assert!(degraded.message.contains("orders-instance-2-5d9f") && degraded.message.contains("the primary serves"));
        let db = Database { status: Some(status), ..db };
        assert!(blocker.reported_in(db.status.as_ref()), "one event, not one per pass");
        // Once the replica runs, the Database is Ready again, its Ready unchanged since.
        let running = [instances[0].clone(), InstanceStatus { ready: true, ..instances[1].clone() }];
        let seen = Seen { blocker: None, instances: &running, ..seen };
        let status = super::desired(&db, &seen, &no_upgrade(), &time(40));
        assert_eq!((status.phase, status.ready_replicas), (Some(Phase::Ready), Some(2)));
        assert_eq!(condition(&status, "Ready").last_transition_time, time(10));
        assert_eq!(condition(&status, "Degraded").status, "False");
    }

    #[test]
    fn only_a_ready_database_whose_status_describes_its_generation_is_settled() {
        let mut db = database();
        assert!(!settled(&db), "no status yet");
        db.status = Some(desired(&db, Some(&deployment(0)), None, &no_upgrade(), &time(10)));
        assert!(!settled(&db), "not ready");
        db.status = Some(desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(10)));
        assert!(settled(&db));
        db.metadata.generation = Some(4);
        assert!(!settled(&db), "a spec the operator has not acted on");
    }

    #[test]
    fn ready_database_that_loses_its_replica_is_degraded() {
        let mut db = database();
        db.status = Some(desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(10)));
        let status = desired(&db, Some(&deployment(0)), None, &no_upgrade(), &time(20));
        assert_eq!(status.phase, Some(Phase::Degraded));
        assert_eq!(condition(&status, "Degraded").status, "True");
    }

    /// `deployment(ready)` after the operator wrote a new template, as its controller reports
    /// it while it replaces the pod: the new ReplicaSet's pod `updated`, the Progressing
    /// condition's `reason`.
    fn replacing(ready: i32, updated: i32, reason: &str) -> DeploymentView {
        let mut d = deployment(ready);
        d.metadata.generation = Some(2);
        let status = d.status.as_mut().unwrap();
        status.observed_generation = Some(2);
        status.updated_replicas = Some(updated);
        status.replicas = Some(1);
        status.conditions = Some(vec![DeploymentConditionView {
            type_: "Progressing".into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: None,
        }]);
        d
    }

    #[test]
    fn a_ready_database_whose_deployment_replaces_its_pod_is_pending_restarting_not_degraded() {
        let mut db = database();
        db.status = Some(desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(10)));
        // The old pod stops (its ReplicaSet scaled to zero, the condition not turned yet), then
        // the new ReplicaSet's pod starts.
        for (at, deployment) in [
            (20, replacing(0, 0, "NewReplicaSetAvailable")),
            (30, replacing(0, 1, "NewReplicaSetCreated")),
            (40, replacing(0, 1, "ReplicaSetUpdated")),
        ] {
            let status = desired(&db, Some(&deployment), None, &no_upgrade(), &time(at));
            assert_eq!(status.phase, Some(Phase::Pending), "at {at}");
            assert_eq!(condition(&status, "Ready").reason, "Restarting", "at {at}");
            assert_eq!(condition(&status, "Progressing").status, "True", "at {at}");
            assert_eq!(condition(&status, "Degraded").status, "False", "at {at}");
            db.status = Some(status);
        }
        let mut done = replacing(1, 1, "NewReplicaSetAvailable");
        done.status.as_mut().unwrap().ready_replicas = Some(1);
        let status = desired(&db, Some(&done), None, &no_upgrade(), &time(50));
        assert_eq!(status.phase, Some(Phase::Ready));
        assert_eq!(condition(&status, "Progressing").reason, "ReconcileComplete");
    }

    #[test]
    fn a_restored_database_is_first_ready_on_the_pod_it_keeps() {
        let mut db = database();
        // The pod that loaded the restore serves; this pass records the restore.
        let recorded = Seen { deployment: Some(&deployment(1)), blocker: None, restored: true, instances: &[] };
        let status = super::desired(&db, &recorded, &no_upgrade(), &time(10));
        assert_eq!(status.phase, Some(Phase::Pending));
        assert_eq!(condition(&status, "Ready").reason, "Restarting");
        assert_eq!(condition(&status, "Progressing").status, "True");
        db.status = Some(status);
        // The next pass replaces that pod, which serves until it stops; then the new
        // ReplicaSet's pod starts.
        let steps = [
            (20, 1, 0, "NewReplicaSetAvailable"),
            (30, 0, 0, "NewReplicaSetAvailable"),
            (40, 0, 1, "NewReplicaSetCreated"),
        ];
        for (at, ready, updated, reason) in steps {
            let replaced = replacing(ready, updated, reason);
            let status = desired(&db, Some(&replaced), None, &no_upgrade(), &time(at));
            assert_eq!(status.phase, Some(Phase::Pending), "at {at}");
            let said = condition(&status, "Ready");
            assert_eq!((said.reason.as_str(), said.message.as_str()), ("Restarting", RESTORED), "at {at}");
            db.status = Some(status);
        }
        let mut done = replacing(1, 1, "NewReplicaSetAvailable");
        done.status.as_mut().unwrap().ready_replicas = Some(1);
        assert_eq!(desired(&db, Some(&done), None, &no_upgrade(), &time(50)).phase, Some(Phase::Ready));
    }

    #[test]
    fn a_restarting_database_that_loses_its_new_pod_or_passes_the_deadline_is_degraded() {
        let mut db = database();
        db.status = Some(desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(10)));
        db.status = Some(desired(&db, Some(&replacing(0, 1, "ReplicaSetUpdated")), None, &no_upgrade(), &time(20)));
        // The rollout completed, and its pod then stopped being ready: a fault, remembered as
        // a database that was ready.
        let status = desired(&db, Some(&replacing(0, 1, "NewReplicaSetAvailable")), None, &no_upgrade(), &time(30));
        assert_eq!(status.phase, Some(Phase::Degraded));
        assert_eq!(condition(&status, "Degraded").reason, "NoReadyReplicas");
        // A rollout past its progress deadline.
        let mut stuck = replacing(0, 1, "ProgressDeadlineExceeded");
        stuck.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
        let status = desired(&db, Some(&stuck), None, &no_upgrade(), &time(30));
        assert_eq!(status.phase, Some(Phase::Degraded));
    }

    #[test]
    fn a_database_never_ready_is_pending_waiting_for_its_deployment_not_restarting() {
        let status = desired(&database(), Some(&replacing(0, 1, "ReplicaSetUpdated")), None, &no_upgrade(), &time(10));
        assert_eq!(status.phase, Some(Phase::Pending));
        assert_eq!(condition(&status, "Ready").reason, "DeploymentNotReady");
    }

    #[test]
    fn foreign_child_blocks_with_resource_exists() {
        let blocker = Blocker::NotOwned { kind: "Deployment", name: "orders".into() };
        let status = desired(&database(), None, Some(&blocker), &no_upgrade(), &time(10));
        assert_eq!(status.phase, Some(Phase::Degraded));
        let degraded = condition(&status, "Degraded");
        assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "ResourceExists"));
        assert!(degraded.message.contains("not managed by this Database"), "{}", degraded.message);
    }

    /// The regression test of a blocker announced again by a restarted operator, and of one
    /// announced at every reconcile: the stored status (as this process last wrote it, see
    /// `operator_runtime::write::Statuses`) is the record of what was said.
    #[test]
    fn a_blocker_is_news_until_the_status_reports_it_and_again_after_a_recovery() {
        let blocker = Blocker::NotOwned { kind: "Deployment", name: "orders".into() };
        assert!(!blocker.reported_in(None), "nothing said yet");
        let said = desired(&database(), None, Some(&blocker), &no_upgrade(), &time(10));
        assert!(blocker.reported_in(Some(&said)), "said once: a restarted operator reads the status");
        let other = Blocker::NotOwned { kind: "Service", name: "orders".into() };
        assert!(!other.reported_in(Some(&said)), "another blocker is news");
        let mut db = database();
        db.status = Some(said);
        let recovered = desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(20));
        assert!(!blocker.reported_in(Some(&recovered)), "blocked again after a recovery");
    }

    #[test]
    fn a_blocker_is_reported_once_until_its_reason_or_message_changes() {
        let blocker = Blocker::NotOwned { kind: "Deployment", name: "orders".into() };
        assert!(!blocker.reported_in(None));
        let status = desired(&database(), None, Some(&blocker), &no_upgrade(), &time(10));
        assert!(blocker.reported_in(Some(&status)));
        let other = Blocker::NotOwned { kind: "Service", name: "orders".into() };
        assert!(!other.reported_in(Some(&status)), "another message is news");
        let waiting = Blocker::Waiting { reason: "WaitingForBackup", message: "m".into() };
        let status = desired(&database(), None, Some(&waiting), &no_upgrade(), &time(10));
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
        let status = desired(&database(), Some(&failing), Some(&blocker), &no_upgrade(), &time(10));
        assert_eq!(status.phase, Some(Phase::Degraded));
        let degraded = condition(&status, "Degraded");
        assert_eq!(degraded.reason, "FailedCreate");
        assert!(degraded.message.contains("exceeded quota"), "{}", degraded.message);
        assert!(Blocker::from_deployment(&deployment(1)).is_none());
    }

    #[test]
    fn unchanged_state_keeps_transition_times_so_the_status_is_equal() {
        let mut db = database();
        let first = desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(10));
        db.status = Some(first.clone());
        let again = desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(99));
        assert_eq!(first, again);
    }

    #[test]
    fn a_condition_that_flips_gets_a_new_transition_time() {
        let mut db = database();
        db.status = Some(desired(&db, Some(&deployment(0)), None, &no_upgrade(), &time(10)));
        let status = desired(&db, Some(&deployment(1)), None, &no_upgrade(), &time(20));
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
