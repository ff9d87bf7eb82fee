//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! Several replicas of the operator may run; only the one holding the Lease runs workers.
//! The others keep their informers' caches warm, so a new leader starts reconciling at once.
//!
//! - **Acquire**: every `retry_period`, a candidate reads the Lease. It takes the Lease when
//!   nobody holds it (absent, or `holderIdentity` empty after a release) or when the holder
//!   has not renewed it for the `leaseDurationSeconds` the holder wrote into the record (not
//!   this candidate's own setting: replicas may be configured differently during a rollout).
//!   "Not renewed" is judged by the candidate's own clock, from the moment it last saw the
//!   Lease record change (client-go's rule): clocks of different machines are never compared.
//! - **Renew**: the leader updates `renewTime` every `retry_period`. A failed attempt (an
//!   error, a 409 Conflict from a concurrent write) is retried at the next period; if it
//!   cannot renew for `renew_deadline` (shorter than `lease_duration`, so it gives up before
//!   anyone else may take over), or it sees another holder, it has lost the Lease:
//!   [`Elector::renew`] returns [`Ended::Lost`] and the caller must stop writing within
//!   `lease_duration - renew_deadline`.
//! - **Release**: on a clean shutdown the leader clears `holderIdentity`, so a candidate takes
//!   over at its next attempt instead of waiting out `lease_duration`.
//! - Writes use the Lease's resourceVersion (optimistic concurrency): two candidates that race
//!   for the same expired Lease cannot both win.
//! - The configuration is checked as client-go's `NewLeaderElector` checks it
//!   ([`Config::validate`]): `lease_duration > renew_deadline > 1.2 × retry_period > 0`.
//! - Give the elector a client of its own ([`crate::client::for_leases`]): a renewal that waits
//!   behind the reconciles' requests in a shared throttle, or sits out a 429's retries, misses
//!   its deadline on a busy leader.

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

/// A [`Config`] client-go would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A duration is zero.
    #[error("--leader-elect-{0} must be greater than zero")]
    Zero(&'static str),
    /// The Lease would expire before its holder gives up renewing it.
    #[error(
        "--leader-elect-lease-duration ({lease_duration:?}) must be greater than --leader-elect-renew-deadline ({renew_deadline:?})"
    )]
    LeaseNotLongerThanRenewDeadline {
        /// The lease duration.
        lease_duration: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
    },
    /// The leader would not get a jittered retry in before its deadline.
    #[error(
        "--leader-elect-renew-deadline ({renew_deadline:?}) must be greater than 1.2 × --leader-elect-retry-period ({retry_period:?})"
    )]
    RenewDeadlineNotLongerThanRetries {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The retry period.
        retry_period: Duration,
    },
}

/// client-go's `JitterFactor`: retries are jittered up to 1.2 × the retry period.
const JITTER_FACTOR: f64 = 1.2;

