//! The cache: objects by key, plus their indices, under one lock.
//!
//! # Consistency
//!
//! Items and indices live together behind one `RwLock`, as in client-go's
//! `thread_safe_store.go`. Every query ([`Store::get`], [`Store::list`], [`Store::by_index`],
//! [`Store::len`]) takes the read lock once, so its answer is one snapshot: a `by_index` never
//! returns a key whose object was already removed, and a `list` taken during a relist is either
//! all old or all new contents. Two *separate* queries may of course see different snapshots.
//! Objects are shared as `Arc<K>`: treat them as read-only (clone before changing one).
//!
//! Only the informer writes a store; everyone else gets a read-only handle through
//! [`Store::clone`], which is cheap (one `Arc`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube_core::Resource;

use super::index::{IndexFunc, Indices};

/// The cache key of an object: `"namespace/name"`, or `"name"` for a cluster-scoped object.
///
/// ```
/// use operator_runtime::informer::key_of;
/// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
/// use kube_core::ObjectMeta;
///
/// let cm = ConfigMap { metadata: ObjectMeta { namespace: Some("ns".into()), name: Some("a".into()), ..Default::default() }, ..Default::default() };
/// assert_eq!(key_of(&cm), "ns/a");
/// let ns = Namespace { metadata: ObjectMeta { name: Some("ns".into()), ..Default::default() }, ..Default::default() };
/// assert_eq!(key_of(&ns), "ns");
/// ```
pub fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

/// One change the store made, in the order it made them; the informer turns them into handler
/// calls.
#[derive(Debug)]
pub(crate) enum Delta<K> {
    /// A key that was not cached now is.
    Added(Arc<K>),
    /// A cached object was replaced by a different one.
    Updated(Arc<K>, Arc<K>),
    /// A cached object is gone.
    Deleted(Arc<K>),
}

/// A thread-safe, indexed, read-mostly cache of `K`, shared by clone.
///
/// Each query is one consistent snapshot: items and indices share one lock (see the
/// [informer contract](super#contract)).
pub struct Store<K> {
    state: Arc<RwLock<State<K>>>,
}

struct State<K> {
    items: HashMap<String, Arc<K>>,
    indices: Indices<K>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store { state: self.state.clone() }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("len", &self.len()).finish_non_exhaustive()
    }
}

impl<K: Resource> Default for Store<K> {
    fn default() -> Self {
        Store { state: Arc::new(RwLock::new(State { items: HashMap::new(), indices: Indices::new() })) }
    }
}

impl<K: Resource> Store<K> {
    /// An empty store with the [namespace index](super::NAMESPACE_INDEX).
    pub fn new() -> Self {
        Self::default()
    }

    /// A store holding `objects`, e.g. for testing code that reads a store without an informer.
    pub fn from_objects(objects: impl IntoIterator<Item = K>) -> Self {
        let store = Self::new();
        store.replace(objects.into_iter().map(Arc::new).collect());
        store
    }

    /// This store with index `name` added, as an informer's indexer adds it (e.g. for a
    /// store made by [`from_objects`](Self::from_objects)).
    pub fn with_index(self, name: &str, func: IndexFunc<K>) -> Self {
        self.add_indexer(name, func);
        self
    }
}

impl<K> Store<K> {
    fn read(&self) -> RwLockReadGuard<'_, State<K>> {
        // A panicking index function poisons the lock between two consistent states (updates are
        // applied after the functions ran), so the data is still good to read.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State<K>> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The object cached under `key` (see [`key_of`]).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().items.get(key).cloned()
    }

    /// Every cached object, in no particular order, from one snapshot.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().items.values().cloned().collect()
    }

    /// Every cached key, in no particular order, from one snapshot.
    pub fn keys(&self) -> Vec<String> {
        self.read().items.keys().cloned().collect()
    }

    /// The objects index `index` files under `value`, from one snapshot; empty when nothing
    /// matches or no index of that name was added.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let state = self.read();
        let Some(keys) = state.indices.get(index, value) else {
            return Vec::new();
        };
        keys.iter().filter_map(|key| state.items.get(key).cloned()).collect()
    }

    /// The number of cached objects.
    pub fn len(&self) -> usize {
        self.read().items.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.read().items.is_empty()
    }

    /// Adds (or replaces) index `name` and files every cached object under it.
    pub(crate) fn add_indexer(&self, name: &str, func: IndexFunc<K>) {
        let state = &mut *self.write();
        state.indices.add_indexer(name, func, &state.items);
    }
}

