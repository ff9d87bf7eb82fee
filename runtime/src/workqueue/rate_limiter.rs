//! Rate limiters, client-go's `default_rate_limiters.go`: how long a failed key waits.
//!
//! - [`ItemExponentialFailureRateLimiter`]: per key, `base * 2^failures`, capped.
//! - [`BucketRateLimiter`]: one token bucket for all keys, on `governor`.
//! - [`MaxOfRateLimiter`]: the longest wait of several limiters.
//! - [`default_controller_rate_limiter`]: client-go's `DefaultControllerRateLimiter`.
//!
//! # The bucket books future tokens, as client-go's does
//!
//! client-go's bucket is `rate.Limiter.Reserve().Delay()`: every call takes a token, even one
//! that will only exist later, so with 10 per second and a burst of 100 the 101st failure in a
//! burst waits 100ms, the 102nd 200ms, and so on. That spreads a storm of failures over time.
//! A plain `governor` check takes nothing when it says "not yet", so every key rejected in the
//! same instant would be told the same ~100ms and they would all retry together. We keep client-go's
//! behaviour by running governor's GCRA over a state store that, on rejection, still advances the
//! theoretical arrival time by one interval: the rejected call has booked the next free slot.
//! The two are the same arithmetic (a token bucket of `b` tokens refilled every `T` is a GCRA with
//! tolerance `(b - 1) * T`); a test pins the sequence with governor's `FakeRelativeClock`, and
//! another pins the calling convention the booking relies on (one `measure_and_replace` per
//! `check`, with the stored time; nothing stored for a rejected cell), so a governor release
//! that changed it fails the tests instead of changing the delays.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use foldhash::fast::RandomState;
use governor::Quota;
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{NotKeyed, StateStore};

use super::error::Error;
use super::queue::Key;

/// Decides how long a key waits before it is retried.
pub trait RateLimiter<K>: Send + Sync {
    /// How long `key` should wait now. Each call counts as one failure of `key`.
    fn when(&self, key: &K) -> Duration;
    /// Stops tracking `key` (it succeeded): its next failure starts from the first delay.
    fn forget(&self, key: &K);
    /// How many times `key` has failed since it was last forgotten.
    fn num_requeues(&self, key: &K) -> u32;
}

impl<K, R: RateLimiter<K> + ?Sized> RateLimiter<K> for Arc<R> {
    fn when(&self, key: &K) -> Duration {
        (**self).when(key)
    }
    fn forget(&self, key: &K) {
        (**self).forget(key);
    }
    fn num_requeues(&self, key: &K) -> u32 {
        (**self).num_requeues(key)
    }
}

/// Per-key exponential backoff: the n-th failure in a row waits `base_delay * 2^(n-1)`, at most
/// `max_delay`. The default is client-go's controller default: 5ms doubling up to 1000s (about
/// 18 failures to reach the cap).
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<K> {
    base_delay: Duration,
    max_delay: Duration,
    failures: Mutex<HashMap<K, u32, RandomState>>,
}

impl<K> ItemExponentialFailureRateLimiter<K> {
    /// Backoff from `base_delay`, doubling per failure, capped at `max_delay`.
    pub fn new(base_delay: Duration, max_delay: Duration) -> Self {
        ItemExponentialFailureRateLimiter { base_delay, max_delay, failures: Mutex::new(HashMap::default()) }
    }
}

impl<K> Default for ItemExponentialFailureRateLimiter<K> {
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

impl<K: Clone + Eq + Hash + Send + Sync> RateLimiter<K> for ItemExponentialFailureRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        let exponent = {
            let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
            // Clone the key only on its first failure.
            match failures.get_mut(key) {
                Some(count) => {
                    let exponent = *count;
                    *count = count.saturating_add(1);
                    exponent
                }
                None => {
                    failures.insert(key.clone(), 1);
                    0
                }
            }
        };
        2u32.checked_pow(exponent)
            .and_then(|factor| self.base_delay.checked_mul(factor))
            .map_or(self.max_delay, |delay| delay.min(self.max_delay))
    }

    fn forget(&self, key: &K) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.remove(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.get(key).copied().unwrap_or(0)
    }
}

/// A `governor` clock that reads Tokio's clock, so paused-time tests drive the bucket too.
#[derive(Debug, Clone)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock { origin: tokio::time::Instant::now() }
    }
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.origin.elapsed())
    }
}

