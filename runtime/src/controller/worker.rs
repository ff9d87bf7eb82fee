//! One worker: `get` a key, reconcile it, then `forget` or `add_rate_limited`, then `done`.
//!
//! An error that carries the server's `Retry-After` ([`ReconcileError::retry_after`]: the
//! apiserver answered 429 after the client's own retries ran out) is not the key's fault: the
//! key comes back when the server said, without growing its backoff, for every controller.

use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tracing::{Instrument, debug, error, info_span, warn};

use super::ObjectKey;
use super::metrics::ControllerMetrics;
use crate::workqueue::RateLimitingQueue;

/// What a successful reconcile asks of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more to do until the next event for this key.
    Done,
    /// Reconcile this key again after the delay, even without an event (e.g. to poll
    /// something the informers do not watch).
    RequeueAfter(Duration),
}

/// The error of a failed reconcile: shown in the log, and retried with the key's backoff
/// unless the server asked for a delay.
pub trait ReconcileError: Display + Send + 'static {
    /// How long the apiserver asked to wait (its `Retry-After`), when it throttled the
    /// reconcile ([`crate::client::retry_after`] reads it from a client error).
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

impl ReconcileError for String {}

impl ReconcileError for std::convert::Infallible {}

/// The reconcile function of a controller.
///
/// It is called with a key, never with an object: it reads the current object from the
/// cache, so a burst of events for one object costs one reconcile of its latest state. It must
/// be idempotent; a key whose object is gone should return `Ok(Action::Done)`.
pub trait Reconciler: Send + Sync + 'static {
    /// The error of a failed reconcile; the key is retried with per-key backoff.
    type Error: ReconcileError;

    /// Brings the world in line with the object named by `key`.
    fn reconcile(&self, key: &str) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

