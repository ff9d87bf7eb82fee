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
//! | with [`Builder::settled`](super::Builder::settled), for a key in the [`Background`]: an add, update or delete of a watched object, or an update of the primary that leaves `metadata.generation` alone | low |
//! | anything else: a live add of the primary, a spec change, a delete of the primary, a watched object's delete | normal |
//!
//! One event queues nothing: with [`Builder::own_statuses`](super::Builder::own_statuses), the
//! primary's update that is the watch showing the controller's own status write (the
//! resourceVersion that write produced, from the one it read, with the rest of the metadata
//! unchanged: generation, labels, annotations, finalizers, owners, deletion). The reconcile
//! that wrote the status already acted on everything else that version holds.
//!
//! A key is in the background when its primary object is settled, or when it came from the
//! initial list unsettled and no user has changed it since (a new generation or a delete takes
//! it out; settling takes it out of the list too, as it is then in the background anyway).
//! So after a restart the whole fleet waits behind a Database a user creates meanwhile, and so
//! do the follow-ups of the fleet's own reconciles (the children the controller created, their
//! status as they roll out): queued behind the rest of the list, several of them fold into one
//! reconcile, as in one FIFO, instead of each jumping ahead for a reconcile of its own. When the
//! controller changes every child at once (a new version rolling the fleet), the children's
//! churn for Databases that are settled waits too, while a new Database's own follow-ups (it is
//! not settled until it is Ready) stay in front.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use foldhash::fast::RandomState;
use kube_core::Resource;

use super::ObjectKey;
use crate::informer::EventHandler;
use crate::workqueue::{Priority, RateLimitingQueue};

/// Maps an object of a watched type to the keys of the primary objects to reconcile.
pub(super) type Mapper<C> = Arc<dyn Fn(&C) -> Vec<String> + Send + Sync>;

/// Whether the primary object under a key is settled (see [`Builder::settled`](super::Builder::settled)).
pub(super) type Settled = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Whether the update of the primary under a key from one resourceVersion to another is the
/// echo of the controller's own status write ([`crate::write::Statuses::echo`]).
pub(super) type Echo = Arc<dyn Fn(&str, Option<&str>, Option<&str>) -> bool + Send + Sync>;

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

/// The primary keys nobody is waiting for (the module's documentation says which), shared by
/// a controller's handlers.
///
/// ## Memory usage
///
/// A key listed unsettled is held until its object settles, changes or goes; a settled fleet
/// holds none.
pub(super) struct Background {
    settled: Settled,
    /// Hashed as the work queue hashes its keys (foldhash): this is looked up on every event.
    listed: Mutex<HashSet<Box<str>, RandomState>>,
}

impl Background {
    pub(super) fn new(settled: Settled) -> Self {
        Self { settled, listed: Mutex::default() }
    }

    /// A key of the initial list: in the background from now, until a user changes it.
    fn listed(&self, key: &str) {
        if !(self.settled)(key) {
            self.lock().insert(key.into());
        }
    }

