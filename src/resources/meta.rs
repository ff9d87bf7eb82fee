//! What every object the operator makes carries: its field manager and labels, and a
//! controller ownerReference to the resource it belongs to; and how a live object tells whose
//! it is.
//!
//! - The labels of a Database's children and pods: `app` (the selector: immutable in a
//!   Deployment, so it never changes) and the recommended `app.kubernetes.io` ones, with
//!   `managed-by=database-operator`, which the operator's caches select on ([`LABEL_SELECTOR`]).
//! - A controller ownerReference lets the garbage collector delete a child with its owner and
//!   tells any controller that the owner manages it; [`is_controlled_by`] is the only test of
//!   ownership the controllers use (a retained claim, which has no owner, has
//!   `claim::is_ours`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_core::{ObjectMeta, Resource};

use crate::api::Database;

/// The field manager of every write, and the `app.kubernetes.io/managed-by` label.
pub const MANAGER: &str = "database-operator";

/// The label selector of the children's caches: only what the operator made.
pub(crate) const LABEL_SELECTOR: &str = "app.kubernetes.io/managed-by=database-operator";

/// The label that names a backup child's DatabaseBackup.
pub(crate) const BACKUP_LABEL: &str = "example.com/backup";

/// The label of a scheduled backup, naming its Database.
pub(crate) const SCHEDULED_LABEL: &str = "example.com/scheduled-for";

/// The labels of a Database's children and their pods.
pub(crate) fn labels(db: &Database) -> BTreeMap<String, String> {
    let name = db.metadata.name.clone().unwrap_or_default();
    BTreeMap::from([
        ("app".to_string(), name.clone()),
        ("app.kubernetes.io/name".to_string(), "database".to_string()),
        ("app.kubernetes.io/instance".to_string(), name),
        ("app.kubernetes.io/component".to_string(), "database".to_string()),
        ("app.kubernetes.io/managed-by".to_string(), MANAGER.to_string()),
    ])
}

/// The selector of a Database's pods.
pub(crate) fn selector(db: &Database) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), db.metadata.name.clone().unwrap_or_default())])
}

/// The controller ownerReference to `owner`.
pub(crate) fn controller_reference<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The metadata of a child of `db` named `name`: its namespace, labels and owner.
pub(crate) fn child_of(db: &Database, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: db.metadata.namespace.clone(),
        labels: Some(labels(db)),
        owner_references: Some(vec![controller_reference(db)]),
        ..Default::default()
    }
}

/// Whether the object with metadata `live` is controlled by `owner` (its controller
/// ownerReference carries `owner`'s uid).
pub(crate) fn is_controlled_by<O: Resource>(live: &ObjectMeta, owner: &O) -> bool {
    let uid = owner.meta().uid.as_deref();
    live.owner_references.iter().flatten().any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == uid)
}
