//! The objects the operator makes, as pure functions of the resource they belong to (the
//! `pkg/specs` of CloudNativePG, the `deploymentForDatabase` of the Go sample this project grew
//! from), and the views it caches them as. No I/O: the controllers read the caches, call these,
//! and write.
//!
//! - [`meta`]: the field manager, the labels, the controller ownerReference, and whose a live
//!   object is.
//! - A Database's: [`workload`] (the Deployment and the Service), [`secret`] (the generated
//!   credentials), [`claim`] (the data volume), [`restore`] (the init container of a restore),
//!   [`replication`] (the replicas of a Database of several instances, and its -rw and -ro
//!   Services).
//! - A DatabaseBackup's: [`backup`] (its claim and its dump Job, or the Job that dumps into a
//!   bucket), [`verify`] (the throwaway Database its verification restores, and the Job that
//!   counts what it holds).
//! - [`bucket`]: the container that moves a dump to or from a bucket, which the bucket Job and a
//!   restore from a bucket carry.
//! - [`view`]: the fields of each child kind the operator caches and compares.

pub(crate) mod backup;
pub(crate) mod bucket;
pub(crate) mod claim;
pub(crate) mod meta;
pub(crate) mod replication;
pub(crate) mod restore;
pub(crate) mod secret;
pub(crate) mod verify;
pub(crate) mod view;
pub(crate) mod workload;