/// governor's direct state, except that a rejected cell still books the next slot (see the
/// module docs).
#[derive(Debug)]
struct BookingState {
    /// The theoretical arrival time of the next cell, relative to the limiter's start.
    tat: Mutex<Option<Nanos>>,
    /// One cell's weight: the quota's replenish interval, as governor's GCRA computes it.
    interval: Nanos,
}

impl StateStore for BookingState {
    type Key = NotKeyed;

    fn measure_and_replace<T, F, E>(&self, _key: &NotKeyed, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        let mut tat = self.tat.lock().unwrap_or_else(PoisonError::into_inner);
        match f(*tat) {
            Ok((outcome, next)) => {
                *tat = Some(next);
                Ok(outcome)
            }
            Err(rejected) => {
                // A rejection needs a previous cell, so `tat` is set.
                if let Some(tat) = tat.as_mut() {
                    *tat = *tat + self.interval;
                }
                Err(rejected)
            }
        }
    }
}

type Bucket<C> = governor::RateLimiter<NotKeyed, BookingState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// One token bucket shared by all keys: it limits the overall retry rate. Default: client-go's
/// 10 per second with a burst of 100. Every call takes a token, booking a future one when the
/// bucket is empty (see the module docs); it never tracks keys.
pub struct BucketRateLimiter<C: Clock = TokioClock> {
    bucket: Bucket<C>,
}

impl BucketRateLimiter {
    /// A bucket with `quota`, on Tokio's clock.
    pub fn new(quota: Quota) -> Self {
        Self::with_clock(quota, TokioClock::default())
    }

    /// A bucket refilled at `qps` tokens per second holding at most `burst`, like client-go's
    /// `rate.NewLimiter(rate.Limit(qps), burst)`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRate`] if `qps` is not a positive finite number, [`Error::ZeroBurst`] if
    /// `burst` is 0.
    pub fn per_second(qps: f64, burst: u32) -> Result<Self, Error> {
        let burst = NonZeroU32::new(burst).ok_or(Error::ZeroBurst)?;
        let interval = (qps.is_finite() && qps > 0.0)
            .then(|| Duration::try_from_secs_f64(1.0 / qps).ok())
            .flatten()
            .ok_or(Error::InvalidRate { qps })?;
        let quota = Quota::with_period(interval).ok_or(Error::InvalidRate { qps })?;
        Ok(Self::new(quota.allow_burst(burst)))
    }
}

impl Default for BucketRateLimiter {
    fn default() -> Self {
        // client-go: rate.NewLimiter(rate.Limit(10), 100): a storm of 100 failures passes at
        // once, then retries are spread at 10 per second.
        const BURST: NonZeroU32 = NonZeroU32::new(100).expect("100 is not zero");
        const QPS: NonZeroU32 = NonZeroU32::new(10).expect("10 is not zero");
        Self::new(Quota::per_second(QPS).allow_burst(BURST))
    }
}

impl<C: Clock> BucketRateLimiter<C> {
    /// A bucket with `quota` on `clock` (a `governor::clock::FakeRelativeClock` in tests).
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        let interval = Nanos::from(quota.replenish_interval().max(Duration::from_nanos(1)));
        let state = BookingState { tat: Mutex::new(None), interval };
        BucketRateLimiter { bucket: governor::RateLimiter::new(quota, state, clock) }
    }
}

impl<C: Clock> fmt::Debug for BucketRateLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter").finish_non_exhaustive()
    }
}

impl<K, C> RateLimiter<K> for BucketRateLimiter<C>
where
    C: Clock + Send + Sync,
    C::Instant: Send + Sync,
{
    fn when(&self, _key: &K) -> Duration {
        match self.bucket.check() {
            Ok(()) => Duration::ZERO,
            Err(not_until) => not_until.wait_time_from(self.bucket.clock().now()),
        }
    }

    fn forget(&self, _key: &K) {}

    fn num_requeues(&self, _key: &K) -> u32 {
        0
    }
}

/// The longest wait of several limiters; every limiter sees every call.
pub struct MaxOfRateLimiter<K> {
    limiters: Vec<Arc<dyn RateLimiter<K>>>,
}

impl<K> MaxOfRateLimiter<K> {
    /// Combines `limiters`; with none, every wait is zero.
    pub fn new(limiters: Vec<Arc<dyn RateLimiter<K>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

/// Same as [`MaxOfRateLimiter::new`], under client-go's name.
pub fn max_of<K>(limiters: Vec<Arc<dyn RateLimiter<K>>>) -> MaxOfRateLimiter<K> {
    MaxOfRateLimiter::new(limiters)
}

impl<K> fmt::Debug for MaxOfRateLimiter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter").field("limiters", &self.limiters.len()).finish()
    }
}

