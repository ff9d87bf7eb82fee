//! The positions phase (a Database of several instances): each instance is asked where it
//! stands in the WAL ([`position::identify`], over postgres's replication protocol), and the
//! status records each one's timeline and each replica's lag behind the primary.
//!
//! - **Reads**: the list of the Database's pods the roles phase made (their addresses: pods
//!   are not cached) and one read of the replication Secret (the cache keeps no Secret's data)
//!   per pass; the pods phase after it reuses the list. The instances are asked at once, each within
//!   [`ASK_TIMEOUT`], so a pass waits at most that long for them.
//! - **Lag** is the primary's flushed position less the replica's received one, in bytes; it
//!   is absent when either cannot be asked (no running pod, no address, a refusal, no answer
//!   in time) or when the replica's system identifier is not its primary's (it was not copied
//!   from it). The failure is logged at debug level, never with the password.
//! - **Looked at again** ([`recheck`]): WAL positions are not watched, so a Database with a
//!   replica that lags or cannot be asked is looked at every [`BEHIND_RECHECK`], one whose
//!   replicas have all caught up every [`CAUGHT_UP_RECHECK`]. The status is written only when
//!   it changes, so an idle Database's passes write nothing.
//! - **A replica that does not follow** (behind, and nothing received for
//!   [`STALLED_AFTER`]: [`super::following`]) makes the Database `Degraded`, reason
//!   `ReplicaNotFollowing`, with a Warning event, once the later phases have found nothing
//!   else; `Ready` stays the primary's.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube_client::api::{Api, ListParams};
use operator_runtime::informer::key_of;
use tracing::debug;

use super::following::STALLED_AFTER;
use super::reconcile::{DatabaseReconciler, Error, Pass, Step};
use super::status::Blocker;
use crate::api::{InstanceStatus, Role};
use crate::engine::position::{self, Position};
use crate::engine::{REPLICATION_USER, keys};
use crate::resources::meta::instance_selector;
use crate::resources::replication::{self, INSTANCE_NAME_LABEL};

/// How long an instance has to answer.
pub(super) const ASK_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a Database with a replica behind (or that cannot be asked) is looked at again.
pub(super) const BEHIND_RECHECK: Duration = Duration::from_secs(10);
/// How often a Database whose replicas have caught up is looked at again.
pub(super) const CAUGHT_UP_RECHECK: Duration = Duration::from_secs(60);

impl DatabaseReconciler {
    /// Each instance's timeline and each replica's lag, into `pass.instances`.
    pub(super) async fn positions(&self, pass: &mut Pass<'_>) -> Step {
        if pass.instances.is_empty() {
            return Ok(());
        }
        let pods = match pass.pods.take() {
            Some(pods) => pods,
            None => self.instance_pods(pass).await?,
        };
        let password = self.replication_password(pass).await?;
        let port = pass.engine.map_or(5432, |e| u16::try_from(e.port()).unwrap_or(5432));
        let asked = pass.instances.iter().map(|instance| {
            let address = address_of(&pods, &instance.name);
            let password = password.as_str();
            async move {
                let address = address?;
                let asked = position::identify(address, port, REPLICATION_USER, password, ASK_TIMEOUT).await;
                asked.map_err(|error| debug!(instance = %instance.name, %error, "cannot ask the instance")).ok()
            }
        });
        let positions = futures::future::join_all(asked).await;
        record(&mut pass.instances, &positions);
        pass.recheck = recheck(&pass.instances);
        pass.degraded = pass.degraded.take().or_else(|| self.not_following(pass, &positions));
        pass.pods = Some(pods);
        pass.positions = positions;
        Ok(())
    }

    /// The first replica that is behind and has received nothing for [`STALLED_AFTER`], as a
    /// [`Blocker::ReplicaFailing`]; every replica's position is remembered
    /// ([`Following`](super::following::Following)).
    fn not_following(&self, pass: &Pass<'_>, positions: &[Option<Position>]) -> Option<Blocker> {
        let mut found = None;
        let replicas = pass.instances.iter().zip(positions).filter(|(i, _)| i.role == Some(Role::Replica));
        for (instance, position) in replicas {
            let received = position.as_ref().map_or(0, |p| p.lsn);
            let stalled = self.following.observe(&pass.key(&instance.name), received, instance.lag_bytes, pass.now.0);
            if stalled.is_some() && found.is_none() {
                found = Some(Blocker::ReplicaFailing {
                    reason: "ReplicaNotFollowing".into(),
                    message: format!(
                        "replica {name} is behind its primary and has received nothing from it for {seconds} s or \
                         more; its log says why (kubectl logs deployment/{name})",
                        name = instance.name,
                        seconds = STALLED_AFTER.as_secs()
                    ),
                });
            }
        }
        found
    }

    /// The Database's pods (every instance's), in one list.
    pub(super) async fn instance_pods(&self, pass: &Pass<'_>) -> Result<Vec<Pod>, Error> {
        let db = pass.db;
        let api: Api<Pod> =
            Api::namespaced(self.writer.client().clone(), db.metadata.namespace.as_deref().unwrap_or_default());
        let selector: Vec<String> = instance_selector(db).iter().map(|(k, v)| format!("{k}={v}")).collect();
        let listed = api
            .list(&ListParams::default().labels(&selector.join(",")))
            .await
            .map_err(|source| Error::Read { what: format!("pods of Database {}", key_of(db)), source })?;
        Ok(listed.items)
    }