impl<K: Resource> Store<K> {
    /// Caches `obj` under its key.
    pub(crate) fn upsert(&self, obj: Arc<K>) -> Delta<K> {
        let key = key_of(obj.as_ref());
        let state = &mut *self.write();
        let old = state.items.get(&key).cloned();
        state.indices.update(&key, old.as_deref(), Some(&obj));
        state.items.insert(key, obj.clone());
        match old {
            Some(old) => Delta::Updated(old, obj),
            None => Delta::Added(obj),
        }
    }

    /// Drops the object cached under `obj`'s key; returns what was cached.
    pub(crate) fn remove(&self, obj: &K) -> Option<Arc<K>> {
        self.remove_key(&key_of(obj))
    }

    /// Drops the object cached under `key`; returns what was cached.
    pub(crate) fn remove_key(&self, key: &str) -> Option<Arc<K>> {
        let state = &mut *self.write();
        let old = state.items.remove(key)?;
        state.indices.update(key, Some(&old), None);
        Some(old)
    }

    /// Replaces the whole contents with `objects` in one step (readers see all old or all new)
    /// and returns the difference: an update for each object whose resourceVersion changed, an
    /// add for each new key, in `objects`' order; then a delete for each key that vanished,
    /// sorted by key. Objects with the same resourceVersion produce no delta.
    pub(crate) fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Delta<K>> {
        self.replace_in(None, objects)
    }

    /// [`replace`](Self::replace) within `namespace` only: the objects of other namespaces stay
    /// as they are, and only those of `namespace` may vanish. `None` replaces everything.
    pub(crate) fn replace_in(&self, namespace: Option<&str>, objects: Vec<Arc<K>>) -> Vec<Delta<K>> {
        let in_scope = |obj: &K| namespace.is_none_or(|ns| obj.meta().namespace.as_deref() == Some(ns));
        let mut items = HashMap::with_capacity(objects.len());
        let mut deltas = Vec::new();
        let state = &mut *self.write();
        let mut indices = state.indices.empty_like();
        for (key, obj) in state.items.iter().filter(|(_, obj)| !in_scope(obj)) {
            indices.update(key, None, Some(obj));
            items.insert(key.clone(), obj.clone());
        }
        for obj in objects {
            let key = key_of(obj.as_ref());
            // The apiserver never lists a key twice; should a fake do it, the last one wins.
            indices.update(&key, items.get(&key).map(|previous: &Arc<K>| previous.as_ref()), Some(&obj));
            match state.items.get(&key) {
                None => deltas.push(Delta::Added(obj.clone())),
                Some(old) if !same_version(old.as_ref(), obj.as_ref()) => {
                    deltas.push(Delta::Updated(old.clone(), obj.clone()))
                }
                Some(_) => {}
            }
            items.insert(key, obj);
        }
        let mut vanished: Vec<_> =
            state.items.iter().filter(|(key, obj)| in_scope(obj) && !items.contains_key(*key)).collect();
        vanished.sort_by(|a, b| a.0.cmp(b.0));
        deltas.extend(vanished.into_iter().map(|(_, obj)| Delta::Deleted(obj.clone())));
        state.items = items;
        state.indices = indices;
        deltas
    }
}