    /// A user changed the primary (a new generation, a delete): someone waits for it now.
    fn changed(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Whether nobody waits for the key.
    fn contains(&self, key: &str) -> bool {
        if (self.settled)(key) {
            self.lock().remove(key);
            return true;
        }
        self.lock().contains(key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<Box<str>, RandomState>> {
        // The set is only inserted into and removed from: a panic elsewhere leaves it whole.
        self.listed.lock().unwrap_or_else(PoisonError::into_inner)
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
    pub(super) background: Option<Arc<Background>>,
    /// The primary's only: tells the echoes of the controller's own status writes.
    pub(super) echo: Option<Echo>,
}

impl<C> Enqueue<C> {
    fn add(&self, keys: Vec<String>, priority: impl Fn(&str) -> Priority) {
        for key in keys {
            let priority = priority(&key);
            self.queue.add_with_priority(ObjectKey::from(key), priority);
        }
    }

    /// Low for a key in the background, else normal.
    fn follow_up(&self, key: &str) -> Priority {
        match &self.background {
            Some(background) if background.contains(key) => Priority::Low,
            _ => Priority::Normal,
        }
    }
}

impl<C: Resource + Send + Sync + 'static> EventHandler<C> for Enqueue<C> {
    fn name(&self) -> String {
        self.controller.clone()
    }

    fn on_add(&self, obj: &Arc<C>, in_initial_list: bool) {
        let keys = (self.map)(obj);
        if in_initial_list {
            if let (true, Some(background)) = (self.primary, &self.background) {
                keys.iter().for_each(|key| background.listed(key));
            }
            return self.add(keys, |_| Priority::Low);
        }
        // A live add of the primary is a new object: a user's. A watched object's add (a child
        // the controller created) follows the work that created it.
        self.add(keys, |key| if self.primary { Priority::Normal } else { self.follow_up(key) });
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
        if let Some(echo) = &self.echo
            && all_but_status_unchanged(old, new)
            && keys.iter().all(|key| echo(key, old.resource_version.as_deref(), new.resource_version.as_deref()))
        {
            return;
        }
        let spec_changed = self.primary && old.generation != new.generation;
        self.add(keys, |key| {
            if !spec_changed {
                return self.follow_up(key);
            }
            if let Some(background) = &self.background {
                background.changed(key);
            }
            Priority::Normal
        });
    }

    fn on_delete(&self, obj: &Arc<C>) {
        let keys = (self.map)(obj);
        if let (true, Some(background)) = (self.primary, &self.background) {
            keys.iter().for_each(|key| background.changed(key));
        }
        self.add(keys, |_| Priority::Normal);
    }
}

/// Whether a status write could have made `new` from `old`: everything in the metadata but
/// the resourceVersion (and the managedFields, which the cache drops) is the same, and the
/// generation says the spec is too.
fn all_but_status_unchanged(old: &kube_core::ObjectMeta, new: &kube_core::ObjectMeta) -> bool {
    old.generation == new.generation
        && old.uid == new.uid
        && old.labels == new.labels
        && old.annotations == new.annotations
        && old.finalizers == new.finalizers
        && old.owner_references == new.owner_references
        && old.deletion_timestamp == new.deletion_timestamp
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
            background: Some(Arc::new(Background::new(Arc::new(move |key: &str| settled.contains(&key))))),
            echo: None,
        }
    }

    #[tokio::test]
    async fn the_echo_of_our_own_status_write_queues_nothing_and_any_other_change_does() {
        let statuses = crate::write::Statuses::default();
        let echoes = statuses.clone();
        let h = Enqueue {
            echo: Some(Arc::new(move |k: &str, o: Option<&str>, n: Option<&str>| echoes.echo(k, o, n)) as Echo),
            ..handler(true, &[])
        };
        statuses.wrote("ns/a", Some("1"), &"ready", Some("2"));
        h.on_update(&object("a", "1", 1), &object("a", "2", 1));
        assert!(h.queue.is_empty(), "the echo");
        assert!(statuses.is_empty(), "the cache caught up");

        // The same versions, but the spec changed too (a relist can skip the version between).
        statuses.wrote("ns/a", Some("2"), &"ready", Some("3"));
        h.on_update(&object("a", "2", 1), &object("a", "3", 2));
        assert_eq!(order(&h.queue).await, ["ns/a"]);

        // A label changed with the write's version.
        statuses.wrote("ns/a", Some("3"), &"ready", Some("4"));
        let mut labelled = ConfigMap::clone(&object("a", "4", 2));
        labelled.metadata.labels = Some([("team".to_string(), "x".to_string())].into());
        h.on_update(&object("a", "3", 2), &Arc::new(labelled));
        assert_eq!(order(&h.queue).await, ["ns/a"]);

        // Somebody else's write.
        h.on_update(&object("a", "4", 2), &object("a", "5", 2));
        assert_eq!(order(&h.queue).await, ["ns/a"]);
    }

    /// A controller's two handlers, the primary's and a watched informer's, on one queue and one
    /// background; `settled` holds the keys whose primary is settled, and may change.
    fn controller(settled: &Arc<Mutex<Vec<&'static str>>>) -> (Enqueue<ConfigMap>, Enqueue<ConfigMap>) {
        let settled = settled.clone();
        let settled: Settled = Arc::new(move |key: &str| settled.lock().unwrap().contains(&key));
        let primary = Enqueue { background: Some(Arc::new(Background::new(settled))), ..handler(true, &[]) };
        let child =
            Enqueue { queue: primary.queue.clone(), background: primary.background.clone(), ..handler(false, &[]) };
        (primary, child)
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
        let h = Enqueue { background: None, ..handler(false, &[]) };
        h.on_add(&object("listed", "1", 1), true);
        h.on_update(&object("changed", "2", 1), &object("changed", "3", 1));
        assert_eq!(order(&h.queue).await, ["ns/changed", "ns/listed"]);
    }

    #[tokio::test]
    async fn the_follow_ups_of_a_listed_key_wait_behind_a_users_change_until_a_user_changes_it() {
        let (primary, child) = controller(&Arc::default());
        primary.on_add(&object("listed", "1", 1), true);
        primary.on_add(&object("created", "2", 1), false);
        assert_eq!(order(&primary.queue).await, ["ns/created", "ns/listed"]);

        // The children both reconciles created, their status, the primaries' own status writes.
        child.on_add(&object("listed", "3", 1), false);
        child.on_add(&object("created", "4", 1), false);
        assert_eq!(order(&primary.queue).await, ["ns/created", "ns/listed"]);
        child.on_update(&object("listed", "3", 1), &object("listed", "5", 2));
        primary.on_update(&object("listed", "1", 1), &object("listed", "6", 1));
        primary.on_update(&object("created", "2", 1), &object("created", "7", 1));
        assert_eq!(order(&primary.queue).await, ["ns/created", "ns/listed"]);

        // A user's new spec takes the listed key out of the background, its follow-ups with it.
        primary.on_add(&object("other", "8", 1), true);
        primary.on_update(&object("listed", "6", 1), &object("listed", "9", 2));
        assert_eq!(order(&primary.queue).await, ["ns/listed", "ns/other"]);
        child.on_update(&object("listed", "5", 2), &object("listed", "10", 3));
        primary.on_add(&object("other", "8", 1), true);
        assert_eq!(order(&primary.queue).await, ["ns/listed", "ns/other"]);

        // So does a delete: a Database created again under the name is a user's.
        primary.on_delete(&object("other", "8", 1));
        primary.on_add(&object("other", "11", 1), false);
        child.on_add(&object("other", "12", 1), false);
        primary.on_add(&object("last", "13", 1), true);
        assert_eq!(order(&primary.queue).await, ["ns/other", "ns/last"]);
    }

    #[tokio::test]
    async fn a_listed_key_leaves_the_background_list_once_its_primary_settles() {
        let settled = Arc::new(Mutex::new(vec!["ns/converged"]));
        let (primary, child) = controller(&settled);
        primary.on_add(&object("converged", "1", 1), true);
        primary.on_add(&object("listed", "2", 1), true);
        let listed = || primary.background.as_ref().unwrap().lock().len();
        assert_eq!(listed(), 1, "a settled primary is in the background without being listed");

        settled.lock().unwrap().push("ns/listed");
        child.on_update(&object("listed", "3", 1), &object("listed", "4", 1));
        assert_eq!(listed(), 0);
        assert_eq!(order(&primary.queue).await, ["ns/converged", "ns/listed"]);
    }
}
