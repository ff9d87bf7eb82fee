//! database-operator: a Kubernetes operator for `Database` resources (group `example.com`),
//! on the hand-built machinery of the `operator-runtime` crate (runtime/).
//!
//! Modules only look down: each imports from the ones below it, never from a sibling
//! controller.
//!
//! ```text
//! operator (the binary's assembly; cli: its flags)
//!   ├── database (the Database controller)      backup (the DatabaseBackup controller)
//!   ├── resources (the objects both make: pure functions, and the views they are cached as)
//!   ├── engine (what each engine's official image needs)
//!   └── api (the CRD types, their schema and indices)
//! operator_runtime (informer, workqueue, controller, client, write, events, ops)
//! ```
//!
//! - [`api`]: `Database` and `DatabaseBackup`, the single source of their CRDs.
//! - [`operator`]: the informers, both controllers, the endpoints and the shutdown, assembled;
//!   [`cli`]: the binary's flags.
//! - [`plugin`]: `kubectl database`, the kubectl plugin (the `kubectl-database` binary):
//!   backups, restores, a client shell and why a Database is not Ready, from a user's seat.
//! - [`desired`]: what the operator wants a Database's children and status to be, for programs
//!   that measure it against other writers (the benchmarks).
//!
//! The rest is the operator's own (`pub(crate)`): the engines, the resources, and the two
//! controllers' reconciles. docs/design.md has the map of which file holds which concept.

pub mod api;
pub(crate) mod backup;
pub mod bucket;
pub mod cli;
pub(crate) mod database;
pub mod desired;
pub(crate) mod engine;
pub mod operator;
pub mod plugin;
pub(crate) mod resources;
