//! The Kubernetes API client every part of the operator shares: kube-client's HTTP stack,
//! wrapped the way client-go's `rest.Config` behaves.
//!
//! ```text
//! request ─> retry (429/503/504, Retry-After) ─> throttle (QPS/burst) ─> metrics ─> kube-client ─> apiserver
//! ```
//!
//! - [`throttle`]: one token bucket for every request, `--kube-api-qps` and `--kube-api-burst`.
//! - retries: kube-client's [`RetryPolicy::server_retry`] (a 429, 503 or 504 is retried up to
//!   15 times; the wait is the answer's `Retry-After` when it gives one, else an exponential
//!   backoff from 5 ms). It sits outside the throttle, so a retry waits for a token like any
//!   request, as client-go's retries do. kube-client's own retry layer sits inside its stack,
//!   where neither the throttle nor the metrics would see the attempts: it is turned off.
//! - [`metrics`]: every attempt is counted by code and timed, with client-go's metric names;
//!   a 429 that a retry then absorbed still shows in `rest_client_requests_total{code="429"}`.
//!
//! A reconcile sees a 429 only when the retries ran out; the controller's worker then requeues
//! the key after the server's `Retry-After` ([`retry_after`],
//! [`crate::controller::ReconcileError`]).

use std::ffi::OsStr;
use std::path::PathBuf;

use kube_client::Client;
use kube_client::client::ClientBuilder;
use kube_client::client::retry::RetryPolicy;
use kube_client::config::{Config, KubeConfigOptions, Kubeconfig};
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;

pub mod metrics;
pub mod throttle;

pub use metrics::RequestMetrics;

/// How long the apiserver asked to wait when it answered 429 Too Many Requests (API Priority
/// and Fairness): its `Retry-After` (`details.retryAfterSeconds`), at least one second.
pub fn retry_after(error: &kube_client::Error) -> Option<std::time::Duration> {
    let kube_client::Error::Api(status) = error else { return None };
    (status.code == 429).then(|| {
        let seconds = status.details.as_ref().map_or(0, |d| d.retry_after_seconds).max(1);
        std::time::Duration::from_secs(u64::from(seconds))
    })
}

/// Requests waiting for the throttle or the connection, beyond which callers wait to enqueue.
/// The same bound kube-client's `Client` puts on its own buffer.
const BUFFER: usize = 1024;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable cluster configuration.
    #[error("cannot load a Kubernetes configuration: {0}; pass --kubeconfig, set KUBECONFIG, or run in a cluster")]
    Config(String),
    /// The configuration was loaded but a client cannot be built from it.
    #[error("cannot build a Kubernetes client: {0}")]
    Build(#[source] kube_client::Error),
}

/// How every request of a client is paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Requests a second (client-go's `rest.Config.QPS`); 0 or less turns throttling off.
    pub qps: f32,
    /// Requests at once above the steady rate (`rest.Config.Burst`).
    pub burst: u32,
}

/// Where a client's configuration came from; the binary logs it at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The pod's ServiceAccount: the apiserver at `KUBERNETES_SERVICE_HOST` and
    /// `KUBERNETES_SERVICE_PORT`, the token and CA mounted at
    /// `/var/run/secrets/kubernetes.io/serviceaccount`.
    InCluster,
    /// Kubeconfig files, merged in order as kubectl merges them, and the context asked for.
    Kubeconfig {
        /// The files; empty for the default `~/.kube/config`.
        paths: Vec<PathBuf>,
        /// `--context`, if given.
        context: Option<String>,
    },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InCluster => f.write_str("in-cluster configuration (service account)"),
            Self::Kubeconfig { paths, context } => {
                if paths.is_empty() {
                    f.write_str("kubeconfig ~/.kube/config")?;
                } else {
                    let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                    write!(f, "kubeconfig {}", paths.join(":"))?;
                }
                match context {
                    Some(context) => write!(f, ", context {context}"),
                    None => f.write_str(", current context"),
                }
            }
        }
    }
}

/// Loads the configuration with [`load_config`] and builds a client from it with
/// [`from_config`]. Returns where the configuration came from as well.
///
/// # Errors
///
/// [`Error::Config`] when no configuration can be loaded; [`Error::Build`] when it is unusable.
pub async fn load(
    kubeconfig: Option<&OsStr>,
    context: Option<&str>,
    limits: Limits,
    metrics: &RequestMetrics,
) -> Result<(Client, Source), Error> {
    let (config, source) = load_config(kubeconfig, context).await?;
    Ok((from_config(config, limits, metrics)?, source))
}

