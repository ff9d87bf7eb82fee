//! Which instance of a Database of several is its primary, and a failover when the primary is
//! lost: two phases around the others.
//!
//! - **The record** is the Database's [`PRIMARY_ANNOTATION`] ([`crate::api::instances`] says
//!   why there): the instance it names is to be the primary, and every other instance's
//!   Deployment is a replica's. A change of the record is written alone, by the failover phase
//!   (or by `kubectl database switchover`); the passes that see it in the cache move the roles.
//!   A pass that saw an older Database writes the older roles, which the instances have until
//!   the cache shows the new record, so it undoes nothing.
//! - **Never two primaries** ([`DatabaseReconciler::roles`], before the workload phase): the
//!   instance the record names starts as the primary only once no pod of another instance
//!   labelled primary may still run: none is bound to a node that still reports (a pod on a
//!   node that stopped reporting is one the failover replaces). Until then it stays a replica,
//!   and the old primary, whose Deployment is now a replica's, shuts down: a clean shutdown
//!   hands the replicas every WAL record it wrote, so a switchover loses no commit.
//! - **Failover** ([`DatabaseReconciler::failover`], after the positions phase): a primary
//!   that has not been ready for `spec.replication.failoverDelaySeconds`, as this operator saw
//!   it from the first pass that found it not ready ([`super::down`]), is replaced by the ready replica
//!   furthest ahead (the highest timeline, then the most WAL received). A Warning event says
//!   which, and how far behind the old primary it was at the last look: what an asynchronous
//!   failover may have lost (nothing, in synchronous mode: a commit was acknowledged only once a
//!   replica had it, and the one furthest ahead has everything any replica has). With no
//!   replica to promote the Database says so and waits.
//! - **The promotion** is the instance's restart as the primary: its start ends the standby's
//!   recovery at the end of the WAL it received, on a new timeline ([`crate::engine`]'s
//!   postgres). The old primary, back, starts as a replica: it copies the new primary afresh,
//!   since what it wrote after the last record a replica received is on no other instance.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube_client::api::{Api, Patch, PatchParams};
use operator_runtime::informer::key_of;

use super::pods::on_lost_node;
use super::reconcile::{DatabaseReconciler, Error, Pass, Step};
use super::status::Blocker;
use crate::api::{Database, InstanceStatus, PRIMARY_ANNOTATION, Role, failover_delay, instance_name, primary_ordinal};
use crate::engine::position::Position;
use crate::resources::meta::ROLE_LABEL;
use crate::resources::replication::INSTANCE_NAME_LABEL;

/// How soon a Database is looked at again while its roles change: pods are not watched.
const SWITCHING_RECHECK: Duration = Duration::from_secs(2);

impl DatabaseReconciler {
    /// Which instance starts as the primary in this pass (`pass.primary`): the one the record
    /// names, once no other instance's pod may still serve as one.
    pub(super) async fn roles(&self, pass: &mut Pass<'_>) -> Step {
        let db = pass.db;
        if !crate::api::replicated(db) {
            return Ok(());
        }
        let ordinal = primary_ordinal(db).map_err(|named| Blocker::PodFailing {
            reason: "UnknownPrimary".into(),
            message: format!(
                "annotation {PRIMARY_ANNOTATION} names {named:?}, which is no instance of this Database (they are {} \
                 to {}): set it to one of them, or remove it to make the first the primary",
                instance_name(db, 1),
                instance_name(db, crate::api::instances(db)),
            ),
        })?;
        let pods = self.instance_pods(pass).await?;
        let primary = instance_name(db, ordinal);
        match serving_primary(&pods, &primary) {
            None => pass.primary = Some(ordinal),
            Some(old) => {
                pass.primary = None;
                pass.recheck = Some(SWITCHING_RECHECK);
                pass.degraded = Some(Blocker::Waiting {
                    reason: "SwitchingPrimary",
                    message: format!(
                        "{primary} becomes the primary once pod {old} of the old primary has stopped: it is shutting \
                         down, handing its replicas the last of its WAL"
                    ),
                });
            }
        }
        pass.pods = Some(pods);
        Ok(())
    }

