//! A small HTTP server for `/metrics` (Prometheus text format), `/healthz` and `/readyz`.
//!
//! `/healthz` answers 200 while the process serves requests. `/readyz` answers 200 once the
//! informers' caches have synced ([`Health::set_ready`]), 503 before: a pod is not sent
//! traffic, and a rollout does not proceed, until the operator can act on what it sees.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The readiness the probes report; cheap to clone and share.
#[derive(Debug, Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
}

impl Health {
    /// Marks the operator ready (caches synced) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// Serves `/metrics` (from `registry`, if given), `/healthz` and `/readyz` on `addr` until
/// `cancel` fires. Binding happens before the function returns its future's first await point
/// completes, so a bind error (port in use) is reported at once.
///
/// # Errors
///
/// The bind error, if `addr` cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    registry: Option<Arc<Registry>>,
    health: Health,
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    info!(address = %listener.local_addr()?, "serving {}", if registry.is_some() { "/metrics" } else { "/healthz and /readyz" });
    Ok(tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = cancel.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) => {
                        warn!(error = %err, "accepting a connection failed");
                        continue;
                    }
                },
            };
            let (registry, health) = (registry.clone(), health.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let response = respond(&request, registry.as_deref(), &health);
                    async move { Ok::<_, Infallible>(response) }
                });
                if let Err(err) = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await {
                    debug!(error = %err, "connection ended with an error");
                }
            });
        }
    }))
}

fn respond(request: &Request<Incoming>, registry: Option<&Registry>, health: &Health) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .expect("a static response is valid")
    };
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    match (request.uri().path(), registry) {
        ("/healthz" | "/livez", _) => text(StatusCode::OK, "ok\n".into()),
        ("/readyz", _) if health.is_ready() => text(StatusCode::OK, "ok\n".into()),
        ("/readyz", _) => text(StatusCode::SERVICE_UNAVAILABLE, "caches not synced\n".into()),
        ("/metrics", Some(registry)) => {
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => Response::builder()
                    .header(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")
                    .body(Full::new(Bytes::from(body)))
                    .expect("a static response is valid"),
                Err(err) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding metrics failed: {err}\n")),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}
