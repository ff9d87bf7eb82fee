//! Secondary indices over the cache: index name -> indexed value -> set of keys.
//!
//! An index function maps an object to the values it is filed under (none, one or many). The
//! [`Indices`] kept here are only ever touched while the store's lock is held, so they always
//! agree with the items (see the [`store`](super::store) contract). As in client-go's
//! `thread_safe_store.go`, a value whose set of keys becomes empty is removed, so an index never
//! grows with values that no longer match anything.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use kube_core::Resource;

/// The name of the index every store has: an object's namespace (cluster-scoped objects are not
/// filed under it).
pub const NAMESPACE_INDEX: &str = "namespace";

/// The name the crate uses by convention for [`controller_uid_index`].
pub const CONTROLLER_UID_INDEX: &str = "controller-uid";

/// Maps an object to the values it is indexed under.
///
/// Index functions run while the store's write lock is held: keep them cheap and never call
/// back into the store from one (that would deadlock).
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Files an object under its namespace; cluster-scoped objects under nothing.
pub fn namespace_index<K: Resource>() -> IndexFunc<K> {
    Arc::new(|obj: &K| obj.meta().namespace.iter().filter(|ns| !ns.is_empty()).cloned().collect())
}

/// Files an object under the uid of its controller ownerReference (the one with
/// `controller: true`); objects without a controller under nothing.
///
/// ```
/// use operator_runtime::informer::{CONTROLLER_UID_INDEX, controller_uid_index};
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let index = controller_uid_index::<ConfigMap>();
/// assert!(index(&ConfigMap::default()).is_empty());
/// # let _ = CONTROLLER_UID_INDEX;
/// ```
pub fn controller_uid_index<K: Resource>() -> IndexFunc<K> {
    Arc::new(|obj: &K| {
        obj.meta()
            .owner_references
            .iter()
            .flatten()
            .filter(|owner| owner.controller == Some(true))
            .map(|owner| owner.uid.clone())
            .collect()
    })
}

/// The index functions and the indices they built. Callers hold the store's lock.
pub(crate) struct Indices<K> {
    funcs: HashMap<String, IndexFunc<K>>,
    values: HashMap<String, HashMap<String, HashSet<String>>>,
}

impl<K> fmt::Debug for Indices<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Indices").field("names", &self.funcs.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

impl<K> Indices<K> {
    /// Indices with only [`NAMESPACE_INDEX`].
    pub(crate) fn new() -> Self
    where
        K: Resource,
    {
        let mut indices = Indices { funcs: HashMap::new(), values: HashMap::new() };
        indices.funcs.insert(NAMESPACE_INDEX.to_string(), namespace_index());
        indices
    }

    /// Empty indices with the same functions, for building a replacement.
    pub(crate) fn empty_like(&self) -> Self {
        Indices { funcs: self.funcs.clone(), values: HashMap::new() }
    }

    /// Adds (or replaces) the index `name` and files every object of `items` under it.
    pub(crate) fn add_indexer(&mut self, name: &str, func: IndexFunc<K>, items: &HashMap<String, Arc<K>>) {
        let mut values: HashMap<String, HashSet<String>> = HashMap::new();
        for (key, obj) in items {
            for value in func(obj) {
                values.entry(value).or_default().insert(key.clone());
            }
        }
        self.funcs.insert(name.to_string(), func);
        if values.is_empty() {
            self.values.remove(name);
        } else {
            self.values.insert(name.to_string(), values);
        }
    }