    /// The replication role's password, from its Secret.
    async fn replication_password(&self, pass: &Pass<'_>) -> Result<String, Error> {
        let name = replication::secret_name(pass.db);
        let api: Api<Secret> =
            Api::namespaced(self.writer.client().clone(), pass.db.metadata.namespace.as_deref().unwrap_or_default());
        let secret = api
            .get(&name)
            .await
            .map_err(|source| Error::Read { what: format!("Secret {}", pass.key(&name)), source })?;
        let password = secret.data.as_ref().and_then(|data| data.get(keys::PASSWORD));
        Ok(password.map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned()).unwrap_or_default())
    }
}

/// The address of instance `name`'s running pod, a ready one first.
fn address_of<'p>(pods: &'p [Pod], name: &str) -> Option<&'p str> {
    let running = pods.iter().filter(|pod| {
        let instance = pod.metadata.labels.as_ref().and_then(|l| l.get(INSTANCE_NAME_LABEL));
        let status = pod.status.as_ref();
        pod.metadata.deletion_timestamp.is_none()
            && instance.is_some_and(|i| i == name)
            && status.and_then(|s| s.phase.as_deref()) == Some("Running")
    });
    let ready = |pod: &&Pod| {
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
    };
    let pod = running.clone().find(ready).or_else(|| running.clone().next())?;
    pod.status.as_ref()?.pod_ip.as_deref()
}

/// Records each instance's timeline and each replica's lag behind the primary (`instances`
/// and `positions` in the same order).
fn record(instances: &mut [InstanceStatus], positions: &[Option<Position>]) {
    let primary = instances.iter().position(|i| i.role == Some(Role::Primary));
    let primary = primary.and_then(|index| positions.get(index)).and_then(Option::as_ref).cloned();
    let primary = primary.as_ref();
    for (instance, position) in instances.iter_mut().zip(positions) {
        instance.timeline = position.as_ref().map(|p| i64::from(p.timeline));
        if instance.role == Some(Role::Replica) {
            instance.lag_bytes = match (primary, position) {
                (Some(primary), Some(replica)) if primary.system_id == replica.system_id => {
                    Some(i64::try_from(primary.lsn.saturating_sub(replica.lsn)).unwrap_or(i64::MAX))
                }
                _ => None,
            };
        }
    }
}

/// When a Database of several instances is looked at again for its positions.
fn recheck(instances: &[InstanceStatus]) -> Option<Duration> {
    if instances.is_empty() {
        return None;
    }
    let behind = instances.iter().any(|i| i.role == Some(Role::Replica) && i.lag_bytes != Some(0));
    Some(if behind { BEHIND_RECHECK } else { CAUGHT_UP_RECHECK })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    use super::*;

    fn instance(name: &str, role: Role) -> InstanceStatus {
        InstanceStatus { name: name.into(), role: Some(role), ready: true, ..Default::default() }
    }

    fn at(system_id: &str, timeline: u32, lsn: u64) -> Option<Position> {
        Some(Position { system_id: system_id.into(), timeline, lsn })
    }

    #[test]
    fn a_replica_s_lag_is_the_primary_s_position_less_its_own_and_unknown_when_either_is_unknown() {
        let mut instances = [
            instance("orders", Role::Primary),
            instance("orders-instance-2", Role::Replica),
            instance("orders-instance-3", Role::Replica),
        ];
        record(&mut instances, &[at("7", 1, 0x300_0148), at("7", 1, 0x300_0100), None]);
        let seen: Vec<_> = instances.iter().map(|i| (i.timeline, i.lag_bytes)).collect();
        assert_eq!(seen, [(Some(1), None), (Some(1), Some(0x48)), (None, None)]);
        assert_eq!(recheck(&instances), Some(BEHIND_RECHECK));

        // A replica ahead of the primary's last answer (asked a moment later) has caught up.
        record(&mut instances, &[at("7", 2, 0x300_0148), at("7", 2, 0x300_0200), at("7", 2, 0x300_0148)]);
        assert_eq!(instances.iter().map(|i| i.lag_bytes).collect::<Vec<_>>(), [None, Some(0), Some(0)]);
        assert_eq!(instances[0].timeline, Some(2));
        assert_eq!(recheck(&instances), Some(CAUGHT_UP_RECHECK));

        // A server that was not copied from this primary is no replica of it; nor is a primary
        // that cannot be asked measured against.
        record(&mut instances, &[at("7", 2, 10), at("8", 1, 10), at("7", 2, 10)]);
        assert_eq!(instances[1].lag_bytes, None);
        record(&mut instances, &[None, at("7", 2, 10), at("7", 2, 10)]);
        assert_eq!(instances.iter().map(|i| i.lag_bytes).collect::<Vec<_>>(), [None, None, None]);
        assert_eq!(recheck(&[]), None);
    }

    fn pod(instance: &str, ip: &str, phase: &str, ready: bool) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.labels = Some([(INSTANCE_NAME_LABEL.to_string(), instance.to_string())].into());
        pod.status = Some(PodStatus {
            phase: Some(phase.into()),
            pod_ip: Some(ip.into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        pod
    }

    #[test]
    fn an_instance_is_asked_at_its_running_pod_a_ready_one_first() {
        let mut deleted = pod("orders", "10.0.0.9", "Running", true);
        deleted.metadata.deletion_timestamp = Some(crate::database::reconcile::now());
        let pods = [
            pod("orders", "10.0.0.1", "Running", false),
            deleted,
            pod("orders", "10.0.0.2", "Running", true),
            pod("orders-instance-2", "10.0.0.3", "Pending", false),
        ];
        assert_eq!(address_of(&pods, "orders"), Some("10.0.0.2"));
        assert_eq!(address_of(&pods[..2], "orders"), Some("10.0.0.1"));
        assert_eq!(address_of(&pods, "orders-instance-2"), None);
        assert_eq!(address_of(&pods, "orders-instance-3"), None);
    }
}
