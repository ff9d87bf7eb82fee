//! database-operator: a Kubernetes operator for `Database` resources (group `example.com`).
//!
//! The architecture is one way, top to bottom, the way client-go's sample controller is built:
//!
//! ```text
//! apiserver --list/watch--> informer --> store (cache) --> handlers --> workqueue
//!                                                                        |
//!            apiserver <--server-side apply-- reconcile <-- N workers <--+
//! ```
//!
//! - [`informer`]: list, then watch from the list's resourceVersion; resume, relist on 410 Gone,
//!   back off on errors; keeps an indexed cache and calls event handlers.
//! - [`workqueue`]: a rate-limiting work queue with client-go's semantics.
//! - [`controller`]: N workers draining the queue into a reconcile function.
//! - [`database`]: the `Database` resource, its children and its reconcile.
//! - [`operator`]: all of the above assembled for the binary; [`cli`] its flags.
//! - [`client`]: the API client: throttled, retried as the server asks, measured.
//! - [`events`], [`ops`]: Kubernetes Events with series, the metrics and health-probe endpoints.

pub mod backup;
pub mod cli;
pub mod client;
pub mod controller;
pub mod database;
pub mod events;
pub mod informer;
pub mod operator;
pub mod ops;
pub mod schema;
pub mod workqueue;

/// The throttle moved into [`client`]; this path stays for code written against it.
pub use client::throttle;
