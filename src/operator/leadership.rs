//! Leading while the workers run: the Lease is renewed in the background until the shutdown
//! sequence says the last write is done, and losing it stops the workers in time.
//!
//! - **Renewal outlives the writes.** It is stopped by [`Leadership::end`], which the shutdown
//!   sequence calls only after the workers have drained and the events are flushed; a drain
//!   longer than the Lease must never let another replica start writing beside this one.
//! - **A lost Lease stops the writes in time.** When renewal fails for `renew_deadline` (or
//!   another holder shows up), the workers take no new key at once, and in-flight reconciles
//!   are aborted once `lease_duration - renew_deadline` has passed: the earliest another
//!   replica may hold the Lease.

use prometheus_client::metrics::gauge::Gauge;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::shutdown::Lead;
use operator_runtime::ops::leader::{Config, Elector, Ended};

/// How the workers are stopped.
#[derive(Debug, Clone)]
pub(super) struct WorkerStop {
    /// Take no new key; let in-flight reconciles finish.
    pub(super) drain: CancellationToken,
    /// Drop in-flight reconciles.
    pub(super) abort: CancellationToken,
}

/// This replica's leadership, from the moment it holds the Lease.
#[derive(Debug)]
pub(super) struct Leadership {
    elector: Elector,
    renew: CancellationToken,
    renewer: JoinHandle<Ended>,
    lost: CancellationToken,
    is_leader: Gauge,
}

impl Leadership {
    /// Waits until this replica holds the Lease and starts renewing it; `None` when `cancel`
    /// fired first.
    pub(super) async fn acquire(
        elector: Elector,
        config: &Config,
        cancel: &CancellationToken,
        is_leader: Gauge,
        workers: WorkerStop,
    ) -> Option<Self> {
        if !elector.acquire(cancel).await {
            return None;
        }
        is_leader.set(1);
        let (renew, lost) = (CancellationToken::new(), CancellationToken::new());
        let grace = config.stop_writing_within();
        let renewer = tokio::spawn({
            let (elector, renew, lost, is_leader) = (elector.clone(), renew.clone(), lost.clone(), is_leader.clone());
            async move {
                let ended = elector.renew(&renew).await;
                if ended == Ended::Lost {
                    is_leader.set(0);
                    lost.cancel();
                    workers.drain.cancel();
                    warn!(within = ?grace, "lost the Lease: taking no new key; aborting in-flight reconciles that outlast the Lease");
                    tokio::time::sleep(grace).await;
                    workers.abort.cancel();
                }
                ended
            }
        });
        Some(Self { elector, renew, renewer, lost, is_leader })
    }
}

impl Lead for Leadership {
    /// Whether the Lease was lost: nothing may be written any more.
    fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Stops renewing and, unless it was lost, releases the Lease so another replica takes over
    /// at once. Returns how leading ended.
    async fn end(self) -> Ended {
        if self.is_lost() {
            // The renewer may still wait to abort the workers, which are gone by now.
            self.renewer.abort();
            return Ended::Lost;
        }
        self.renew.cancel();
        let ended = self.renewer.await.unwrap_or(Ended::Lost);
        self.is_leader.set(0);
        if ended == Ended::Cancelled {
            self.elector.release().await;
        }
        ended
    }
}
