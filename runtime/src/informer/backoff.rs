//! The reflector's retry delays: client-go's reflector backoff, constant for constant.
//!
//! client-go's reflector once retried every second; it now uses
//! `NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)` to cut the load on an unhealthy
//! apiserver by ~98%. The same here: the base delay starts at 800 ms and doubles per failure up to
//! 30 s; each delay adds a uniform jitter of up to one base (factor 1.0), so the delays are
//! `[0.8, 1.6) s, [1.6, 3.2) s, ...` and settle in `[30, 60) s`, spreading a fleet of informers
//! that failed together. After 2 minutes without a failure the apiserver is taken as healthy again
//! and the next failure starts over at 800 ms.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// The first delay.
const INITIAL: Duration = Duration::from_millis(800);
/// The largest base delay (jitter comes on top).
const MAX: Duration = Duration::from_secs(30);
/// How long without failures resets the delay to [`INITIAL`].
const RESET_AFTER: Duration = Duration::from_secs(120);
/// Jitter as a fraction of the base delay.
const JITTER: f64 = 1.0;

/// Exponential backoff with jitter and a reset after a healthy period.
pub(crate) struct Backoff {
    next: Duration,
    /// When the last delay ends: health is measured from then, not from the failure.
    healthy_since: Option<Instant>,
    random: Box<dyn FnMut() -> f64 + Send>,
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff").field("next", &self.next).field("healthy_since", &self.healthy_since).finish()
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::with_random(rand::random::<f64>)
    }
}

impl Backoff {
    /// A backoff whose jitter draws from `random` (values in `[0, 1)`), for tests.
    pub(crate) fn with_random(random: impl FnMut() -> f64 + Send + 'static) -> Self {
        Backoff { next: INITIAL, healthy_since: None, random: Box::new(random) }
    }

    /// The delay to wait after a failure at `now`.
    pub(crate) fn next_delay(&mut self, now: Instant) -> Duration {
        if self.healthy_since.is_some_and(|since| now.saturating_duration_since(since) >= RESET_AFTER) {
            self.next = INITIAL;
        }
        let base = self.next;
        self.next = (base * 2).min(MAX);
        let jitter = base.mul_f64(JITTER * (self.random)().clamp(0.0, 1.0));
        let delay = base + jitter;
        self.healthy_since = Some(now + delay);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(delays: &[Duration]) -> Vec<f64> {
        delays.iter().map(|d| (d.as_secs_f64() * 10.0).round() / 10.0).collect()
    }

    #[test]
    fn delays_double_from_800ms_and_cap_at_30s() {
        let mut backoff = Backoff::with_random(|| 0.0);
        let now = Instant::now();
        let delays: Vec<_> = (0..8).map(|_| backoff.next_delay(now)).collect();
        assert_eq!(secs(&delays), [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]);
    }

    #[test]
    fn jitter_adds_at_most_one_base_delay() {
        let mut backoff = Backoff::with_random(|| 0.999);
        let now = Instant::now();
        let delays: Vec<_> = (0..8).map(|_| backoff.next_delay(now)).collect();
        assert_eq!(secs(&delays), [1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 60.0, 60.0]);
        let mut backoff = Backoff::default();
        for base in [0.8, 1.6, 3.2, 6.4] {
            let delay = backoff.next_delay(now).as_secs_f64();
            assert!((base..base * 2.0).contains(&delay), "{delay} not in [{base}, {})", base * 2.0);
        }
    }

    #[test]
    fn two_minutes_of_health_reset_the_delay() {
        let mut backoff = Backoff::with_random(|| 0.0);
        let start = Instant::now();
        for _ in 0..5 {
            backoff.next_delay(start);
        }
        let last_end = start + Duration::from_secs_f64(12.8);
        // Failing again within two minutes of the last retry continues the sequence...
        assert_eq!(backoff.next_delay(last_end + Duration::from_secs(119)), Duration::from_secs_f64(25.6));
        // ...two healthy minutes after a retry start it over.
        let later = last_end + Duration::from_secs(119) + Duration::from_secs_f64(25.6) + RESET_AFTER;
        assert_eq!(backoff.next_delay(later), INITIAL);
    }
}
