//! The `DatabaseBackup` resource (example.com/v1): a logical dump of a Database, taken once by
//! a Job into a claim of its own, reconciled by the operator's second controller.
//!
//! - [`types`](BackupSpec): the CRD types, the source of the CRD ([`crd_yaml`]).
//! - [`job`]: the claim and the Job a backup owns.
//! - [`BackupReconciler`]: the reconcile; it shares the operator's informers (Databases,
//!   claims) with the Database controller.
//!
//! The Database side of backups (a schedule, `keep`, a restore before the first start, a
//! backup before an upgrade) is the Database reconcile's: it creates DatabaseBackups and reads
//! them from the same shared cache.

pub mod job;
mod reconcile;
mod types;

pub use reconcile::{BY_DATABASE, BackupReconciler, Error, Stores, backups_of, by_database};
pub use types::*;

use kube_core::CustomResourceExt;

/// The DatabaseBackup CRD as YAML, preceded by the same header as the Database's.
pub fn crd_yaml() -> String {
    let body = serde_saphyr::to_string(&DatabaseBackup::crd()).expect("a CustomResourceDefinition serializes to YAML");
    let mut yaml = format!("{}\n{body}", crate::database::CRD_YAML_HEADER);
    if !yaml.ends_with('\n') {
        yaml.push('\n');
    }
    yaml
}