    /// A primary not ready for longer than the failover delay is replaced by the ready
    /// replica furthest ahead: the record names that replica from now on. A primary whose
    /// server is still starting (its first start in its pod, which the startup probe bounds)
    /// is not counted down.
    pub(super) async fn failover(&self, pass: &mut Pass<'_>) -> Step {
        let key = key_of(pass.db);
        let Some(primary) = pass.instances.iter().find(|i| i.role == Some(Role::Primary)) else {
            self.down.forget(&key);
            return Ok(());
        };
        let pods = pass.pods.as_deref().unwrap_or_default();
        if primary.ready || starting(pods, &primary.name) {
            self.down.ready(&key, &primary.name, &pass.instances);
            return Ok(());
        }
        let chosen = furthest_ahead(&pass.instances, &pass.positions);
        let candidate = chosen.map_or("", |c| c.name.as_str());
        let (down, lag) = self.down.down(&key, &primary.name, candidate, Instant::now());
        let delay = failover_delay(pass.db);
        if down < delay {
            let next = delay - down + Duration::from_secs(1);
            pass.recheck = Some(pass.recheck.map_or(next, |r| r.min(next)));
            return Ok(());
        }
        let Some(chosen) = chosen else {
            pass.recheck = Some(SWITCHING_RECHECK);
            return Err(Blocker::PodFailing {
                reason: "NoReplicaToPromote".into(),
                message: format!(
                    "primary {} has not been ready for {} s, and no replica is ready and answering to be promoted in \
                     its place: the Database waits for either",
                    primary.name,
                    down.as_secs()
                ),
            }
            .into());
        };
        let message = failover_message(pass.db, &primary.name, &chosen.name, lag, down);
        let chosen = chosen.name.clone();
        self.record_primary(pass.db, &chosen).await?;
        self.down.forget(&key);
        pass.report.warning("FailingOver", message);
        pass.recheck = Some(SWITCHING_RECHECK);
        Ok(())
    }

    /// Writes the record: `instance` is to be `db`'s primary.
    async fn record_primary(&self, db: &Database, instance: &str) -> Result<(), Error> {
        let api: Api<Database> =
            Api::namespaced(self.writer.client().clone(), db.metadata.namespace.as_deref().unwrap_or_default());
        let patch = serde_json::json!({ "metadata": { "annotations": { PRIMARY_ANNOTATION: instance } } });
        let name = db.metadata.name.as_deref().unwrap_or_default();
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::Write { what: format!("the primary of Database {}", key_of(db)), source })?;
        Ok(())
    }
}

/// The first pod of an instance other than `primary` that is labelled primary and may still
/// run as one: bound to a node that still reports, and not finished.
fn serving_primary<'p>(pods: &'p [Pod], primary: &str) -> Option<&'p str> {
    pods.iter()
        .filter(|pod| {
            let labels = pod.metadata.labels.as_ref();
            let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
            label(ROLE_LABEL) == Some(Role::Primary.label())
                && label(INSTANCE_NAME_LABEL) != Some(primary)
                && bound
                && !matches!(phase, Some("Succeeded" | "Failed"))
                && !on_lost_node(pod)
        })
        .find_map(|pod| pod.metadata.name.as_deref())
}

/// The ready replica that has received the most WAL (the highest timeline first), among those
/// that answered (`positions` in the order of `instances`).
fn furthest_ahead<'i>(instances: &'i [InstanceStatus], positions: &[Option<Position>]) -> Option<&'i InstanceStatus> {
    instances
        .iter()
        .zip(positions)
        .filter(|(instance, _)| instance.role == Some(Role::Replica) && instance.ready)
        .filter_map(|(instance, position)| Some((instance, position.as_ref()?)))
        .max_by_key(|(_, position)| (position.timeline, position.lsn))
        .map(|(instance, _)| instance)
}

/// Whether instance `name`'s server is in the first start of its pod: a pod of it on a node
/// that reports, whose containers have not restarted and are not all started yet (or no pod
/// at all, between a pod and its replacement).
fn starting(pods: &[Pod], name: &str) -> bool {
    let mut of_it = pods.iter().filter(|pod| {
        let instance = pod.metadata.labels.as_ref().and_then(|l| l.get(INSTANCE_NAME_LABEL));
        pod.metadata.deletion_timestamp.is_none() && instance.is_some_and(|i| i == name)
    });
    let Some(pod) = of_it.next() else { return true };
    let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    let containers = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
    let restarted = containers.iter().any(|c| c.restart_count > 0);
    let started = !containers.is_empty() && containers.iter().all(|c| c.started == Some(true));
    bound && !restarted && !started && !on_lost_node(pod)
}

