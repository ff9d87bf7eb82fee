//! What every object the operator makes carries: its field manager and labels, and a
//! controller ownerReference to the resource it belongs to; and how a live object tells whose
//! it is.
//!
//! - The labels of a Database's children and pods: `app` (the Deployment's selector: immutable
//!   in a Deployment, so it never changes) and the recommended `app.kubernetes.io` ones, with
//!   `managed-by=database-operator`, which the operator's caches select on ([`LABEL_SELECTOR`]).
//!   The Service selects the pods, and a retained child is recognised, by `instance` and
//!   `managed-by` ([`instance_selector`]), never by a bare `app`.
//! - A controller ownerReference lets the garbage collector delete a child with its owner and
//!   tells any controller that the owner manages it; [`is_controlled_by`] is the only test of
//!   ownership the controllers use, but for the children a Database leaves behind when
//!   retained (its claim and generated Secret, owned by nobody): [`is_ours`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_core::{ObjectMeta, Resource};

use crate::api::Database;

/// The field manager of every write, and the `app.kubernetes.io/managed-by` label.
pub const MANAGER: &str = "database-operator";

/// The label that says who manages an object.
pub(crate) const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The label that names the Database an object belongs to.
pub(crate) const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

/// The label selector of the children's caches: only what the operator made.
pub(crate) const LABEL_SELECTOR: &str = "app.kubernetes.io/managed-by=database-operator";

/// The label that names a backup child's DatabaseBackup.
pub(crate) const BACKUP_LABEL: &str = "example.com/backup";

/// The label of a scheduled backup, naming its Database.
pub(crate) const SCHEDULED_LABEL: &str = "example.com/scheduled-for";

/// The label of a scheduled backup and of a data claim, holding its Database's uid: a Database
/// deleted and made again under the same name is another Database, which never rotates the
/// first one's backups, and whose restore never loads into the first one's retained data.
pub(crate) const DATABASE_UID_LABEL: &str = "example.com/database-uid";

/// The longest name of an object that a Job, a Service or a label value holds: a DNS label.
pub(crate) const MAX_NAME: usize = 63;

/// `<base>-<suffix>`, within [`MAX_NAME`] characters: a base too long for it is cut and
/// followed by eight hex digits of its digest, so that two long bases that share a start still
/// make two names, and one base always makes the same name.
pub(crate) fn derived_name(base: &str, suffix: &str) -> String {
    let name = format!("{base}-{suffix}");
    if name.len() <= MAX_NAME {
        return name;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, base.as_bytes());
    let hex: String = digest.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
    let room = MAX_NAME.saturating_sub(suffix.len() + hex.len() + 2);
    // Names are ASCII (DNS subdomains); a cut never ends on the dash that joins the parts.
    let cut = base[..room.min(base.len())].trim_end_matches(['-', '.']);
    format!("{cut}-{hex}-{suffix}")
}

/// The labels of a Database's children and their pods.
pub(crate) fn labels(db: &Database) -> BTreeMap<String, String> {
    let name = db.metadata.name.clone().unwrap_or_default();
    BTreeMap::from([
        ("app".to_string(), name.clone()),
        ("app.kubernetes.io/name".to_string(), "database".to_string()),
        (INSTANCE_LABEL.to_string(), name),
        ("app.kubernetes.io/component".to_string(), "database".to_string()),
        (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
    ])
}

/// The Deployment's selector of its pods: `app=<name>`, as the first version set it (a
/// Deployment's selector cannot change). Its ReplicaSets add their own `pod-template-hash`, so
/// they adopt no pod another controller made with the same `app`.
pub(crate) fn selector(db: &Database) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), db.metadata.name.clone().unwrap_or_default())])
}

