//! From informer events to keys on the queue, each at a priority.
//!
//! Every event of a watched informer maps to keys of primary objects (the object's own key, its
//! controller owner's, or what a mapping function returns). The priority says whether someone
//! is waiting for that key (see [`Priority`]):
//!
//! | event | priority |
//! | --- | --- |
//! | an add from the initial list (what existed before the controller started) | low |
//! | a resync (an update to the same resourceVersion) | low |
//! | with [`Builder::settled`](super::Builder::settled), for a key whose primary object is settled: an update of a watched object, or of the primary that leaves `metadata.generation` alone | low |
//! | anything else: a live add, a spec change, a delete | normal |
//!
//! So after a restart the whole fleet waits behind a Database a user creates meanwhile; and
//! when the controller changes every child at once (a new version rolling the fleet), the
//! children's status churn for Databases that are settled waits too, while a new Database's
//! own follow-ups (it is not settled until it is Ready) stay in front.

use std::sync::Arc;

use kube_core::Resource;

use super::ObjectKey;
use crate::informer::EventHandler;
use crate::workqueue::{Priority, RateLimitingQueue};

/// Maps an object of a watched type to the keys of the primary objects to reconcile.
pub(super) type Mapper<C> = Arc<dyn Fn(&C) -> Vec<String> + Send + Sync>;

/// Whether the primary object under a key is settled (see [`Builder::settled`](super::Builder::settled)).
pub(super) type Settled = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The keys of `owner`'s kind that `obj`'s controller ownerReference names.
pub(super) fn owner_keys<K, C>(obj: &C) -> Vec<String>
where
    K: Resource<DynamicType = ()>,
    C: Resource<DynamicType = ()>,
{
    let meta = obj.meta();
    let owner = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true));
    match owner {
        Some(r) if r.kind == K::kind(&()) && r.api_version == K::api_version(&()) => match &meta.namespace {
            Some(ns) => vec![format!("{ns}/{}", r.name)],
            None => vec![r.name.clone()],
        },
        _ => Vec::new(),
    }
}

/// The event handler that turns one informer's events into keys on the queue.
pub(super) struct Enqueue<C> {
    pub(super) queue: RateLimitingQueue<ObjectKey>,
    pub(super) map: Mapper<C>,
    /// The controller's name: the handler's name in metrics.
    pub(super) controller: String,
    /// Whether this is the primary informer (its own generation tells a spec change).
    pub(super) primary: bool,
    pub(super) settled: Option<Settled>,
}

impl<C> Enqueue<C> {
    fn add(&self, keys: Vec<String>, priority: impl Fn(&str) -> Priority) {
        for key in keys {
            let priority = priority(&key);
            self.queue.add_with_priority(ObjectKey::from(key), priority);
        }
    }

    fn settled(&self, key: &str) -> bool {
        self.settled.as_ref().is_some_and(|settled| settled(key))
    }
}

