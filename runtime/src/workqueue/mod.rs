//! A rate-limiting work queue with client-go's `util/workqueue` semantics.
//!
//! Event handlers [`add`](RateLimitingQueue::add) keys; N workers loop over
//! [`get`](RateLimitingQueue::get) -> reconcile -> [`forget`](RateLimitingQueue::forget) on success
//! or [`add_rate_limited`](RateLimitingQueue::add_rate_limited) on failure ->
//! [`done`](RateLimitingQueue::done).
//!
//! # What the queue guarantees
//!
//! - **Fair**: keys are handed out in the order they were first added (FIFO), within a
//!   priority: [`add_with_priority`](RateLimitingQueue::add_with_priority) at
//!   [`Priority::Low`] puts a key behind every normal one, but for one key in [`LOW_SHARE`] while
//!   both wait, so low keys are never starved (see [`Priority`]). `add`, `add_after` and
//!   `add_rate_limited` are normal. Without priorities ([`Config::prioritized`]) there is one
//!   FIFO, client-go's.
//! - **Stingy**: a key added several times before a worker gets it is queued once (the *dirty*
//!   set). `add` on a key that is waiting is a no-op.
//! - **One worker per key**: a key is never handed to two [`get`](RateLimitingQueue::get)ers at
//!   once. A key added while a worker processes it is marked dirty and queued again when that
//!   worker calls [`done`](RateLimitingQueue::done), so the change is never lost and never
//!   processed concurrently.
//! - **Delays**: [`add_after`](RateLimitingQueue::add_after) holds a key back until its deadline.
//!   While a key waits, further `add_after` calls for it keep the *earliest* deadline. A delay of
//!   zero is a plain `add`. One background timer task per queue does this (spawned on the first
//!   `add_after` with a non-zero delay, so that call must run inside a Tokio runtime); it uses
//!   Tokio's clock, so `#[tokio::test(start_paused = true)]` and `tokio::time::advance` drive it.
//! - **Rate limiting**: [`add_rate_limited`](RateLimitingQueue::add_rate_limited) asks the
//!   [`RateLimiter`] how long to wait. The default ([`default_controller_rate_limiter`]) is
//!   client-go's `DefaultControllerRateLimiter`: the larger of a per-key exponential backoff
//!   (5ms doubling to 1000s) and an overall token bucket (10 per second, burst 100).
//!   [`forget`](RateLimitingQueue::forget) resets a key's backoff once it succeeds.
//!
//! # Shutdown
//!
//! After [`shut_down`](RateLimitingQueue::shut_down) every `add`, `add_after` and
//! `add_rate_limited` is ignored and keys waiting for a delay are dropped. As in client-go,
//! `get` keeps handing out keys that were already queued and returns `None` once the queue is
//! empty; workers are expected to exit on `None`. (client-go's doc comment says workers are told
//! to exit "immediately", but its `Get` returns shutdown only once the queue is empty; we follow
//! the code.) Keys still being processed may call `done`; a key re-added while processing, before
//! the shutdown, is still queued again by `done`.
//! [`shut_down_with_drain`](RateLimitingQueue::shut_down_with_drain) does the same and then waits
//! until no key is being processed, so every key a worker got before the shutdown is finished when
//! it returns. A worker that never calls `done` makes it wait forever; calling `shut_down` from
//! elsewhere ends the wait.
//!
//! # What the queue does not guarantee
//!
//! - Nothing survives the process: the queue is in memory only.
//! - `len` counts keys queued for a worker; keys waiting for a delay and keys being processed are
//!   not counted. It is informational: do not gate `add` or `get` on it.
//! - `done` for a key that is not being processed is ignored (client-go would queue it a second
//!   time if it was dirty; we do not).
//!
//! # Metrics
//!
//! Give [`Config::metrics`] a [`Metrics`] registered once in a
//! `prometheus_client::registry::Registry`; every named queue reports under the `name` label with
//! client-go's metric names. Unnamed queues and queues without metrics pay nothing for them.
//!
//! ## Memory usage
//!
//! One entry per key that is queued, waiting or processing; each key is stored twice (map and
//! FIFO), so prefer keys that are cheap to clone (`Arc<str>`, or a struct of them). A key moved
//! from the low FIFO to the normal one leaves a stale copy behind until the low FIFO reaches it
//! or empties.
//! `add_after` that moves a key's deadline earlier leaves the old timer entry behind until its
//! deadline passes. Like client-go's Go maps, the internal tables keep their largest size.
//!
//! ## Cost
//!
//! One mutex around the two FIFOs and the key map; `add`, `get` and `done` each take it once and
//! look the key up once or twice, hashed with foldhash's seeded `fast::RandomState` rather than
//! std's slower SipHash. Past cloning the key when it is queued, they allocate nothing once the
//! tables have grown. The key is cloned where it is pushed onto a FIFO and dropped where `done`
//! removes it, both under the lock: with the controller's `Arc<str>` keys that is a reference
//! count; a `String` key would put an allocation and a free inside the critical section every
//! worker waits on. (Cloning before locking did not measurably pay with `Arc<str>` keys on the
//! operator's current-thread runtime, so the code stays plain; docs/benchmarks.md has the
//! figures.) Waking a waiting worker is a [`tokio::sync::Notify`]. Without metrics there is no
//! clock read and no metric update.
//!
//! # Example
//!
//! ```
//! use operator_runtime::workqueue::RateLimitingQueue;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let queue = RateLimitingQueue::new("databases");
//! queue.add("default/db-1".to_string());
//! queue.add("default/db-1".to_string()); // deduplicated while it waits
//! assert_eq!(queue.len(), 1);
//!
//! let key = queue.get().await.expect("the queue is not shut down");
//! // ... reconcile `key`; on success:
//! queue.forget(&key);
//! queue.done(&key);
//!
//! queue.shut_down();
//! assert_eq!(queue.get().await, None);
//! # }
//! ```

mod delaying;
mod error;
mod metrics;
mod priority;
mod queue;
mod rate_limiter;
mod rate_limiting;
#[cfg(test)]
mod tests;

pub use error::Error;
pub use metrics::Metrics;
pub use priority::{LOW_SHARE, Priority};
pub use queue::Key;
pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter, TokioClock,
    default_controller_rate_limiter, max_of,
};
pub use rate_limiting::{Config, RateLimitingQueue};