    /// Moves `key` from the values `old` is filed under to the values `new` is filed under.
    pub(crate) fn update(&mut self, key: &str, old: Option<&K>, new: Option<&K>) {
        // Every function runs before anything changes: one that panics leaves every index as it
        // was (and the store, which changes its items after this, consistent).
        let mut changes = Vec::new();
        for (name, func) in &self.funcs {
            let old_values = old.map(|obj| func(obj)).unwrap_or_default();
            let new_values = new.map(|obj| func(obj)).unwrap_or_default();
            // Most updates (status, annotations) do not move the object: skip the map work.
            if old_values != new_values {
                changes.push((name.clone(), old_values, new_values));
            }
        }
        for (name, old_values, new_values) in changes {
            let index = self.values.entry(name.clone()).or_default();
            for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                if let Some(keys) = index.get_mut(value) {
                    keys.remove(key);
                    if keys.is_empty() {
                        index.remove(value);
                    }
                }
            }
            for value in new_values {
                index.entry(value).or_default().insert(key.to_string());
            }
            if index.is_empty() {
                self.values.remove(&name);
            }
        }
    }

    /// The keys filed under `value` in index `name`, if any.
    pub(crate) fn get(&self, name: &str, value: &str) -> Option<&HashSet<String>> {
        self.values.get(name)?.get(value)
    }

    /// Every value of index `name` (for tests and invariant checks).
    #[cfg(test)]
    pub(crate) fn values(&self, name: &str) -> Option<&HashMap<String, HashSet<String>>> {
        self.values.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::tests::fake::{cm, owned_by};
    use k8s_openapi::api::core::v1::ConfigMap;

    fn indices() -> Indices<ConfigMap> {
        let mut indices = Indices::new();
        indices.add_indexer(CONTROLLER_UID_INDEX, controller_uid_index(), &HashMap::new());
        indices
    }

    #[test]
    fn namespace_index_files_namespaced_objects_only() {
        let index = namespace_index::<ConfigMap>();
        assert_eq!(index(&cm("ns", "a", "1")), vec!["ns".to_string()]);
        assert!(index(&ConfigMap::default()).is_empty());
    }

    #[test]
    fn controller_uid_index_uses_only_the_controller_reference() {
        let index = controller_uid_index::<ConfigMap>();
        let obj = owned_by(cm("ns", "a", "1"), "uid-1", true);
        assert_eq!(index(&obj), vec!["uid-1".to_string()]);
        assert!(index(&owned_by(cm("ns", "a", "1"), "uid-2", false)).is_empty());
    }

    #[test]
    fn index_follows_add_update_and_remove() {
        let mut indices = indices();
        let a1 = owned_by(cm("ns", "a", "1"), "u1", true);
        indices.update("ns/a", None, Some(&a1));
        assert!(indices.get(CONTROLLER_UID_INDEX, "u1").unwrap().contains("ns/a"));

        let a2 = owned_by(cm("ns", "a", "2"), "u2", true);
        indices.update("ns/a", Some(&a1), Some(&a2));
        assert!(indices.get(CONTROLLER_UID_INDEX, "u1").is_none());
        assert!(indices.get(CONTROLLER_UID_INDEX, "u2").unwrap().contains("ns/a"));

        indices.update("ns/a", Some(&a2), None);
        assert!(indices.get(CONTROLLER_UID_INDEX, "u2").is_none());
        assert!(indices.get(NAMESPACE_INDEX, "ns").is_none());
    }

    #[test]
    fn empty_index_sets_are_deleted() {
        let mut indices = indices();
        let a = cm("ns", "a", "1");
        let b = cm("ns", "b", "1");
        indices.update("ns/a", None, Some(&a));
        indices.update("ns/b", None, Some(&b));
        indices.update("ns/a", Some(&a), None);
        assert_eq!(indices.get(NAMESPACE_INDEX, "ns").unwrap().len(), 1);
        indices.update("ns/b", Some(&b), None);
        assert!(indices.values(NAMESPACE_INDEX).is_none(), "no empty value sets and no empty index");
    }

    #[test]
    fn indexer_added_later_files_existing_objects() {
        let mut indices: Indices<ConfigMap> = Indices::new();
        let items = HashMap::from([("ns/a".to_string(), Arc::new(owned_by(cm("ns", "a", "1"), "u1", true)))]);
        indices.add_indexer(CONTROLLER_UID_INDEX, controller_uid_index(), &items);
        assert!(indices.get(CONTROLLER_UID_INDEX, "u1").unwrap().contains("ns/a"));
    }
}
