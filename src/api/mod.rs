//! The API the operator serves: every custom resource type, the single source of their CRDs,
//! and the cache indices over them. Nothing here does I/O or decides how a resource is
//! realised; everything else in the crate imports from here.
//!
//! - [`Database`] (`example.com/v1`, short name `db`): its spec, status, size and phase
//!   (`database.rs`); the optional sections of its spec each in a file of its own: the engine
//!   ([`EngineKind`], `engine.rs`), the volume ([`Storage`], `storage.rs`), the credentials
//!   ([`Credentials`], `credentials.rs`), upgrades ([`UpgradeSpec`] and the status' [`UpgradeStatus`],
//!   `upgrade.rs`), backups on a schedule and a restore ([`BackupSchedule`], [`RestoreFrom`],
//!   `schedule.rs`), several instances ([`instances`]: a primary and streaming replicas, and
//!   each one's [`InstanceStatus`], `instances.rs`).
//! - [`DatabaseBackup`] (`dbbackup`): a logical dump of a Database (`backup.rs`), kept in a
//!   claim or in an S3-compatible [`Bucket`] (`bucket.rs`, also where a restore finds one).
//! - [`crd`], [`crd_yaml`], [`backup_crd`], [`backup_crd_yaml`]: the CRDs as the apiserver gets them, with the
//!   rules the schema and CEL check at `kubectl apply` (`crd.rs`).
//! - [`index`]: the indices the controllers find each other's objects by.
//!
//! The `///` comments on spec and status fields become the schema's descriptions, which
//! `kubectl explain` shows: they are written for a kubectl user, not a Rust reader, so they
//! carry no intra-doc links; their lines are joined into paragraphs
//! ([`operator_runtime::schema::rewrap_descriptions`]), and a line starting with `- ` stays a
//! list item. Adding a field is: the field here, the builder or decision that reads it, a test
//! of each.

mod backup;
mod bucket;
mod crd;
mod credentials;
mod database;
mod engine;
pub mod index;
mod instances;
mod schedule;
mod storage;
mod upgrade;

pub use backup::*;
pub use bucket::{ACCESS_KEY_ID_KEY, Bucket, CA_KEY, SECRET_ACCESS_KEY_KEY};
pub use crd::{CRD_YAML_HEADER, backup_crd, backup_crd_yaml, crd, crd_yaml};
pub use credentials::Credentials;
pub use database::*;
pub use engine::{EngineKind, newer_major};
pub use instances::{
    DEFAULT_FAILOVER_DELAY_SECONDS, InstanceStatus, MAX_INSTANCES, PRIMARY_ANNOTATION, Replication, Role,
    failover_delay, instance_name, instances, primary_ordinal, replicated, synchronous,
};
pub use schedule::{BackupSchedule, DEFAULT_KEEP, RestoreFrom};
pub use storage::{ReclaimPolicy, Storage};
pub use upgrade::{DEFAULT_TIMEOUT, UpgradePolicy, UpgradeSpec, UpgradeState, UpgradeStatus};