/// Loads the configuration from `kubeconfig` (one path, or several separated by ':' as in
/// `KUBECONFIG`, merged in order: the first file to set a value wins), else in-cluster, else
/// the default kubeconfig (with `context` when given).
///
/// # Errors
///
/// [`Error::Config`] when no configuration can be loaded.
pub async fn load_config(kubeconfig: Option<&OsStr>, context: Option<&str>) -> Result<(Config, Source), Error> {
    let options = KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
    let paths: Vec<PathBuf> = kubeconfig
        .map(|k| std::env::split_paths(k).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    let (config, source) = if paths.is_empty() {
        match Config::incluster() {
            Ok(config) if context.is_none() => (config, Source::InCluster),
            _ => (
                Config::from_kubeconfig(&options).await.map_err(|e| Error::Config(e.to_string()))?,
                Source::Kubeconfig { paths, context: options.context.clone() },
            ),
        }
    } else {
        let file = merge_kubeconfigs(&paths)?;
        let config = Config::from_custom_kubeconfig(file, &options).await.map_err(|e| Error::Config(e.to_string()))?;
        (config, Source::Kubeconfig { paths, context: options.context.clone() })
    };
    Ok((config, source))
}

/// Reads and merges kubeconfig files in order (kubectl's rule: the first to set a value wins).
fn merge_kubeconfigs(paths: &[PathBuf]) -> Result<Kubeconfig, Error> {
    let read =
        |path: &PathBuf| Kubeconfig::read_from(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())));
    let mut merged = read(&paths[0])?;
    for path in &paths[1..] {
        merged = merged.merge(read(path)?).map_err(|e| Error::Config(format!("merging {}: {e}", path.display())))?;
    }
    Ok(merged)
}

/// A client for `config`: every request throttled to `limits`, retried on 429, 503 and 504
/// as the server asks, and recorded in `metrics`.
///
/// # Errors
///
/// [`Error::Build`] when the configuration is unusable (a bad certificate, say).
///
/// # Panics
///
/// Outside a Tokio runtime: the client's buffers are tasks (as with kube-client's own
/// `ClientBuilder::build`).
pub fn from_config(mut config: Config, limits: Limits, metrics: &RequestMetrics) -> Result<Client, Error> {
    config.default_retry = false;
    let host = config.cluster_url.authority().map_or_else(String::new, ToString::to_string);
    let builder = ClientBuilder::try_from(config).map_err(Error::Build)?;
    Ok(builder
        .with_layer(&metrics.layer(host))
        .with_layer(&throttle::ThrottleLayer::new(limits.qps, limits.burst))
        // The retry layer clones the service it wraps for every attempt; kube-client's stack
        // cannot be cloned, a buffer in front of it can.
        .with_layer(&BufferLayer::new(BUFFER))
        .with_layer(&RetryLayer::new(RetryPolicy::server_retry()))
        .build())
}

