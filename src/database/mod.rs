//! The Database controller's reconcile: the Go sample's `syncHandler` (docs/design.md names
//! the article), done so that it converges.
//!
//! For a key it reads the Database and its children from the informers' caches (never a GET
//! per reconcile), runs the phases of [`reconcile`] in order, each of which may stop the pass
//! with a reason ([`status::Blocker`]) or an error to retry, and ends by writing the status
//! that tells the truth and the events it collected. An unchanged world costs no request (a
//! Database of several instances costs two, and asks its instances where they stand).
//!
//! - [`reconcile`]: the reconciler, its phases in order, the status write and when to look
//!   again.
//! - [`children`]: the phases that write children: the Secret, the claim, the Deployment and
//!   Service, each only where it differs, a same-named object of someone else's left alone.
//! - [`replicas`]: the replicas, replication Secret and -rw/-ro Services of a Database of
//!   several instances; [`positions`]: each instance's timeline and each replica's lag, asked
//!   of the instances themselves; [`following`]: whether each replica still receives from its
//!   primary; [`failover`]: which instance is the primary, and a failover when it is lost
//!   ([`down`]: what it remembers between passes).
//! - [`status`]: what the status says, and why the Database is blocked.
//! - [`upgrade`]: which image runs while `spec.image` changes.
//! - [`pods`]: why a Database's pod does not run, in the pod's words.
//! - [`restore`]: where a restore stands.
//! - [`schedule`]: backups on a schedule and before an upgrade.
//! - [`verification`]: the condition that says whether its latest verified backup restored.

mod children;
mod down;
mod failover;
mod following;
mod pods;
mod positions;
mod reconcile;
mod replicas;
pub(crate) mod restore;
pub(crate) mod schedule;
pub(crate) mod status;
pub(crate) mod upgrade;
mod verification;

pub(crate) use reconcile::now;
pub(crate) use reconcile::{DatabaseReconciler, Stores};
