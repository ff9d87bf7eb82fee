//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! Several replicas of the operator may run; only the one holding the Lease runs workers.
//! The others keep their informers' caches warm, so a new leader starts reconciling at once.
//!
//! - **Acquire**: every `retry_period`, a candidate reads the Lease. It takes the Lease when
//!   nobody holds it (absent, or `holderIdentity` empty after a release) or when the holder
//!   has not renewed it for `lease_duration`. "Not renewed" is judged by the candidate's own
//!   clock, from the moment it last saw the Lease record change (client-go's rule): clocks of
//!   different machines are never compared.
//! - **Renew**: the leader updates `renewTime` every `retry_period`. If it cannot renew for
//!   `renew_deadline` (shorter than `lease_duration`, so it gives up before anyone else may
//!   take over), it has lost the Lease: [`Elector::run`] returns and the caller stops its
//!   workers at once.
//! - **Release**: on a clean shutdown the leader clears `holderIdentity`, so a candidate takes
//!   over at its next attempt instead of waiting out `lease_duration`.
//! - Writes use the Lease's resourceVersion (optimistic concurrency): two candidates that race
//!   for the same expired Lease cannot both win.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use kube_core::ObjectMeta;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Leader election settings; the defaults are controller-runtime's.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Lease's name.
    pub lease_name: String,
    /// The Lease's namespace.
    pub lease_namespace: String,
    /// This candidate's identity (unique per process: pod name plus a random suffix).
    pub identity: String,
    /// How long a non-renewed Lease blocks other candidates (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up (10 s).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew (2 s).
    pub retry_period: Duration,
}

impl Config {
    /// controller-runtime's defaults for `lease_name` in `lease_namespace`.
    pub fn new(lease_name: &str, lease_namespace: &str, identity: &str) -> Self {
        Self {
            lease_name: lease_name.to_string(),
            lease_namespace: lease_namespace.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why leading ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Cancelled: the caller shuts down (the Lease is released by [`Elector::release`]).
    Cancelled,
    /// The Lease could not be renewed within `renew_deadline`, or another holder took it.
    Lost,
}

/// One candidate.
#[derive(Clone)]
pub struct Elector {
    api: Api<Lease>,
    config: Config,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector").field("config", &self.config).finish_non_exhaustive()
    }
}

/// What a candidate last saw of the Lease, and when by its own clock.
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    at: Instant,
}

impl Elector {
    /// A candidate for `config.lease_name` using `client`.
    pub fn new(client: Client, config: Config) -> Self {
        Self { api: Api::namespaced(client, &config.lease_namespace), config }
    }

    /// Waits until this candidate holds the Lease. Returns `false` if `cancel` fired first.
    ///
    /// # Cancellation safety
    ///
    /// Safe: a cancelled acquire writes nothing more.
    pub async fn acquire(&self, cancel: &CancellationToken) -> bool {
        let mut observed: Option<Observed> = None;
        info!(lease = %self.config.lease_name, identity = %self.config.identity, "waiting to become leader");
        loop {
            match self.try_acquire_or_renew(&mut observed, false).await {
                Ok(true) => {
                    info!(lease = %self.config.lease_name, identity = %self.config.identity, "became leader");
                    return true;
                }
                Ok(false) => {}
                Err(err) => warn!(error = %err, "leader election: reading or writing the Lease failed"),
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    /// Renews the Lease every `retry_period` until `cancel` fires ([`Ended::Cancelled`]) or a
    /// renewal has not succeeded for `renew_deadline` ([`Ended::Lost`]).
    pub async fn renew(&self, cancel: &CancellationToken) -> Ended {
        let mut last_renewed = Instant::now();
        let mut observed = None;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ended::Cancelled,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            let attempt = tokio::time::timeout(
                self.config.renew_deadline.saturating_sub(last_renewed.elapsed()),
                self.try_acquire_or_renew(&mut observed, true),
            )
            .await;
            match attempt {
                Ok(Ok(true)) => last_renewed = Instant::now(),
                Ok(Ok(false)) => {
                    warn!(lease = %self.config.lease_name, "leader election: another candidate holds the Lease");
                    return Ended::Lost;
                }
                Ok(Err(err)) => warn!(error = %err, "leader election: renewing the Lease failed"),
                Err(_) => {}
            }
            if last_renewed.elapsed() >= self.config.renew_deadline {
                warn!(lease = %self.config.lease_name, deadline = ?self.config.renew_deadline, "leader election: could not renew the Lease in time; stepping down");
                return Ended::Lost;
            }
        }
    }

    /// Gives the Lease up (clears `holderIdentity`) if this candidate holds it, so another
    /// takes over at its next attempt. Best effort: errors are logged.
    pub async fn release(&self) {
        let result = async {
            let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else { return Ok(()) };
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            // client-go shortens the duration to 1 s on release, for candidates that only look
            // at durations.
            spec.lease_duration_seconds = Some(1);
            self.api.replace(&self.config.lease_name, &PostParams::default(), &lease).await.map(|_| ())
        }
        .await;
        match result {
            Ok(()) => info!(lease = %self.config.lease_name, "released the Lease"),
            Err(err) => warn!(error = %err, "leader election: releasing the Lease failed"),
        }
    }

    /// One attempt. `Ok(true)` when this candidate holds the Lease after it.
    async fn try_acquire_or_renew(
        &self,
        observed: &mut Option<Observed>,
        leading: bool,
    ) -> Result<bool, kube_client::Error> {
        let now = MicroTime(Timestamp::now());
        let me = self.config.identity.as_str();
        let duration = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.config.lease_namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.to_string()),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube_client::Error::Api(status)) if status.is_already_exists() => Ok(false),
                Err(err) => Err(err),
            };
        };

        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        // Track when the record last changed, by our clock.
        let changed = observed.as_ref().is_none_or(|o| o.holder != holder || o.renew_time != spec.renew_time);
        if changed {
            *observed =
                Some(Observed { holder: holder.clone(), renew_time: spec.renew_time.clone(), at: Instant::now() });
        }
        let held_by_me = holder.as_deref() == Some(me);
        if leading && !held_by_me {
            return Ok(false);
        }
        let expired = observed.as_ref().is_some_and(|o| o.at.elapsed() >= self.config.lease_duration);
        if holder.is_some() && !held_by_me && !expired {
            debug!(holder = ?holder, "the Lease is held by another candidate");
            return Ok(false);
        }

        if !held_by_me {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(me.to_string());
        spec.lease_duration_seconds = Some(duration);
        spec.renew_time = Some(now);
        // `replace` sends the resourceVersion we read: a concurrent writer makes this a 409.
        match self.api.replace(&self.config.lease_name, &PostParams::default(), &lease).await {
            Ok(written) => {
                let spec = written.spec.unwrap_or_default();
                *observed =
                    Some(Observed { holder: spec.holder_identity, renew_time: spec.renew_time, at: Instant::now() });
                Ok(true)
            }
            Err(kube_client::Error::Api(status)) if status.is_conflict() => Ok(false),
            Err(err) => Err(err),
        }
    }
}
