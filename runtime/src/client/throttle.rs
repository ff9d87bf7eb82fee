//! Client-side throttling of every API request: one token bucket (governor) shared by all
//! requests of a client, `--kube-api-qps` tokens a second up to `--kube-api-burst`, like
//! client-go's `rest.Config{QPS, Burst}`.
//!
//! The wait happens in `poll_ready`, so a request is not even started until it has a token;
//! callers queue in order behind the bucket, as with client-go's `tokenBucketRateLimiter`.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tower::{Layer, Service};

/// A tower layer that throttles requests with one shared token bucket.
#[derive(Debug, Clone)]
pub struct ThrottleLayer {
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

impl ThrottleLayer {
    /// `qps` tokens a second, at most `burst` at once. A `qps` of 0 or less disables throttling
    /// (client-go treats a negative QPS the same way).
    pub fn new(qps: f32, burst: u32) -> Self {
        if qps <= 0.0 {
            return Self { limiter: None };
        }
        let burst = NonZeroU32::new(burst.max(1)).expect("max(1) is never zero");
        let period = std::time::Duration::from_secs_f64(1.0 / f64::from(qps));
        let quota = Quota::with_period(period).expect("a positive qps gives a non-zero period").allow_burst(burst);
        Self { limiter: Some(Arc::new(RateLimiter::direct(quota))) }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Throttle { inner, limiter: self.limiter.clone(), wait: None, permitted: false }
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The service [`ThrottleLayer`] builds.
pub struct Throttle<S> {
    inner: S,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    wait: Option<Wait>,
    permitted: bool,
}

impl<S> std::fmt::Debug for Throttle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Throttle").field("permitted", &self.permitted).finish_non_exhaustive()
    }
}

impl<S, Request> Service<Request> for Throttle<S>
where
    S: Service<Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let (Some(limiter), false) = (&self.limiter, self.permitted) {
            let wait = self.wait.get_or_insert_with(|| {
                let limiter = limiter.clone();
                Box::pin(async move { limiter.until_ready().await })
            });
            ready!(wait.as_mut().poll(cx));
            self.wait = None;
            self.permitted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::time::{Duration, Instant};
    use tower::ServiceExt;

    #[tokio::test]
    async fn requests_beyond_the_burst_wait_for_tokens() {
        let service = tower::service_fn(|()| async { Ok::<_, Infallible>(()) });
        let mut throttled = ThrottleLayer::new(50.0, 5).layer(service);
        let started = Instant::now();
        for _ in 0..10 {
            throttled.ready().await.unwrap().call(()).await.unwrap();
        }
        // 5 from the burst at once, then 5 more at 50/s: at least ~80 ms. Not a timing
        // assertion on speed, a lower bound that holds on any machine.
        assert!(started.elapsed() >= Duration::from_millis(80), "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn zero_qps_disables_throttling() {
        let service = tower::service_fn(|()| async { Ok::<_, Infallible>(()) });
        let mut throttled = ThrottleLayer::new(0.0, 1).layer(service);
        for _ in 0..1000 {
            throttled.ready().await.unwrap().call(()).await.unwrap();
        }
    }
}
