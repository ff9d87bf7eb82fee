//! API request metrics, with the names and labels client-go registers (`k8s.io/client-go/tools/metrics`
//! as wired by `component-base`), so existing dashboards work:
//!
//! - `rest_client_requests_total{code, method, host}`: every attempt, by HTTP status code, or
//!   `<error>` when no answer came (connection refused, reset, timeout);
//! - `rest_client_request_duration_seconds{verb, host}`: the time from sending a request to its
//!   answer's headers (for a watch, until the stream opens), client-go's buckets;
//! - `rest_client_writes_total{method, resource}`: ours, not client-go's: every attempt to
//!   write (POST, PUT, PATCH, DELETE), by the resource the path names, as kubectl names it
//!   (`deployments.apps`, `services`, with its subresource: `databases.example.com/status`).
//!   What an operator writes, by kind, is what tells a hot loop or an apply war from the
//!   status updates a running fleet causes.
//!
//! The throttle's wait is not part of the duration: the layer sits below it.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use http::{Method, Request, Response};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

/// client-go's `rest_client_request_duration_seconds` buckets (component-base's
/// `requestLatency`): 5 ms to 60 s.
const BUCKETS: [f64; 12] = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];

/// An answer's status code, or no answer at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Code {
    Status(u16),
    /// client-go's label value when the request got no response.
    Error,
}

impl EncodeLabelValue for Code {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        match self {
            Code::Status(code) => EncodeLabelValue::encode(code, encoder),
            Code::Error => EncodeLabelValue::encode(&"<error>", encoder),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    code: Code,
    method: Cow<'static, str>,
    host: Arc<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DurationLabels {
    verb: Cow<'static, str>,
    host: Arc<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WriteLabels {
    method: Cow<'static, str>,
    resource: String,
}

type Histograms = Family<DurationLabels, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The request metrics of one or more clients; clones share the series.
///
/// Create it before the client ([`super::from_config`] records into it) and register it in the
/// registry `/metrics` serves.
#[derive(Debug, Clone)]
pub struct RequestMetrics {
    requests: Family<RequestLabels, Counter>,
    durations: Histograms,
    writes: Family<WriteLabels, Counter>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            durations: Family::new_with_constructor(histogram),
            writes: Family::default(),
        }
    }
}

impl RequestMetrics {
    /// Adds the series to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, broken down by verb and host",
            self.durations.clone(),
        );
        registry.register(
            "rest_client_writes",
            "Number of write requests (POST, PUT, PATCH, DELETE), partitioned by method and resource",
            self.writes.clone(),
        );
    }

    /// The layer that records the requests to `host` (the apiserver's `host:port`).
    pub fn layer(&self, host: String) -> RequestMetricsLayer {
        RequestMetricsLayer { metrics: self.clone(), host: Arc::new(host) }
    }

    /// Attempts answered with `code` (`None`: no answer) and `method`, for tests and probes.
    pub fn requests(&self, code: Option<u16>, method: &Method, host: &str) -> u64 {
        let code = code.map_or(Code::Error, Code::Status);
        let labels = RequestLabels { code, method: method_name(method), host: Arc::new(host.to_string()) };
        self.requests.get(&labels).map_or(0, |counter| counter.get())
    }

    /// Write attempts with `method` to `resource` (`deployments.apps`, `databases.example.com/status`).
    pub fn writes(&self, method: &Method, resource: &str) -> u64 {
        let labels = WriteLabels { method: method_name(method), resource: resource.to_string() };
        self.writes.get(&labels).map_or(0, |counter| counter.get())
    }

    fn record(&self, method: &Method, host: &Arc<String>, code: Code, started: Instant, resource: Option<String>) {
        let verb = method_name(method);
        if let Some(resource) = resource {
            self.writes.get_or_create(&WriteLabels { method: verb.clone(), resource }).inc();
        }
        self.requests.get_or_create(&RequestLabels { code, method: verb.clone(), host: host.clone() }).inc();
        self.durations
            .get_or_create(&DurationLabels { verb, host: host.clone() })
            .observe(started.elapsed().as_secs_f64());
    }
}

/// The methods the Kubernetes API uses, without allocating a label for each request.
fn method_name(method: &Method) -> Cow<'static, str> {
    let name = match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        ref other => return Cow::Owned(other.as_str().to_string()),
    };
    Cow::Borrowed(name)
}

/// The resource a request to the Kubernetes API writes, as `plural.group[/subresource]`, or
/// `None` for a read or a path that is not a resource's.
fn written_resource(method: &Method, path: &str) -> Option<String> {
    if !matches!(*method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE) {
        return None;
    }
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    // `namespaces/NS/RESOURCE/...` is namespaced; `namespaces` or `namespaces/NAME` is the
    // namespaces resource itself.
    let rest = match rest {
        ["namespaces", _namespace, rest @ ..] if !rest.is_empty() => rest,
        _ => rest,
    };
    let (resource, subresource) = match rest {
        [resource] | [resource, _] => (*resource, None),
        [resource, _name, subresource, ..] => (*resource, Some(*subresource)),
        [] => return None,
    };
    let mut name = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
    if let Some(subresource) = subresource {
        name.push('/');
        name.push_str(subresource);
    }
    Some(name)
}

/// Records every request passing through it in [`RequestMetrics`].
#[derive(Debug, Clone)]
pub struct RequestMetricsLayer {
    metrics: RequestMetrics,
    host: Arc<String>,
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = Recorded<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Recorded { inner, metrics: self.metrics.clone(), host: self.host.clone() }
    }
}

