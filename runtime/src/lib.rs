//! operator-runtime: the machinery of a Kubernetes operator, built the way client-go builds
//! its sample controller, and knowing nothing of any one resource.
//!
//! The flow is one way, top to bottom:
//!
//! ```text
//! apiserver --list/watch--> informer --> store (cache) --> handlers --> workqueue
//!                                                                        |
//!            apiserver <--writes-- reconcile <-- N workers (controller) <-+
//! ```
//!
//! - [`informer`]: list, then watch from the list's resourceVersion; resume, relist on 410
//!   Gone, back off on errors; keeps an indexed cache and calls event handlers. Views
//!   ([`informer::view`]) cache only the fields a controller reads.
//! - [`workqueue`]: a rate-limiting work queue with client-go's semantics, and a priority lane.
//! - [`controller`]: N workers draining the queue into a [`controller::Reconciler`]; a
//!   server's `Retry-After` is honoured here, once, for every controller.
//! - [`client`]: the API client: throttled, retried as the server asks, measured.
//! - [`write`]: the writes every controller makes: create once, apply only what differs
//!   ([`drift`]), the status by server-side apply, remembered until the cache shows it.
//! - [`conditions`]: one place that decides when a condition's `lastTransitionTime` moves.
//! - [`events`]: Kubernetes Events with series and client-go's spam filter.
//! - [`ops`]: leader election on a Lease, the metrics and health-probe endpoints.
//! - [`schema`]: the CRD schema's descriptions, as `kubectl explain` shows them.

pub mod client;
pub mod conditions;
pub mod controller;
pub mod drift;
pub mod events;
pub mod informer;
pub mod ops;
pub mod schema;
pub mod workqueue;
pub mod write;
