//! The `Database` resource (example.com/v1) and its reconcile.
//!
//! - [`types`](DatabaseSpec): the CRD types, the single source of the CRD ([`crd`]).
//! - [`engine`]: what each engine's official image needs (port, data, env, probes, uid).
//! - [`children`]: the Deployment and Service a Database wants; [`volume`] its claim,
//!   [`credentials`] its Secret.
//! - [`drift`]: whether a live child differs from the wanted one (write only then).
//! - [`status`]: the status and conditions a Database should show.
//! - [`view`]: the part of a Deployment or Service the operator caches.
//! - `written`: the status this process wrote that the cache has not shown yet.
//! - [`DatabaseReconciler`]: reconcile, from the caches, with server-side apply.

pub mod backups;
pub mod children;
mod crd;
pub mod credentials;
pub mod drift;
pub mod engine;
mod reconcile;
pub mod status;
mod types;
pub mod upgrade;
pub mod view;
pub mod volume;
mod written;

pub use crd::*;
pub use reconcile::{DatabaseReconciler, Error, FOREIGN_RECHECK, LABEL_SELECTOR, Stores};
pub use types::*;
