//! What the informer does to an object before caching it.
//!
//! Every object from a list or a watch goes through the informer's transform once, before it is
//! cached and before any handler sees it. The default, [`strip_managed_fields`], drops
//! `metadata.managedFields`: server-side apply bookkeeping that no controller reads and that is
//! often the larger half of a small object's memory.

use std::sync::Arc;

use kube_core::Resource;

/// Turns an object from the apiserver into the object to cache.
///
/// It runs on the informer's task for every event: keep it cheap. The resourceVersion must be
/// kept (the cache compares it on relist).
pub type TransformFunc<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Drops `metadata.managedFields`; the informer's default transform.
pub fn strip_managed_fields<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

/// Drops `metadata.managedFields` and `metadata.annotations`: for a kind whose annotations no
/// controller reads, and whose users may write up to the apiserver's 256 KiB of them
/// (`kubectl.kubernetes.io/last-applied-configuration` alone repeats the whole object), so
/// that what one user writes there does not grow the shared cache.
pub fn strip_annotations_and_managed_fields<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj.meta_mut().annotations = None;
    obj
}

/// The default transform as a [`TransformFunc`].
pub(crate) fn default_transform<K: Resource + 'static>() -> TransformFunc<K> {
    Arc::new(strip_managed_fields::<K>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::tests::fake::cm;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn default_transform_strips_managed_fields_and_keeps_the_rest() {
        let mut obj = cm("ns", "a", "7");
        obj.metadata.managed_fields =
            Some(vec![ManagedFieldsEntry { manager: Some("kubectl".into()), ..Default::default() }]);
        let stripped = default_transform()(obj);
        assert!(stripped.metadata.managed_fields.is_none());
        assert_eq!(stripped.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(stripped.metadata.name.as_deref(), Some("a"));
    }

    #[test]
    fn the_annotations_go_too_where_asked() {
        let mut obj = cm("ns", "a", "7");
        obj.metadata.annotations = Some([("big".to_string(), "x".repeat(1 << 16))].into());
        obj.metadata.labels = Some([("app".to_string(), "a".to_string())].into());
        let stripped = strip_annotations_and_managed_fields(obj);
        assert!(stripped.metadata.annotations.is_none());
        assert!(stripped.metadata.labels.is_some(), "labels stay: selectors and indices read them");
        assert_eq!(stripped.metadata.resource_version.as_deref(), Some("7"));
    }
}