/// What the failover event says: who, why, and what may have been lost (`lag`: the promoted
/// replica's, at the last look while the primary was ready).
fn failover_message(db: &Database, primary: &str, chosen: &str, lag: Option<i64>, down: Duration) -> String {
    let lost = match (lag, crate::api::synchronous(db)) {
        (_, true) => "synchronous replication: every acknowledged commit is on it".to_string(),
        (Some(bytes), false) => format!(
            "at the last look while {primary} was ready it was {bytes} bytes of WAL behind: commits acknowledged \
             after that look and not received are lost"
        ),
        (None, false) => format!("how far behind {primary} it was is unknown: it could not be measured"),
    };
    format!(
        "primary {primary} has not been ready for {} s: promoting replica {chosen}, the one furthest ahead ({lost})",
        down.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};

    use super::*;

    fn pod(instance: &str, role: Role, node: Option<&str>, ready: bool, containers_ready: bool) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(format!("{instance}-pod"));
        pod.metadata.labels = Some(
            [(ROLE_LABEL.to_string(), role.label().to_string()), (INSTANCE_NAME_LABEL.to_string(), instance.into())]
                .into(),
        );
        pod.spec = Some(PodSpec { node_name: node.map(String::from), ..Default::default() });
        pod.status = Some(PodStatus {
            phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus { ready: containers_ready, ..Default::default() }]),
            ..Default::default()
        });
        pod
    }

    #[test]
    fn the_chosen_primary_waits_while_an_old_one_may_still_run_and_not_for_one_on_a_lost_node() {
        let old = pod("orders", Role::Primary, Some("node-1"), true, true);
        let new = pod("orders-instance-2", Role::Replica, Some("node-2"), true, true);
        assert_eq!(serving_primary(&[old.clone(), new.clone()], "orders-instance-2"), Some("orders-pod"));
        assert_eq!(serving_primary(&[old.clone(), new.clone()], "orders"), None, "its own pod is no other primary");
        // Shutting down, or crashing, on a node that reports: it may still write.
        let crashing = pod("orders", Role::Primary, Some("node-1"), false, false);
        assert_eq!(serving_primary(&[crashing], "orders-instance-2"), Some("orders-pod"));
        // Its node stopped reporting (ready containers, the pod marked not ready).
        let lost = pod("orders", Role::Primary, Some("node-1"), false, true);
        assert_eq!(serving_primary(&[lost, new.clone()], "orders-instance-2"), None);
        let unscheduled = pod("orders", Role::Primary, None, false, false);
        assert_eq!(serving_primary(&[unscheduled], "orders-instance-2"), None);
        let mut finished = old;
        finished.status.as_mut().unwrap().phase = Some("Failed".into());
        assert_eq!(serving_primary(&[finished, new], "orders-instance-2"), None);
    }

    fn instance(name: &str, role: Role, ready: bool) -> InstanceStatus {
        InstanceStatus { name: name.into(), role: Some(role), ready, ..Default::default() }
    }

    #[test]
    fn the_replica_promoted_is_a_ready_one_furthest_ahead() {
        let at = |timeline, lsn| Some(Position { system_id: "7".into(), timeline, lsn });
        let instances = [
            instance("orders", Role::Primary, false),
            instance("orders-instance-2", Role::Replica, true),
            instance("orders-instance-3", Role::Replica, true),
            instance("orders-instance-4", Role::Replica, false),
        ];
        let chosen = |positions: &[Option<Position>]| furthest_ahead(&instances, positions).map(|i| i.name.as_str());
        assert_eq!(chosen(&[at(1, 900), at(1, 100), at(1, 200), at(1, 800)]), Some("orders-instance-3"));
        assert_eq!(chosen(&[None, at(2, 100), at(1, 200), None]), Some("orders-instance-2"));
        assert_eq!(chosen(&[None, None, at(1, 5), None]), Some("orders-instance-3"));
        assert_eq!(chosen(&[None, None, None, at(1, 800)]), None, "not ready");
    }

    #[test]
    fn a_primary_in_its_first_start_is_starting_and_one_restarted_or_lost_is_not() {
        let mut first = pod("orders", Role::Primary, Some("node-1"), false, false);
        assert!(starting(&[first.clone()], "orders"));
        assert!(starting(&[], "orders"), "between a pod and its replacement");
        first.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].restart_count = 1;
        assert!(!starting(&[first], "orders"), "crashing");
        let mut started = pod("orders", Role::Primary, Some("node-1"), false, false);
        started.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].started = Some(true);
        assert!(!starting(&[started], "orders"), "started, and not ready");
        assert!(!starting(&[pod("orders", Role::Primary, Some("node-1"), false, true)], "orders"), "node lost");
    }
}