impl Config {
    /// Checks the durations as client-go's `NewLeaderElector` does.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the flag to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, duration) in [
            ("lease-duration", self.lease_duration),
            ("renew-deadline", self.renew_deadline),
            ("retry-period", self.retry_period),
        ] {
            if duration.is_zero() {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(ConfigError::RenewDeadlineNotLongerThanRetries {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// How long the caller has, once [`Elector::renew`] returned [`Ended::Lost`], before another
    /// replica may hold the Lease: in-flight writes must end within it.
    pub fn stop_writing_within(&self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline)
    }

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
    /// The holder's `leaseDurationSeconds`: how long its silence keeps others out.
    lease_duration: Duration,
    at: Instant,
}

impl Observed {
    fn of(spec: &LeaseSpec, fallback: Duration) -> Self {
        let lease_duration = spec
            .lease_duration_seconds
            .and_then(|seconds| u64::try_from(seconds).ok())
            .filter(|seconds| *seconds > 0)
            .map_or(fallback, Duration::from_secs);
        Self {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.clone(),
            lease_duration,
            at: Instant::now(),
        }
    }

    fn expired(&self) -> bool {
        self.at.elapsed() >= self.lease_duration
    }
}

/// The outcome of one attempt to acquire or renew.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    /// This candidate holds the Lease.
    Held,
    /// Another candidate holds it (and it has not expired).
    HeldByOther,
    /// A concurrent write won (409): try again at the next period.
    Conflict,
}

impl Elector {
    /// A candidate for `config.lease_name` using `client` (best a client of its own:
    /// [`crate::client::for_leases`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the durations are ones client-go would refuse ([`Config::validate`]).
    pub fn new(client: Client, config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self { api: Api::namespaced(client, &config.lease_namespace), config })
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
                Ok(Attempt::Held) => {
                    info!(lease = %self.config.lease_name, identity = %self.config.identity, "became leader");
                    return true;
                }
                Ok(Attempt::HeldByOther | Attempt::Conflict) => {}
                Err(err) => warn!(error = %err, "leader election: reading or writing the Lease failed"),
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    /// Renews the Lease every `retry_period` until `cancel` fires ([`Ended::Cancelled`]), a
    /// renewal has not succeeded for `renew_deadline`, or another holder is seen
    /// ([`Ended::Lost`]). Failed attempts, 409 Conflicts among them, are retried.
    ///
    /// # Cancellation safety
    ///
    /// Safe: dropping it stops renewing; the Lease then expires unless [`Elector::release`]d.
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
                Ok(Ok(Attempt::Held)) => last_renewed = Instant::now(),
                Ok(Ok(Attempt::HeldByOther)) => {
                    warn!(lease = %self.config.lease_name, "leader election: another candidate holds the Lease");
                    return Ended::Lost;
                }
                Ok(Ok(Attempt::Conflict)) => {
                    debug!(lease = %self.config.lease_name, "leader election: the renewal met a concurrent write; retrying")
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

    /// One attempt.
    async fn try_acquire_or_renew(
        &self,
        observed: &mut Option<Observed>,
        leading: bool,
    ) -> Result<Attempt, kube_client::Error> {
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
                Ok(_) => Ok(Attempt::Held),
                Err(kube_client::Error::Api(status)) if status.is_already_exists() => Ok(Attempt::Conflict),
                Err(err) => Err(err),
            };
        };

        let spec = lease.spec.get_or_insert_with(Default::default);
        let seen = Observed::of(spec, self.config.lease_duration);
        let holder = seen.holder.clone();
        // Track when the record last changed, by our clock.
        let changed = observed.as_ref().is_none_or(|o| o.holder != seen.holder || o.renew_time != seen.renew_time);
        if changed {
            *observed = Some(seen);
        }
        let held_by_me = holder.as_deref() == Some(me);
        if leading && !held_by_me {
            return Ok(Attempt::HeldByOther);
        }
        let expired = observed.as_ref().is_some_and(Observed::expired);
        if holder.is_some() && !held_by_me && !expired {
            debug!(holder = ?holder, "the Lease is held by another candidate");
            return Ok(Attempt::HeldByOther);
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
                *observed = Some(Observed::of(&written.spec.unwrap_or_default(), self.config.lease_duration));
                Ok(Attempt::Held)
            }
            Err(kube_client::Error::Api(status)) if status.is_conflict() => Ok(Attempt::Conflict),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lease: u64, renew: u64, retry_millis: u64) -> Config {
        let mut config = Config::new("lease", "ns", "me");
        config.lease_duration = Duration::from_secs(lease);
        config.renew_deadline = Duration::from_secs(renew);
        config.retry_period = Duration::from_millis(retry_millis);
        config
    }

    #[test]
    fn controller_runtime_defaults_are_valid() {
        assert_eq!(Config::new("lease", "ns", "me").validate(), Ok(()));
        assert_eq!(Config::new("lease", "ns", "me").stop_writing_within(), Duration::from_secs(5));
    }

    #[test]
    fn configurations_client_go_refuses_are_refused_naming_the_flags() {
        let err = config(10, 10, 2000).validate().unwrap_err();
        assert!(matches!(err, ConfigError::LeaseNotLongerThanRenewDeadline { .. }), "{err}");
        assert!(err.to_string().contains("--leader-elect-lease-duration"), "{err}");
        // 1.2 × 2 s = 2.4 s: a renew deadline of 2 s leaves no jittered retry.
        let err = config(15, 2, 2000).validate().unwrap_err();
        assert!(matches!(err, ConfigError::RenewDeadlineNotLongerThanRetries { .. }), "{err}");
        assert_eq!(config(15, 10, 0).validate(), Err(ConfigError::Zero("retry-period")));
        assert_eq!(config(3, 2, 1000).validate(), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_is_judged_by_the_duration_the_holder_wrote_not_our_own() {
        let spec =
            LeaseSpec { holder_identity: Some("other".into()), lease_duration_seconds: Some(40), ..Default::default() };
        // Our own setting is 15 s; the holder asked for 40 s.
        let seen = Observed::of(&spec, Duration::from_secs(15));
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(!seen.expired(), "20 s of silence is within the holder's 40 s");
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(seen.expired());
        // A record without a duration falls back to ours.
        let seen = Observed::of(&LeaseSpec::default(), Duration::from_secs(15));
        tokio::time::advance(Duration::from_secs(15)).await;
        assert!(seen.expired());
    }
}