/// Runs one worker until the queue is shut down.
pub(crate) async fn run<R: Reconciler>(
    id: usize,
    queue: RateLimitingQueue<ObjectKey>,
    reconciler: Arc<R>,
    metrics: Option<ControllerMetrics>,
) {
    while let Some(key) = queue.get().await {
        // The queue still hands out what was queued before a shutdown (client-go's
        // semantics); a stopping controller takes no new key and only lets in-flight
        // reconciles finish. The key is not lost: the next start lists everything again.
        if queue.is_shutting_down() {
            queue.done(&key);
            break;
        }
        let attempt = queue.num_requeues(&key) + 1;
        let span = info_span!("reconcile", key = %key, attempt, worker = id);
        let started = Instant::now();
        if let Some(m) = &metrics {
            m.active_workers.inc();
        }
        let outcome = AssertUnwindSafe(reconciler.reconcile(&key)).catch_unwind().instrument(span.clone()).await;
        // Throttled by the apiserver: come back when it says, not on the key's backoff.
        let outcome = match outcome {
            Ok(Err(err)) if err.retry_after().is_some() => {
                let delay = err.retry_after().unwrap_or_default();
                span.in_scope(|| warn!(error = %err, ?delay, "the API server is throttling us; retrying when it asks"));
                Ok(Ok(Action::RequeueAfter(delay)))
            }
            other => other,
        };
        if let Some(m) = &metrics {
            m.active_workers.dec();
            m.time.observe(started.elapsed().as_secs_f64());
            match &outcome {
                Ok(Ok(Action::Done)) => m.success.inc(),
                Ok(Ok(Action::RequeueAfter(_))) => m.requeue_after.inc(),
                Ok(Err(_)) => {
                    m.errors.inc();
                    m.error.inc()
                }
                // controller-runtime turns a recovered panic into the reconcile's error.
                Err(_) => {
                    m.panics.inc();
                    m.errors.inc();
                    m.error.inc()
                }
            };
        }
        let _entered = span.enter();
        match outcome {
            Ok(Ok(Action::Done)) => {
                queue.forget(&key);
                debug!(elapsed = ?started.elapsed(), "reconciled");
            }
            Ok(Ok(Action::RequeueAfter(delay))) => {
                queue.forget(&key);
                queue.add_after(key.clone(), delay);
                debug!(elapsed = ?started.elapsed(), ?delay, "reconciled; requeued");
            }
            Ok(Err(err)) => {
                warn!(error = %err, elapsed = ?started.elapsed(), "reconcile failed; retrying with backoff");
                queue.add_rate_limited(key.clone());
            }
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                error!(panic = %message, "reconcile panicked; retrying with backoff");
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Fails the first `failures` calls per run (panicking on the first if `panic_first`).
    struct Flaky {
        calls: AtomicUsize,
        failures: usize,
        panic_first: bool,
        seen: Mutex<Vec<String>>,
    }

    impl Reconciler for Flaky {
        type Error = String;
        async fn reconcile(&self, key: &str) -> Result<Action, String> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            self.seen.lock().unwrap().push(key.to_string());
            if call == 0 && self.panic_first {
                panic!("boom");
            }
            if call < self.failures { Err(format!("failure {call}")) } else { Ok(Action::Done) }
        }
    }

    fn flaky(failures: usize, panic_first: bool) -> Arc<Flaky> {
        Arc::new(Flaky { calls: AtomicUsize::new(0), failures, panic_first, seen: Mutex::new(Vec::new()) })
    }

    async fn run_until_calls(reconciler: Arc<Flaky>, calls: usize) -> RateLimitingQueue<ObjectKey> {
        run_until_calls_with(reconciler, calls, None).await
    }

    async fn run_until_calls_with(
        reconciler: Arc<Flaky>,
        calls: usize,
        metrics: Option<ControllerMetrics>,
    ) -> RateLimitingQueue<ObjectKey> {
        let queue = RateLimitingQueue::new("test");
        queue.add(ObjectKey::from("ns/a"));
        let worker = tokio::spawn(run(0, queue.clone(), reconciler.clone(), metrics));
        while reconciler.calls.load(Ordering::SeqCst) < calls {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Let the worker finish the bookkeeping of the last call.
        tokio::time::sleep(Duration::from_millis(1)).await;
        queue.shut_down_with_drain().await;
        worker.await.unwrap();
        queue
    }

    #[tokio::test(start_paused = true)]
    async fn failed_reconcile_is_retried_until_it_succeeds_then_forgotten() {
        let reconciler = flaky(3, false);
        let queue = run_until_calls(reconciler.clone(), 4).await;
        assert_eq!(reconciler.calls.load(Ordering::SeqCst), 4);
        assert_eq!(queue.num_requeues(&ObjectKey::from("ns/a")), 0, "success forgets the backoff");
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_worker_takes_no_new_key_after_shut_down() {
        let reconciler = flaky(0, false);
        let queue = RateLimitingQueue::new("test");
        queue.add(ObjectKey::from("ns/a"));
        queue.add(ObjectKey::from("ns/b"));
        queue.shut_down();
        run(0, queue.clone(), reconciler.clone(), None).await;
        assert_eq!(reconciler.calls.load(Ordering::SeqCst), 0, "queued keys are left for the next start");
    }

    #[tokio::test(start_paused = true)]
    async fn panic_in_reconcile_is_caught_and_retried() {
        let reconciler = flaky(1, true);
        let queue = run_until_calls(reconciler.clone(), 2).await;
        assert_eq!(*reconciler.seen.lock().unwrap(), vec!["ns/a", "ns/a"]);
        assert_eq!(queue.num_requeues(&ObjectKey::from("ns/a")), 0);
    }

    /// Throttled by the server: a reconcile error that carries its Retry-After.
    struct Throttled(AtomicUsize);

    #[derive(Debug)]
    struct TooManyRequests;

    impl std::fmt::Display for TooManyRequests {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("429 Too Many Requests")
        }
    }

    impl ReconcileError for TooManyRequests {
        fn retry_after(&self) -> Option<Duration> {
            Some(Duration::from_secs(7))
        }
    }

    impl Reconciler for Throttled {
        type Error = TooManyRequests;
        async fn reconcile(&self, _: &str) -> Result<Action, TooManyRequests> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 { Err(TooManyRequests) } else { Ok(Action::Done) }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_reconcile_comes_back_when_the_server_said_without_backoff() {
        let reconciler = Arc::new(Throttled(AtomicUsize::new(0)));
        let queue = RateLimitingQueue::new("test");
        queue.add(ObjectKey::from("ns/a"));
        let started = tokio::time::Instant::now();
        let worker = tokio::spawn(run(0, queue.clone(), reconciler.clone(), None));
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(reconciler.0.load(Ordering::SeqCst), 1, "not before the server's delay");
        assert_eq!(queue.num_requeues(&ObjectKey::from("ns/a")), 0, "no backoff counted");
        while reconciler.0.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(started.elapsed() >= Duration::from_secs(7));
        queue.shut_down_with_drain().await;
        worker.await.unwrap();
    }

    /// The regression test of a panic counted only under `result="panic"`: controller-runtime
    /// counts a recovered panic as an error too, and dashboards alert on the errors.
    #[tokio::test(start_paused = true)]
    async fn a_recovered_panic_counts_as_an_error_and_as_a_panic() {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = crate::controller::Metrics::register(&mut registry).for_controller("test");
        run_until_calls_with(flaky(1, true), 2, Some(metrics)).await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for series in [
            r#"controller_runtime_reconcile_panics_total{controller="test"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="test"} 1"#,
            r#"controller_runtime_reconcile_total{controller="test",result="error"} 1"#,
            r#"controller_runtime_reconcile_total{controller="test",result="success"} 1"#,
        ] {
            assert!(text.lines().any(|line| line == series), "{series} missing from\n{text}");
        }
        assert!(!text.contains(r#"result="panic""#), "{text}");
    }
}
