//! The data volume of a Database with an engine: a PersistentVolumeClaim `<name>-data`.
//!
//! - Its size is `spec.storage.size`, else a default of the size class (small 1Gi, medium
//!   10Gi, large 100Gi). It only grows: the CRD refuses a smaller `spec.storage.size`, and a
//!   smaller default (the size class went down) leaves the claim as large as it is. Growing it
//!   is a request the storage class must allow (`allowVolumeExpansion`); the claim then says
//!   whether the storage system followed.
//! - `spec.storage.reclaimPolicy`: `Delete` (the default) makes the Database the claim's
//!   controller owner, so the garbage collector deletes it with the Database; `Retain` leaves
//!   the claim without an owner, carrying the Database's labels: it outlives the Database,
//!   and a new Database of the same name takes it back.
//! - It is labelled with the uid of the Database it serves ([`DATABASE_UID_LABEL`]), so that a
//!   claim which was there before its Database (a retained one, with an earlier Database's
//!   data) is told from a new, empty one: a restore never loads into it ([`predates`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::meta::{self, DATABASE_UID_LABEL, child_of};
use super::view::PersistentVolumeClaimView;
use crate::api::{Database, ReclaimPolicy, Size, Storage};

/// The volume's size when `spec.storage.size` is not set.
pub(crate) fn default_size(size: Size) -> &'static str {
    match size {
        Size::Small => "1Gi",
        Size::Medium => "10Gi",
        Size::Large => "100Gi",
    }
}

/// The claim's name: `<name>-data`.
pub(crate) fn claim_name(db: &Database) -> String {
    format!("{}-data", db.metadata.name.as_deref().unwrap_or_default())
}

fn storage(db: &Database) -> Storage {
    db.spec.storage.as_deref().cloned().unwrap_or_default()
}

/// The claim `db` wants, given the live one (if any): never smaller than it is.
pub(crate) fn claim(db: &Database, live: Option<&PersistentVolumeClaimView>) -> PersistentVolumeClaim {
    claim_named(db, claim_name(db), live)
}

/// The claim `name` of `db` (its own, or a replica's), as [`claim`] makes `db`'s.
pub(crate) fn claim_named(
    db: &Database,
    name: String,
    live: Option<&PersistentVolumeClaimView>,
) -> PersistentVolumeClaim {
    let storage = storage(db);
    let wanted = storage.size.clone().unwrap_or_else(|| default_size(db.spec.size).to_string());
    let current = live.and_then(PersistentVolumeClaimView::requested_storage);
    let size = match current {
        Some(current) if compare_quantities(current, &wanted).is_some_and(|o| o.is_gt()) => current.to_string(),
        _ => wanted,
    };
    let mut metadata = child_of(db, name);
    if let Some(uid) = &db.metadata.uid {
        metadata.labels.get_or_insert_with(Default::default).insert(DATABASE_UID_LABEL.into(), uid.clone());
    }
    // Retained: no owner, so the garbage collector leaves it when the Database goes.
    if retained(db) {
        metadata.owner_references = Some(Vec::new());
    }
    PersistentVolumeClaim { metadata, spec: Some(claim_spec(size, storage.storage_class_name)), status: None }
}

/// A ReadWriteOnce claim of `size` in `class` (the cluster's default class when `None`): a
/// Database's data, or a backup's.
pub(crate) fn claim_spec(size: String, class: Option<String>) -> PersistentVolumeClaimSpec {
    PersistentVolumeClaimSpec {
        access_modes: Some(vec!["ReadWriteOnce".into()]),
        resources: Some(VolumeResourceRequirements {
            requests: Some(BTreeMap::from([("storage".to_string(), Quantity(size))])),
            ..Default::default()
        }),
        storage_class_name: class,
        ..Default::default()
    }
}

/// Whether `claim` is `db`'s ([`meta::is_ours`]).
pub(crate) fn is_ours(claim: &PersistentVolumeClaimView, db: &Database) -> bool {
    meta::is_ours(&claim.metadata, db)
}

/// Whether `claim` was there before `db` took it: not labelled with `db`'s uid (a retained
/// claim of an earlier Database of the name, or one of a version that did not label claims).
/// It may hold data.
pub(crate) fn predates(claim: &PersistentVolumeClaimView, db: &Database) -> bool {
    let labelled = claim.metadata.labels.as_ref().and_then(|l| l.get(DATABASE_UID_LABEL));
    labelled.is_none() || labelled != db.metadata.uid.as_ref()
}

/// Whether `db`'s data outlives it (`spec.storage.reclaimPolicy: Retain`): its claim and its
/// generated Secret then have no owner.
pub(crate) fn retained(db: &Database) -> bool {
    storage(db).reclaim_policy == Some(ReclaimPolicy::Retain)
}

/// Orders two quantities ("1Gi", "500Mi", "10G", "1.5Ti"), or `None` when either is not
/// one this parser reads (then nothing is decided on the comparison).
pub(crate) fn compare_quantities(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    bytes(a)?.partial_cmp(&bytes(b)?)
}

/// The value of a quantity, in bytes for memory-like suffixes.
fn bytes(quantity: &str) -> Option<f64> {
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("m", 1e-3),
    ];
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(suffix, factor)| quantity.strip_suffix(suffix).map(|number| (number, *factor)))
        .unwrap_or((quantity, 1.0));
    number.parse::<f64>().ok().map(|n| n * factor)
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;
    use crate::api::{DatabaseSpec, EngineKind};

    fn database(storage: Option<Storage>) -> Database {
        let mut spec = DatabaseSpec::new(Size::Medium, "postgres:17").with_engine(EngineKind::Postgres);
        spec.storage = storage.map(Box::new);
        let mut db = Database::new("orders", spec);
        db.metadata.namespace = Some("shop".into());
        db.metadata.uid = Some("uid-1".into());
        db
    }

    fn requested(claim: &PersistentVolumeClaim) -> &str {
        &claim.spec.as_ref().unwrap().resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0
    }

    #[test]
    fn quantities_compare_across_suffixes() {
        assert_eq!(compare_quantities("1Gi", "1024Mi"), Some(Ordering::Equal));
        assert_eq!(compare_quantities("10Gi", "10G"), Some(Ordering::Greater));
        assert_eq!(compare_quantities("1.5Ti", "1Ti"), Some(Ordering::Greater));
        assert_eq!(compare_quantities("lots", "1Gi"), None);
    }

    #[test]
    fn the_claim_defaults_to_the_size_class_and_is_owned_unless_retained() {
        let claim = claim(&database(None), None);
        assert_eq!(claim.metadata.name.as_deref(), Some("orders-data"));
        assert_eq!(requested(&claim), "10Gi");
        assert_eq!(claim.metadata.owner_references.unwrap()[0].uid, "uid-1");
        let retained = super::claim(
            &database(Some(Storage { reclaim_policy: Some(ReclaimPolicy::Retain), ..Default::default() })),
            None,
        );
        assert_eq!(retained.metadata.owner_references, Some(Vec::new()), "no owner: it outlives the Database");
    }

    #[test]
    fn the_claim_never_shrinks_below_what_it_is() {
        let mut live = PersistentVolumeClaimView::default();
        live.set_requested_storage("20Gi");
        assert_eq!(requested(&claim(&database(None), Some(&live))), "20Gi", "the default went down; the claim stays");
        let grown = Storage { size: Some("50Gi".into()), ..Default::default() };
        assert_eq!(requested(&claim(&database(Some(grown)), Some(&live))), "50Gi");
    }
}