/// What tells a Database's pods from any other pod: its instance and the operator's
/// managed-by label. The Service selects with it (a pod that merely carries `app=<name>`,
/// another team's say, gets no database traffic), and so does the reconcile's look at pods.
pub(crate) fn instance_selector(db: &Database) -> BTreeMap<String, String> {
    BTreeMap::from([
        (INSTANCE_LABEL.to_string(), db.metadata.name.clone().unwrap_or_default()),
        (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
    ])
}

/// The label of the pods of an instance of a Database of several that says its role:
/// `primary` or `replica`.
pub(crate) const ROLE_LABEL: &str = "example.com/role";

/// The selector of the pods of `db`'s instances of `role` (a Database of several instances).
pub(crate) fn role_selector(db: &Database, role: crate::api::Role) -> BTreeMap<String, String> {
    let mut selector = instance_selector(db);
    selector.insert(ROLE_LABEL.into(), role.label().into());
    selector
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

/// Whether the object with metadata `live` is `db`'s: controlled by it, or (retained: the claim
/// and the generated Secret of `reclaimPolicy: Retain`) owned by nobody and labelled as a child
/// of a Database of this name by the operator ([`instance_selector`]'s labels; a bare
/// `app=<name>`, which anyone may set by accident, is not enough). An object another controller
/// owns is foreign.
pub(crate) fn is_ours(live: &ObjectMeta, db: &Database) -> bool {
    let controlled_by_other = live
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && Some(&r.uid) != db.metadata.uid.as_ref());
    let labels = live.labels.as_ref();
    let labelled = instance_selector(db).iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    !controlled_by_other && labelled
}

/// Whether the object with metadata `live` is controlled by `owner` (its controller
/// ownerReference carries `owner`'s uid).
pub(crate) fn is_controlled_by<O: Resource>(live: &ObjectMeta, owner: &O) -> bool {
    let uid = owner.meta().uid.as_deref();
    live.owner_references.iter().flatten().any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_name_is_the_plain_join_when_it_fits_and_cut_with_a_digest_when_not() {
        assert_eq!(derived_name("orders", "20261203120000"), "orders-20261203120000");
        let long = "a".repeat(60);
        let name = derived_name(&long, "20261203120000");
        assert_eq!(name.len(), MAX_NAME, "{name}");
        assert!(name.ends_with("-20261203120000") && name.starts_with("aaaa"), "{name}");
        assert_eq!(name, derived_name(&long, "20261203120000"), "stable");
        let other = format!("{}b", "a".repeat(59));
        assert_ne!(derived_name(&other, "20261203120000"), name, "a shared start makes two names");
        let dashed = format!("{}-{}", "a".repeat(40), "b".repeat(40));
        assert!(!derived_name(&dashed, "pre-upgrade-0123456789").contains("--"));
    }

    #[test]
    fn an_object_owned_by_nobody_is_ours_by_the_operators_labels_never_by_a_bare_app() {
        let mut db = Database::new("orders", crate::api::DatabaseSpec::new(crate::api::Size::Small, "postgres:17"));
        db.metadata.uid = Some("uid-1".into());
        let with = |labels: &[(&str, &str)]| ObjectMeta {
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        };
        assert!(!is_ours(&with(&[("app", "orders")]), &db), "anyone may label a claim app=orders");
        assert!(!is_ours(&with(&[("app", "orders"), (INSTANCE_LABEL, "orders")]), &db));
        assert!(is_ours(&with(&[(INSTANCE_LABEL, "orders"), (MANAGED_BY_LABEL, MANAGER)]), &db));
        assert!(!is_ours(&with(&[(INSTANCE_LABEL, "payments"), (MANAGED_BY_LABEL, MANAGER)]), &db));
        let mut owned = with(&[(INSTANCE_LABEL, "orders"), (MANAGED_BY_LABEL, MANAGER)]);
        owned.owner_references =
            Some(vec![OwnerReference { controller: Some(true), uid: "uid-2".into(), ..Default::default() }]);
        assert!(!is_ours(&owned, &db), "another controller's");
        // The Service selects the same labels; the Deployment keeps its first selector.
        assert_eq!(
            instance_selector(&db),
            BTreeMap::from([
                (INSTANCE_LABEL.to_string(), "orders".to_string()),
                (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
            ])
        );
        assert!(instance_selector(&db).iter().all(|(k, v)| labels(&db).get(k) == Some(v)), "the pods carry them");
    }
}
