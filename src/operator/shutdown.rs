//! The shutdown sequence after the workers have stopped (steps 1 and 2 of [`super::run`]: no
//! new key is taken, in-flight reconciles have finished or were aborted). The rest, each step
//! when the one before it is over:
//!
//! 3. the queued Events are written; after a lost Lease they are dropped, since another
//!    replica may lead by now;
//! 4. the Lease stops being renewed, and
//! 5. is released (unless it was lost), so another replica takes over at once;
//! 6. `/readyz` turns unready for good, the informers stop, then the HTTP endpoints.
//!
//! So the Lease is held until the last write is done, and the caches, `/metrics` and the
//! probes serve until the end. The outcome is the workers' own, or else the first of: the
//! Lease was lost, an informer stopped unexpectedly.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::Error;
use operator_runtime::controller;
use operator_runtime::ops::Health;
use operator_runtime::ops::leader::Ended;

/// Leading, as the shutdown sequence sees it.
pub(super) trait Lead {
    /// Whether the Lease was lost: nothing may be written any more.
    fn is_lost(&self) -> bool;
    /// Stops renewing and, unless the Lease was lost, releases it. Returns how leading ended.
    async fn end(self) -> Ended;
}

/// What is still running once the workers have stopped.
#[derive(Debug)]
pub(super) struct Shutdown<L> {
    /// The events task: it writes what is queued and ends, the last recorder being gone.
    pub(super) events: JoinHandle<()>,
    /// This replica's leadership, with leader election.
    pub(super) leadership: Option<L>,
    /// The probes' state.
    pub(super) health: Health,
    /// Stops the informers.
    pub(super) informers: CancellationToken,
    /// The informers' tasks.
    pub(super) informer_tasks: Vec<JoinHandle<()>>,
    /// Ends with the resource of an informer that stopped before it was told to.
    pub(super) informer_stopped: JoinHandle<String>,
    /// Stops the HTTP endpoints.
    pub(super) servers: CancellationToken,
    /// The endpoints' tasks.
    pub(super) server_tasks: Vec<JoinHandle<()>>,
}

impl<L: Lead> Shutdown<L> {
    /// Runs steps 3 to 6, given how the workers ended.
    pub(super) async fn run(self, workers: Result<(), controller::Error>) -> Result<(), Error> {
        info!("shutdown 2/6: workers stopped");
        let mut result = workers.map_err(Error::from);
        // 3. The events.
        if self.leadership.as_ref().is_some_and(Lead::is_lost) {
            self.events.abort();
        }
        let _ = self.events.await;
        info!("shutdown 3/6: events flushed");
        // 4 and 5. Stop renewing, then release the Lease.
        if let Some(leadership) = self.leadership
            && leadership.end().await == Ended::Lost
        {
            result = result.and(Err(Error::LeadershipLost));
        }
        info!("shutdown 5/6: leadership ended");
        // 6. Unready, then the informers, then the endpoints.
        self.health.stopping();
        self.informers.cancel();
        if self.informer_stopped.is_finished() {
            let resource = self.informer_stopped.await.unwrap_or_default();
            result = result.and(Err(Error::InformerStopped { resource }));
        } else {
            self.informer_stopped.abort();
        }
        for task in self.informer_tasks {
            let _ = task.await;
        }
        self.servers.cancel();
        for task in self.server_tasks {
            let _ = task.await;
        }
        info!("shutdown 6/6: informers and endpoints stopped");
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// The steps as they happened.
    #[derive(Clone, Default)]
    struct Steps(Arc<Mutex<Vec<&'static str>>>);

    impl Steps {
        fn push(&self, step: &'static str) {
            self.0.lock().unwrap().push(step);
        }
        fn seen(&self) -> Vec<&'static str> {
            self.0.lock().unwrap().clone()
        }
    }

    struct FakeLead {
        lost: bool,
        steps: Steps,
    }

    impl Lead for FakeLead {
        fn is_lost(&self) -> bool {
            self.lost
        }
        async fn end(self) -> Ended {
            if self.lost {
                Ended::Lost
            } else {
                self.steps.push("lease released");
                Ended::Cancelled
            }
        }
    }

    /// A task that records `step` once `token` is cancelled.
    fn stops_on(token: &CancellationToken, steps: &Steps, step: &'static str) -> JoinHandle<()> {
        let (token, steps) = (token.clone(), steps.clone());
        tokio::spawn(async move {
            token.cancelled().await;
            // Late, so that a sequence not waiting for this task would show it.
            tokio::time::sleep(Duration::from_millis(20)).await;
            steps.push(step);
        })
    }

    /// A sequence whose events task takes a moment to write; `informer_stopped` still runs
    /// unless `stopped` names an informer that ended.
    fn shutdown(steps: &Steps, lead: Option<FakeLead>, stopped: Option<&'static str>) -> Shutdown<FakeLead> {
        let (informers, servers) = (CancellationToken::new(), CancellationToken::new());
        let events = tokio::spawn({
            let steps = steps.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                steps.push("events written");
            }
        });
        let informer_stopped = tokio::spawn(async move {
            match stopped {
                Some(resource) => resource.to_string(),
                None => std::future::pending().await,
            }
        });
        Shutdown {
            events,
            leadership: lead,
            health: Health::default(),
            informer_tasks: vec![stops_on(&informers, steps, "informer stopped")],
            informers,
            informer_stopped,
            server_tasks: vec![stops_on(&servers, steps, "endpoint stopped")],
            servers,
        }
    }

    #[tokio::test]
    async fn the_lease_is_released_after_the_events_and_before_the_caches_stop() {
        let steps = Steps::default();
        let lead = FakeLead { lost: false, steps: steps.clone() };
        let sequence = shutdown(&steps, Some(lead), None);
        let health = sequence.health.clone();
        sequence.run(Ok(())).await.unwrap();
        assert_eq!(steps.seen(), ["events written", "lease released", "informer stopped", "endpoint stopped"]);
        assert!(!health.is_ready(), "unready for good");
    }

    #[tokio::test]
    async fn after_a_lost_lease_queued_events_are_dropped_and_the_run_fails() {
        let steps = Steps::default();
        let lead = FakeLead { lost: true, steps: steps.clone() };
        let result = shutdown(&steps, Some(lead), None).run(Ok(())).await;
        assert!(matches!(result, Err(Error::LeadershipLost)), "{result:?}");
        assert_eq!(steps.seen(), ["informer stopped", "endpoint stopped"]);
    }

    #[tokio::test]
    async fn without_leader_election_the_events_are_written_then_everything_stops() {
        let steps = Steps::default();
        shutdown(&steps, None, None).run(Ok(())).await.unwrap();
        assert_eq!(steps.seen(), ["events written", "informer stopped", "endpoint stopped"]);
    }

    #[tokio::test]
    async fn an_informer_that_stopped_on_its_own_is_the_outcome() {
        let steps = Steps::default();
        let sequence = shutdown(&steps, None, Some("databases.v1.example.com"));
        // The informer_stopped task has ended, as it has when it stopped the workers.
        while !sequence.informer_stopped.is_finished() {
            tokio::task::yield_now().await;
        }
        let result = sequence.run(Ok(())).await;
        assert!(
            matches!(&result, Err(Error::InformerStopped { resource }) if resource == "databases.v1.example.com"),
            "{result:?}"
        );
        assert_eq!(steps.seen(), ["events written", "informer stopped", "endpoint stopped"]);
    }
}
