//! The storage section of a Database: `spec.storage`, the volume of its data. The claim built
//! from it is `crate::resources::claim`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The volume of a Database's data.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(oldSelf.size) || has(self.size) && quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0",
     "message": "spec.storage.size cannot shrink, nor be removed once set: a volume can only grow"},
    {"rule": "!has(oldSelf.storageClassName) || has(self.storageClassName) && self.storageClassName == oldSelf.storageClassName",
     "message": "spec.storage.storageClassName cannot change: a claim keeps its storage class"},
]))]
pub struct Storage {
    /// The size of the volume, a quantity such as "10Gi". Default by size class: small 1Gi,
    /// medium 10Gi, large 100Gi. It can grow (when the storage class allows volume expansion)
    /// and never shrink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",
         "message": "spec.storage.size must be a positive quantity, such as 10Gi"},
    ]))]
    pub size: Option<String>,

    /// The StorageClass of the volume; the cluster's default class when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,

    /// What happens to the volume when the Database is deleted. One of:
    /// - Delete (the default): it is deleted with the Database, and its data with it.
    /// - Retain: it is kept; a new Database of the same name in the same namespace takes it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_policy: Option<ReclaimPolicy>,
}

/// What happens to a Database's volume, or a DatabaseBackup's claim, when its owner is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ReclaimPolicy {
    /// Deleted with its owner.
    #[default]
    Delete,
    /// Kept: a Database's, for a new Database of the same name; a DatabaseBackup's, for a
    /// restore that names the backup.
    Retain,
}