impl<C: Resource + Send + Sync + 'static> EventHandler<C> for Enqueue<C> {
    fn name(&self) -> String {
        self.controller.clone()
    }

    fn on_add(&self, obj: &Arc<C>, in_initial_list: bool) {
        let priority = if in_initial_list { Priority::Low } else { Priority::Normal };
        self.add((self.map)(obj), |_| priority);
    }

    fn on_update(&self, old: &Arc<C>, new: &Arc<C>) {
        // Both: when an owner reference moves, the old owner must notice it lost a child.
        let mut keys = (self.map)(new);
        for key in (self.map)(old) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let (old, new) = (old.meta(), new.meta());
        if old.resource_version.is_some() && old.resource_version == new.resource_version {
            return self.add(keys, |_| Priority::Low);
        }
        let spec_changed = self.primary && old.generation != new.generation;
        self.add(keys, |key| if !spec_changed && self.settled(key) { Priority::Low } else { Priority::Normal });
    }

    fn on_delete(&self, obj: &Arc<C>) {
        self.add((self.map)(obj), |_| Priority::Normal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube_core::ObjectMeta;

    use crate::informer::key_of;

    fn replica_set(owner_kind: &str, api_version: &str, controller: bool) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web-abc".into()),
                namespace: Some("prod".into()),
                owner_references: Some(vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: owner_kind.into(),
                    name: "web".into(),
                    uid: "u1".into(),
                    controller: Some(controller),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn owned_object_maps_to_its_controller_owner_key() {
        let keys = owner_keys::<Deployment, _>(&replica_set("Deployment", "apps/v1", true));
        assert_eq!(keys, vec!["prod/web".to_string()]);
    }

    #[test]
    fn non_controller_owner_reference_is_ignored() {
        assert!(owner_keys::<Deployment, _>(&replica_set("Deployment", "apps/v1", false)).is_empty());
    }

    #[test]
    fn owner_of_another_kind_or_group_is_ignored() {
        assert!(owner_keys::<Deployment, _>(&replica_set("StatefulSet", "apps/v1", true)).is_empty());
        assert!(owner_keys::<Deployment, _>(&replica_set("Deployment", "other.io/v1", true)).is_empty());
    }

    fn object(name: &str, rv: &str, generation: i64) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// A handler on a fresh queue, as the primary or a watched informer; `settled` names the
    /// keys whose primary is settled.
    fn handler(primary: bool, settled: &'static [&'static str]) -> Enqueue<ConfigMap> {
        Enqueue {
            queue: RateLimitingQueue::new("test"),
            map: Arc::new(|obj: &ConfigMap| vec![key_of(obj)]),
            controller: "test".into(),
            primary,
            settled: Some(Arc::new(move |key: &str| settled.contains(&key))),
        }
    }

    /// The keys in the order the queue hands them out (all of them wait, nothing is processing).
    async fn order(queue: &RateLimitingQueue<ObjectKey>) -> Vec<String> {
        let mut keys = Vec::new();
        while !queue.is_empty() {
            let key = queue.get().await.expect("a key waits");
            queue.done(&key);
            keys.push(key.to_string());
        }
        keys
    }

    #[tokio::test]
    async fn the_initial_list_and_resyncs_wait_behind_a_live_add() {
        let h = handler(true, &[]);
        h.on_add(&object("listed", "1", 1), true);
        h.on_update(&object("resynced", "2", 1), &object("resynced", "2", 1));
        h.on_add(&object("created", "3", 1), false);
        assert_eq!(order(&h.queue).await, ["ns/created", "ns/listed", "ns/resynced"]);
    }

    #[tokio::test]
    async fn a_settled_primarys_status_and_child_churn_waits_but_a_spec_change_does_not() {
        let primary = handler(true, &["ns/settled"]);
        primary.on_add(&object("listed", "1", 1), true);
        primary.on_update(&object("settled", "2", 1), &object("settled", "3", 1));
        primary.on_update(&object("unsettled", "4", 1), &object("unsettled", "5", 1));
        assert_eq!(order(&primary.queue).await, ["ns/unsettled", "ns/listed", "ns/settled"]);

        primary.on_add(&object("listed", "1", 1), true);
        primary.on_update(&object("settled", "6", 1), &object("settled", "7", 2));
        assert_eq!(order(&primary.queue).await, ["ns/settled", "ns/listed"], "a new generation is a user's change");

        let child = handler(false, &["ns/settled"]);
        child.on_add(&object("listed", "1", 1), true);
        // A child's generation moves when the controller rewrites it: still the controller's churn.
        child.on_update(&object("settled", "8", 1), &object("settled", "9", 2));
        child.on_delete(&object("deleted", "10", 1));
        assert_eq!(order(&child.queue).await, ["ns/deleted", "ns/listed", "ns/settled"]);
    }

    #[tokio::test]
    async fn without_a_settled_predicate_only_the_initial_list_and_resyncs_are_low() {
        let h = Enqueue { settled: None, ..handler(false, &[]) };
        h.on_add(&object("listed", "1", 1), true);
        h.on_update(&object("changed", "2", 1), &object("changed", "3", 1));
        assert_eq!(order(&h.queue).await, ["ns/changed", "ns/listed"]);
    }
}
