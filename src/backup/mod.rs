//! The DatabaseBackup controller: a logical dump of a Database, taken once by a Job into a
//! claim of its own. The types are in [`crate::api`]; the claim and the Job it makes in
//! [`crate::resources::backup`].
//!
//! - [`BackupReconciler`]: the reconcile. It shares the operator's informers (Databases,
//!   claims) with the Database controller, and never imports it: what both need (the types,
//!   the resources, the indices) lies below both.
//! - [`backups_of`]: which DatabaseBackups a change of a Database concerns.
//!
//! The Database side of backups (a schedule, `keep`, a restore before the first start, a
//! backup before an upgrade) is the Database controller's: it creates DatabaseBackups and
//! reads them from the same shared cache.

mod expire;
mod reconcile;
mod verify;

pub(crate) use reconcile::{BackupReconciler, Stores, backups_of};