impl<K> RateLimiter<K> for MaxOfRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        // Ask all of them: each one counts the failure or books its token.
        self.limiters.iter().map(|limiter| limiter.when(key)).fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, key: &K) {
        for limiter in &self.limiters {
            limiter.forget(key);
        }
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.limiters.iter().map(|limiter| limiter.num_requeues(key)).max().unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`: the longer of a per-key exponential backoff
/// (5ms doubling, capped at 1000s) and an overall bucket (10 per second, burst 100).
pub fn default_controller_rate_limiter<K: Key>() -> MaxOfRateLimiter<K> {
    MaxOfRateLimiter::new(vec![
        Arc::new(ItemExponentialFailureRateLimiter::<K>::default()),
        Arc::new(BucketRateLimiter::default()),
    ])
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn whens<R: RateLimiter<&'static str>>(limiter: &R, key: &'static str, n: usize) -> Vec<Duration> {
        (0..n).map(|_| limiter.when(&key)).collect()
    }

    #[test]
    fn exponential_backoff_doubles_from_5ms() {
        let limiter = ItemExponentialFailureRateLimiter::default();
        assert_eq!(whens(&limiter, "a", 5), [5 * MS, 10 * MS, 20 * MS, 40 * MS, 80 * MS]);
        assert_eq!(limiter.num_requeues(&"a"), 5);
    }

    #[test]
    fn exponential_backoff_is_capped_at_1000s() {
        let limiter = ItemExponentialFailureRateLimiter::default();
        let delays = whens(&limiter, "a", 40);
        // 5ms * 2^17 = 655.36s, 5ms * 2^18 = 1310.72s > 1000s.
        assert_eq!(delays[17], Duration::from_millis(655_360));
        assert!(delays[18..].iter().all(|delay| *delay == Duration::from_secs(1000)));
    }

    #[test]
    fn exponential_backoff_never_overflows() {
        let limiter = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
        assert_eq!(whens(&limiter, "a", 3), [Duration::MAX; 3]);
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
        assert_eq!(whens(&limiter, "a", 100)[99], Duration::from_secs(1));
    }

    #[test]
    fn exponential_backoff_is_per_key() {
        let limiter = ItemExponentialFailureRateLimiter::default();
        whens(&limiter, "a", 3);
        assert_eq!(limiter.when(&"b"), 5 * MS);
        assert_eq!(limiter.num_requeues(&"a"), 3);
        assert_eq!(limiter.num_requeues(&"b"), 1);
    }

    #[test]
    fn forget_resets_the_backoff() {
        let limiter = ItemExponentialFailureRateLimiter::default();
        whens(&limiter, "a", 3);
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.when(&"a"), 5 * MS);
    }

    fn bucket(qps: u32, burst: u32) -> (BucketRateLimiter<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        let quota = Quota::per_second(NonZeroU32::new(qps).unwrap()).allow_burst(NonZeroU32::new(burst).unwrap());
        (BucketRateLimiter::with_clock(quota, clock.clone()), clock)
    }

    /// The booking relies on how governor calls a state store: `check` calls
    /// `measure_and_replace` exactly once, with the stored theoretical arrival time (none for
    /// the first cell), and stores only what an accepted cell returns. A governor that called
    /// it twice, or retried a rejection, would book twice; this pins the convention.
    #[test]
    fn governor_calls_the_state_store_once_per_check_with_the_stored_time() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        #[derive(Debug, Default)]
        struct Recording {
            calls: AtomicUsize,
            seen: Mutex<Vec<Option<Nanos>>>,
            tat: Mutex<Option<Nanos>>,
        }
        impl StateStore for Recording {
            type Key = NotKeyed;
            fn measure_and_replace<T, F, E>(&self, _key: &NotKeyed, f: F) -> Result<T, E>
            where
                F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
            {
                self.calls.fetch_add(1, Ordering::SeqCst);
                let mut tat = self.tat.lock().unwrap();
                self.seen.lock().unwrap().push(*tat);
                let (outcome, next) = f(*tat)?;
                *tat = Some(next);
                Ok(outcome)
            }
        }

        let quota = Quota::per_second(NonZeroU32::new(10).unwrap()).allow_burst(NonZeroU32::new(2).unwrap());
        let limiter: governor::RateLimiter<NotKeyed, Recording, FakeRelativeClock, NoOpMiddleware<Nanos>> =
            governor::RateLimiter::new(quota, Recording::default(), FakeRelativeClock::default());
        let results: Vec<bool> = (0..4).map(|_| limiter.check().is_ok()).collect();
        assert_eq!(results, [true, true, false, false], "a burst of 2, then rejections");
        let store = limiter.into_state_store();
        assert_eq!(store.calls.load(Ordering::SeqCst), 4, "one call per check");
        let seen = store.seen.lock().unwrap().clone();
        assert_eq!(seen[0], None, "the first cell finds no stored time");
        assert!(seen[1].is_some() && seen[1] != seen[2], "an accepted cell stored its time");
        assert_eq!(seen[2], seen[3], "a rejected cell stored nothing");
    }

    #[test]
    fn the_bucket_lets_a_burst_through_then_books_one_slot_per_call() {
        let (limiter, _clock) = bucket(10, 100);
        let delays = whens(&limiter, "a", 103);
        assert!(delays[..100].iter().all(Duration::is_zero));
        assert_eq!(delays[100..], [100 * MS, 200 * MS, 300 * MS]);
    }

    #[test]
    fn the_bucket_counts_booked_slots_against_later_calls() {
        let (limiter, clock) = bucket(10, 100);
        whens(&limiter, "a", 103); // booked up to 300ms
        clock.advance(100 * MS);
        // At 100ms the token refilled so far belongs to the 101st call: wait for the 4th slot.
        assert_eq!(limiter.when(&"b"), 300 * MS);
        clock.advance(Duration::from_secs(60));
        // A minute later the bucket is full again.
        assert!(whens(&limiter, "c", 100).iter().all(Duration::is_zero));
        assert_eq!(limiter.when(&"d"), 100 * MS);
    }

    #[test]
    fn the_bucket_tracks_no_keys() {
        let (limiter, _clock) = bucket(1, 1);
        whens(&limiter, "a", 3);
        limiter.forget(&"a");
        assert_eq!(RateLimiter::<&str>::num_requeues(&limiter, &"a"), 0);
        assert_eq!(limiter.when(&"a"), Duration::from_secs(3), "forget returns no token");
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_bucket_runs_on_tokio_time() {
        let limiter = BucketRateLimiter::default();
        let delays = whens(&limiter, "a", 101);
        assert_eq!(delays[100], 100 * MS);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(limiter.when(&"a"), Duration::ZERO);
    }

    #[test]
    fn per_second_takes_client_go_style_numbers() {
        assert!(BucketRateLimiter::per_second(10.0, 100).is_ok());
        assert!(BucketRateLimiter::per_second(0.5, 1).is_ok());
        assert_eq!(BucketRateLimiter::per_second(0.0, 100).unwrap_err(), Error::InvalidRate { qps: 0.0 });
        assert!(BucketRateLimiter::per_second(f64::NAN, 100).is_err());
        assert!(BucketRateLimiter::per_second(-1.0, 100).is_err());
        assert_eq!(BucketRateLimiter::per_second(10.0, 0).unwrap_err(), Error::ZeroBurst);
    }

    #[test]
    fn max_of_returns_the_longest_wait_and_asks_every_limiter() {
        let (bucket, _clock) = bucket(1, 1);
        let limiter = max_of::<&str>(vec![Arc::new(ItemExponentialFailureRateLimiter::default()), Arc::new(bucket)]);
        assert_eq!(limiter.when(&"a"), 5 * MS, "exponential 5ms, bucket 0");
        assert_eq!(limiter.when(&"a"), Duration::from_secs(1), "bucket booked");
        assert_eq!(limiter.num_requeues(&"a"), 2);
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
    }

    #[test]
    fn max_of_nothing_never_waits() {
        let limiter = MaxOfRateLimiter::<&str>::new(Vec::new());
        assert_eq!(limiter.when(&"a"), Duration::ZERO);
        assert_eq!(limiter.num_requeues(&"a"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_controller_rate_limiter_is_exponential_until_the_bucket_runs_out() {
        let limiter = default_controller_rate_limiter::<u32>();
        assert_eq!(limiter.when(&1), 5 * MS);
        assert_eq!(limiter.when(&1), 10 * MS);
        for key in 2..100 {
            assert_eq!(limiter.when(&key), 5 * MS);
        }
        // 101st token: the bucket wants 100ms, more than key 100's 5ms.
        assert_eq!(limiter.when(&100), 100 * MS);
    }
}