/// The service [`RequestMetricsLayer`] builds.
#[derive(Debug, Clone)]
pub struct Recorded<S> {
    inner: S,
    metrics: RequestMetrics,
    host: Arc<String>,
}

impl<S, B, R> Service<Request<B>> for Recorded<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = RecordedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().clone();
        let resource = written_resource(&method, request.uri().path());
        RecordedFuture {
            inner: self.inner.call(request),
            record: Some((self.metrics.clone(), self.host.clone(), method, Instant::now(), resource)),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`Recorded`]: records the attempt when the answer (or the error)
    /// arrives. A request dropped before that is not counted, as in client-go.
    #[derive(Debug)]
    pub struct RecordedFuture<F> {
        #[pin]
        inner: F,
        record: Option<(RequestMetrics, Arc<String>, Method, Instant, Option<String>)>,
    }
}

impl<F, R, E> Future for RecordedFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        if let Some((metrics, host, method, started, resource)) = this.record.take() {
            let code = result.as_ref().map_or(Code::Error, |response| Code::Status(response.status().as_u16()));
            metrics.record(&method, &host, code, started, resource);
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    fn answering(status: u16) -> impl Service<Request<()>, Response = Response<()>, Error = &'static str> + Clone {
        tower::service_fn(move |_: Request<()>| async move {
            if status == 0 {
                Err("connection refused")
            } else {
                Ok(Response::builder().status(status).body(()).unwrap())
            }
        })
    }

    async fn send(metrics: &RequestMetrics, status: u16, method: Method) {
        let service = metrics.layer("10.0.0.1:6443".to_string()).layer(answering(status));
        let request = Request::builder().method(method).uri("/api/v1/pods").body(()).unwrap();
        let _ = service.oneshot(request).await;
    }

    fn scrape(metrics: &RequestMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[tokio::test]
    async fn every_attempt_is_counted_by_code_and_method() {
        let metrics = RequestMetrics::default();
        for (status, method) in [(200, Method::GET), (200, Method::GET), (429, Method::PATCH), (0, Method::GET)] {
            send(&metrics, status, method).await;
        }
        let host = "10.0.0.1:6443";
        assert_eq!(metrics.requests(Some(200), &Method::GET, host), 2);
        assert_eq!(metrics.requests(Some(429), &Method::PATCH, host), 1);
        assert_eq!(metrics.requests(None, &Method::GET, host), 1);
        assert_eq!(metrics.requests(Some(429), &Method::GET, host), 0);
    }

    #[tokio::test]
    async fn the_scrape_uses_client_go_names_and_labels() {
        let metrics = RequestMetrics::default();
        send(&metrics, 201, Method::POST).await;
        send(&metrics, 0, Method::DELETE).await;
        let text = scrape(&metrics);
        assert!(
            text.contains(r#"rest_client_requests_total{code="201",method="POST",host="10.0.0.1:6443"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"rest_client_requests_total{code="<error>",method="DELETE",host="10.0.0.1:6443"} 1"#));
        assert!(text.contains(r#"rest_client_request_duration_seconds_count{verb="POST",host="10.0.0.1:6443"} 1"#));
        assert!(text.contains(r#"rest_client_request_duration_seconds_bucket{le="0.005",verb="POST""#), "{text}");
    }

    #[test]
    fn an_unusual_method_keeps_its_name() {
        let method = Method::from_bytes(b"PROPFIND").unwrap();
        assert_eq!(method_name(&method), "PROPFIND");
        assert!(matches!(method_name(&Method::PATCH), Cow::Borrowed("PATCH")));
    }

    #[test]
    fn a_write_is_counted_by_the_resource_its_path_names() {
        let written = |method: Method, path: &str| written_resource(&method, path);
        assert_eq!(
            written(Method::PATCH, "/apis/apps/v1/namespaces/shop/deployments/orders"),
            Some("deployments.apps".into())
        );
        assert_eq!(written(Method::POST, "/api/v1/namespaces/shop/services"), Some("services".into()));
        assert_eq!(
            written(Method::PATCH, "/apis/example.com/v1/namespaces/shop/databases/orders/status"),
            Some("databases.example.com/status".into())
        );
        assert_eq!(written(Method::DELETE, "/api/v1/namespaces/shop"), Some("namespaces".into()));
        assert_eq!(written(Method::POST, "/api/v1/namespaces"), Some("namespaces".into()));
        assert_eq!(
            written(Method::PUT, "/apis/coordination.k8s.io/v1/namespaces/x/leases/l"),
            Some("leases.coordination.k8s.io".into())
        );
        assert_eq!(written(Method::GET, "/apis/apps/v1/deployments"), None, "a read");
        assert_eq!(written(Method::POST, "/version"), None);
    }

    #[tokio::test]
    async fn writes_are_counted_by_method_and_resource_and_reads_are_not() {
        let metrics = RequestMetrics::default();
        let service = metrics.layer("10.0.0.1:6443".to_string()).layer(answering(200));
        for (method, path) in [
            (Method::PATCH, "/apis/apps/v1/namespaces/a/deployments/x"),
            (Method::PATCH, "/apis/apps/v1/namespaces/b/deployments/y"),
            (Method::GET, "/apis/apps/v1/namespaces/b/deployments/y"),
        ] {
            let request = Request::builder().method(method).uri(path).body(()).unwrap();
            let _ = service.clone().oneshot(request).await;
        }
        assert_eq!(metrics.writes(&Method::PATCH, "deployments.apps"), 2);
        assert_eq!(metrics.writes(&Method::GET, "deployments.apps"), 0);
        assert!(
            scrape(&metrics).contains("rest_client_writes_total{method=\"PATCH\",resource=\"deployments.apps\"} 2")
        );
    }
}
