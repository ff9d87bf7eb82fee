//! A small HTTP server for `/metrics` (the OpenMetrics text format), `/healthz`, `/livez` and
//! `/readyz`. The metrics endpoint is served over HTTPS to authorized callers by default
//! ([`Secure`]); the probes are always plain HTTP, as the kubelet calls them.
//!
//! `/healthz` (and its alias `/livez`) answers 200 while the process serves requests.
//! `/readyz` answers 200 while the informers' caches are synced and running ([`Health`]), 503
//! otherwise: a pod is not sent traffic, and a rollout does not proceed, until the operator
//! can act on what it sees.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::auth::{Authorizer, Decision};

/// The readiness the probes report; cheap to clone and share.
///
/// Either a flag ([`Health::set_ready`]) or, once given, a check computed afresh at every
/// probe ([`Health::set_check`]): the operator's checks that its informers are synced and
/// still running, so caches that sync late still make the pod ready and one that stops makes
/// it unready. [`Health::stopping`] makes it unready for good.
#[derive(Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    stopping: Arc<AtomicBool>,
    check: Arc<std::sync::OnceLock<ReadinessCheck>>,
}

type ReadinessCheck = Box<dyn Fn() -> bool + Send + Sync>;

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health").field("ready", &self.is_ready()).finish()
    }
}

impl Health {
    /// Marks the operator ready or not, when no check is set.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Computes readiness with `check` at every probe from now on (the first check set wins).
    pub fn set_check(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.check.set(Box::new(check));
    }

    /// Unready from now on: the operator is shutting down.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        !self.stopping.load(Ordering::Acquire)
            && self.check.get().map_or_else(|| self.ready.load(Ordering::Acquire), |check| check())
    }
}

/// What makes an endpoint secure: TLS, and every request authenticated and authorized.
#[derive(Clone)]
pub struct Secure {
    /// The TLS configuration (see [`super::tls`]).
    pub tls: TlsAcceptor,
    /// Who may call (see [`super::auth`]).
    pub authorizer: Arc<Authorizer>,
}

impl std::fmt::Debug for Secure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secure").field("authorizer", &self.authorizer).finish_non_exhaustive()
    }
}

/// How long a client may take over its TLS handshake before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `/metrics` (from `registry`, if given), `/healthz`, `/livez` and `/readyz` on `addr`
/// until `cancel` fires: over HTTPS to authorized callers only when `secure` is given, else over
/// plain HTTP. Binding happens before the function returns its future's first await point
/// completes, so a bind error (port in use) is reported at once.
///
/// # Errors
///
/// The bind error, if `addr` cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    registry: Option<Arc<Registry>>,
    health: Health,
    secure: Option<Secure>,
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    let what = match (&registry, &secure) {
        (Some(_), Some(_)) => "/metrics over HTTPS to authorized callers",
        (Some(_), None) => "/metrics over plain HTTP",
        (None, _) => "/healthz, /livez and /readyz",
    };
    info!(address = %listener.local_addr()?, "serving {what}");
    let routes = Routes { registry, health, authorizer: secure.as_ref().map(|s| s.authorizer.clone()) };
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
            let routes = routes.clone();
            let tls = secure.as_ref().map(|s| s.tls.clone());
            tokio::spawn(async move {
                match tls {
                    None => serve_connection(TokioIo::new(stream), routes).await,
                    Some(tls) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(TokioIo::new(stream), routes).await,
                        Ok(Err(err)) => debug!(error = %err, "TLS handshake failed"),
                        Err(_) => debug!("TLS handshake timed out"),
                    },
                }
            });
        }
    }))
}

/// What an endpoint answers, shared by its connections.
#[derive(Clone)]
struct Routes {
    registry: Option<Arc<Registry>>,
    health: Health,
    authorizer: Option<Arc<Authorizer>>,
}

async fn serve_connection<I>(io: I, routes: Routes)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = service_fn(move |request: Request<Incoming>| {
        let routes = routes.clone();
        async move {
            if let Some(authorizer) = &routes.authorizer {
                let decision = authorizer.check(request.headers(), request.method(), request.uri().path()).await;
                let refusal = match &decision {
                    Decision::Allowed => None,
                    Decision::Unauthenticated => Some("Unauthorized\n".to_string()),
                    Decision::Forbidden { user } => Some(format!(
                        "Forbidden: user {user:?} may not {} {}\n",
                        request.method().as_str().to_ascii_lowercase(),
                        request.uri().path()
                    )),
                    Decision::Failed => Some("Internal Server Error: the access review failed\n".to_string()),
                };
                if let Some(body) = refusal {
                    return Ok::<_, Infallible>(text(decision.status(), body));
                }
            }
            Ok(respond(&request, routes.registry.as_deref(), &routes.health))
        }
    });
    if let Err(err) = http1::Builder::new().serve_connection(io, service).await {
        debug!(error = %err, "connection ended with an error");
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
        .expect("a static response is valid")
}

fn respond(request: &Request<Incoming>, registry: Option<&Registry>, health: &Health) -> Response<Full<Bytes>> {
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    match (request.uri().path(), registry) {
        ("/healthz" | "/livez", _) => text(StatusCode::OK, "ok\n".into()),
        ("/readyz", _) if health.is_ready() => text(StatusCode::OK, "ok\n".into()),
        ("/readyz", _) => {
            text(StatusCode::SERVICE_UNAVAILABLE, "caches not synced, an informer stopped, or shutting down\n".into())
        }
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