fn same_version<K: Resource>(a: &K, b: &K) -> bool {
    matches!((&a.meta().resource_version, &b.meta().resource_version), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::tests::fake::{cm, owned_by};
    use crate::informer::{CONTROLLER_UID_INDEX, NAMESPACE_INDEX, controller_uid_index};
    use k8s_openapi::api::core::v1::ConfigMap;
    use proptest::prelude::*;

    fn names(mut objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
        let mut keys: Vec<String> = objs.drain(..).map(|o| key_of(o.as_ref())).collect();
        keys.sort();
        keys
    }

    #[test]
    fn an_index_function_that_panics_leaves_items_and_every_index_as_they_were() {
        let store = Store::new();
        store.add_indexer("by-namespace", Arc::new(|cm: &ConfigMap| vec![cm.metadata.namespace.clone().unwrap()]));
        store.add_indexer(
            "fussy",
            Arc::new(|cm: &ConfigMap| {
                assert_ne!(cm.metadata.name.as_deref(), Some("bad"), "an index function bug");
                vec![]
            }),
        );
        store.upsert(Arc::new(cm("ns", "a", "1")));
        let panicked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.upsert(Arc::new(cm("ns", "bad", "2")))));
        assert!(panicked.is_err());
        // The lock is poisoned, and what it guards is still one consistent state.
        assert_eq!(store.keys(), ["ns/a"]);
        assert_eq!(names(store.by_index("by-namespace", "ns")), ["ns/a"]);
    }

    fn describe(deltas: &[Delta<ConfigMap>]) -> Vec<String> {
        let rv = |o: &Arc<ConfigMap>| o.metadata.resource_version.clone().unwrap_or_default();
        deltas
            .iter()
            .map(|d| match d {
                Delta::Added(o) => format!("add {}@{}", key_of(o.as_ref()), rv(o)),
                Delta::Updated(a, b) => {
                    format!("update {}@{}->{}", key_of(b.as_ref()), rv(a), rv(b))
                }
                Delta::Deleted(o) => format!("delete {}@{}", key_of(o.as_ref()), rv(o)),
            })
            .collect()
    }

    #[test]
    fn upsert_adds_then_updates_and_remove_returns_the_cached_object() {
        let store = Store::new();
        assert!(matches!(store.upsert(Arc::new(cm("ns", "a", "1"))), Delta::Added(_)));
        assert!(matches!(store.upsert(Arc::new(cm("ns", "a", "2"))), Delta::Updated(..)));
        assert_eq!(store.len(), 1);
        let removed = store.remove(&cm("ns", "a", "3")).unwrap();
        assert_eq!(removed.metadata.resource_version.as_deref(), Some("2"));
        assert!(store.is_empty());
        assert!(store.remove(&cm("ns", "a", "3")).is_none());
    }

    #[test]
    fn a_replace_within_a_namespace_leaves_the_others_and_their_indices_alone() {
        let store = Store::new();
        store.replace(vec![
            Arc::new(cm("a", "one", "1")),
            Arc::new(cm("a", "two", "1")),
            Arc::new(cm("b", "one", "1")),
        ]);
        let deltas = store.replace_in(Some("a"), vec![Arc::new(cm("a", "one", "2")), Arc::new(cm("a", "three", "1"))]);
        let told: Vec<String> = deltas
            .iter()
            .map(|d| match d {
                Delta::Added(o) => format!("added {}", key_of(o.as_ref())),
                Delta::Updated(_, o) => format!("updated {}", key_of(o.as_ref())),
                Delta::Deleted(o) => format!("deleted {}", key_of(o.as_ref())),
            })
            .collect();
        assert_eq!(told, ["updated a/one", "added a/three", "deleted a/two"]);
        assert_eq!(names(store.list()), ["a/one", "a/three", "b/one"]);
        assert_eq!(names(store.by_index(NAMESPACE_INDEX, "b")), ["b/one"]);
        assert_eq!(names(store.by_index(NAMESPACE_INDEX, "a")), ["a/one", "a/three"]);
        // An empty list of b empties b alone.
        let deltas = store.replace_in(Some("b"), Vec::new());
        assert_eq!(deltas.len(), 1);
        assert_eq!(names(store.list()), ["a/one", "a/three"]);
        assert!(store.by_index(NAMESPACE_INDEX, "b").is_empty());
    }

    #[test]
    fn replace_reports_updated_added_then_vanished_objects() {
        let store = Store::from_objects([cm("ns", "same", "1"), cm("ns", "changed", "1"), cm("ns", "gone", "1")]);
        let deltas = store.replace(vec![
            Arc::new(cm("ns", "changed", "2")),
            Arc::new(cm("ns", "same", "1")),
            Arc::new(cm("ns", "new", "3")),
        ]);
        assert_eq!(describe(&deltas), ["update ns/changed@1->2", "add ns/new@3", "delete ns/gone@1"]);
        assert_eq!(names(store.list()), ["ns/changed", "ns/new", "ns/same"]);
        assert_eq!(store.by_index(NAMESPACE_INDEX, "ns").len(), 3);
    }

    #[test]
    fn by_index_answers_from_the_same_snapshot_as_the_items() {
        let store = Store::new();
        store.add_indexer(CONTROLLER_UID_INDEX, controller_uid_index());
        store.upsert(Arc::new(owned_by(cm("ns", "a", "1"), "u1", true)));
        store.upsert(Arc::new(owned_by(cm("other", "b", "1"), "u1", true)));
        assert_eq!(names(store.by_index(CONTROLLER_UID_INDEX, "u1")), ["ns/a", "other/b"]);
        assert_eq!(names(store.by_index(NAMESPACE_INDEX, "other")), ["other/b"]);
        store.remove(&cm("ns", "a", "2"));
        assert_eq!(names(store.by_index(CONTROLLER_UID_INDEX, "u1")), ["other/b"]);
    }

    #[test]
    fn by_index_on_an_unknown_index_or_value_is_empty() {
        let store = Store::from_objects([cm("ns", "a", "1")]);
        assert!(store.by_index("no-such-index", "ns").is_empty());
        assert!(store.by_index(NAMESPACE_INDEX, "no-such-namespace").is_empty());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Upsert { name: u8, namespace: u8, owner: Option<u8> },
        Remove { name: u8, namespace: u8 },
        Replace(Vec<(u8, u8, Option<u8>)>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let obj = (0u8..6, 0u8..3, proptest::option::of(0u8..3));
        prop_oneof![
            4 => obj.clone().prop_map(|(name, namespace, owner)| Op::Upsert { name, namespace, owner }),
            2 => (0u8..6, 0u8..3).prop_map(|(name, namespace)| Op::Remove { name, namespace }),
            1 => proptest::collection::vec(obj, 0..6).prop_map(Op::Replace),
        ]
    }

    fn make(name: u8, namespace: u8, owner: Option<u8>, rv: usize) -> ConfigMap {
        let obj = cm(&format!("ns{namespace}"), &format!("n{name}"), &rv.to_string());
        match owner {
            Some(owner) => owned_by(obj, &format!("u{owner}"), true),
            None => obj,
        }
    }

    proptest! {
        #[test]
        fn indices_always_equal_a_rebuild_from_the_items(ops in proptest::collection::vec(op(), 0..40)) {
            let store = Store::new();
            store.add_indexer(CONTROLLER_UID_INDEX, controller_uid_index());
            for (rv, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Upsert { name, namespace, owner } => { store.upsert(Arc::new(make(name, namespace, owner, rv))); }
                    Op::Remove { name, namespace } => { store.remove(&make(name, namespace, None, rv)); }
                    Op::Replace(objs) => {
                        store.replace(objs.into_iter().map(|(n, ns, o)| Arc::new(make(n, ns, o, rv))).collect());
                    }
                }
            }
            let state = store.read();
            let mut rebuilt: Indices<ConfigMap> = Indices::new();
            rebuilt.add_indexer(CONTROLLER_UID_INDEX, controller_uid_index(), &state.items);
            rebuilt.add_indexer(NAMESPACE_INDEX, crate::informer::index::namespace_index(), &state.items);
            for name in [NAMESPACE_INDEX, CONTROLLER_UID_INDEX] {
                prop_assert_eq!(state.indices.values(name), rebuilt.values(name));
                for keys in state.indices.values(name).into_iter().flat_map(|v| v.values()) {
                    prop_assert!(!keys.is_empty(), "empty sets are deleted");
                }
            }
        }
    }
}