/// A client of its own for leader election: no throttle shared with the reconciles' and
/// events' requests, so a renewal never waits behind them (the elector paces itself: at most a
/// read and a write every retry period), and no retries, so it never sits out a 429's
/// `Retry-After` past the renew deadline (the elector retries every retry period instead, as
/// client-go's does). Its requests are recorded in `metrics` too.
///
/// # Errors
///
/// [`Error::Build`] when the configuration is unusable.
///
/// # Panics
///
/// Outside a Tokio runtime, as [`from_config`].
pub fn for_leases(mut config: Config, metrics: &RequestMetrics) -> Result<Client, Error> {
    config.default_retry = false;
    let host = config.cluster_url.authority().map_or_else(String::new, ToString::to_string);
    let builder = ClientBuilder::try_from(config).map_err(Error::Build)?;
    Ok(builder.with_layer(&metrics.layer(host)).build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use http::{Method, Response};
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_client::Api;

    /// A fault-injecting apiserver stand-in: answers the first `throttled` requests with 429
    /// and `Retry-After: 1`, then a ConfigMap. Returns its address and when each request came.
    async fn throttling_server(throttled: usize) -> (std::net::SocketAddr, Arc<Mutex<Vec<Instant>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let arrivals = seen.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let arrivals = arrivals.clone();
                let service = service_fn(move |_request| {
                    let arrivals = arrivals.clone();
                    async move {
                        let count = {
                            let mut arrivals = arrivals.lock().unwrap();
                            arrivals.push(Instant::now());
                            arrivals.len()
                        };
                        let response = if count <= throttled {
                            let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":1}}"#;
                            Response::builder()
                                .status(429)
                                .header("Retry-After", "1")
                                .body(Full::new(Bytes::from(status)))
                        } else {
                            let config_map = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"settings","namespace":"ns"}}"#;
                            Response::builder().status(200).body(Full::new(Bytes::from(config_map)))
                        };
                        Ok::<_, std::convert::Infallible>(response.unwrap())
                    }
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
            }
        });
        (address, seen)
    }

    fn client_for(address: std::net::SocketAddr, metrics: &RequestMetrics) -> Client {
        let config = Config::new(format!("http://{address}").parse().unwrap());
        from_config(config, Limits { qps: 0.0, burst: 1 }, metrics).unwrap()
    }

    #[tokio::test]
    async fn a_429_is_retried_after_the_servers_retry_after_and_every_attempt_is_counted() {
        let (address, arrivals) = throttling_server(2).await;
        let metrics = RequestMetrics::default();
        let config_maps: Api<ConfigMap> = Api::namespaced(client_for(address, &metrics), "ns");

        let config_map = config_maps.get("settings").await.expect("the third attempt succeeds");

        assert_eq!(config_map.metadata.name.as_deref(), Some("settings"));
        let arrivals = arrivals.lock().unwrap().clone();
        assert_eq!(arrivals.len(), 3, "two 429s, then the answer");
        for pair in arrivals.windows(2) {
            // A lower bound the retry must respect on any machine, not a speed assertion.
            assert!(pair[1] - pair[0] >= Duration::from_millis(990), "retried after {:?}", pair[1] - pair[0]);
        }
        let host = address.to_string();
        assert_eq!(metrics.requests(Some(429), &Method::GET, &host), 2);
        assert_eq!(metrics.requests(Some(200), &Method::GET, &host), 1);
    }

    #[tokio::test]
    async fn a_request_is_given_up_with_the_429_once_the_retries_run_out() {
        let (address, arrivals) = throttling_server(usize::MAX).await;
        let metrics = RequestMetrics::default();
        let config_maps: Api<ConfigMap> = Api::namespaced(client_for(address, &metrics), "ns");
        tokio::time::pause();

        let err = config_maps.get("settings").await.expect_err("still throttled after every retry");

        match err {
            kube_client::Error::Api(status) => assert_eq!(status.code, 429),
            other => panic!("expected the 429 itself, got {other}"),
        }
        // kube-client's server_retry policy: the first attempt and 15 retries.
        assert_eq!(arrivals.lock().unwrap().len(), 16);
        assert_eq!(metrics.requests(Some(429), &Method::GET, &address.to_string()), 16);
    }

    /// kubectl's rule for a KUBECONFIG list: files merged in order, the first to set a value
    /// wins, and the clusters, users and contexts of all of them are there.
    #[tokio::test]
    async fn a_list_of_kubeconfigs_is_merged_as_kubectl_merges_it() {
        let dir = std::env::temp_dir().join(format!("database-operator-kubeconfigs-{:08x}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, cluster: &str, server: &str, current: &str| {
            let path = dir.join(name);
            let text = format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: {current}\nclusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n\
                 contexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: u\nusers:\n- name: u\n  user: {{}}\n"
            );
            std::fs::write(&path, text).unwrap();
            path
        };
        let first = file("first", "one", "https://one.example:6443", "one");
        let second = file("second", "two", "https://two.example:6443", "two");
        let list = std::env::join_paths([&first, &second]).unwrap();

        let (config, source) = load_config(Some(&list), None).await.unwrap();
        assert_eq!(
            config.cluster_url.to_string(),
            "https://one.example:6443/",
            "the first file's current context wins"
        );
        assert_eq!(source, Source::Kubeconfig { paths: vec![first.clone(), second.clone()], context: None });
        let (config, _) = load_config(Some(&list), Some("two")).await.unwrap();
        assert_eq!(
            config.cluster_url.to_string(),
            "https://two.example:6443/",
            "the second file's context is there too"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
