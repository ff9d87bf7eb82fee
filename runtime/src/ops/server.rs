//! A small HTTP server for `/metrics` (the OpenMetrics text format), `/healthz`, `/livez` and
//! `/readyz`. The metrics endpoint is served over HTTPS to authorized callers by default
//! ([`Secure`]); the probes are always plain HTTP, as the kubelet calls them.
//!
//! `/healthz` (and its alias `/livez`) answers 200 while the process serves requests.
//! `/readyz` answers 200 while the informers' caches are synced and running ([`Health`]), 503
//! otherwise: a pod is not sent traffic, and a rollout does not proceed, until the operator
//! can act on what it sees.
//!
//! Whoever reaches the port may be hostile, so a server holds at most
//! [`ConnectionLimits::max_connections`] connections (one more is closed at once, before its
//! TLS handshake) and closes a connection that has not sent a request's headers within
//! [`ConnectionLimits::header_read_timeout`] (and a TLS handshake within 10 seconds): a flood
//! of connections, or of slow ones, costs a bounded number of sockets and tasks.

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
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
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

/// How many connections a server holds, and how long it waits for a request's headers.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers (the first, and each next
    /// one on a kept-alive connection) before it is closed.
    pub header_read_timeout: Duration,
}

impl Default for ConnectionLimits {
    /// 64 connections (a few scrapers and the kubelet's probes need a handful), 10 seconds.
    fn default() -> Self {
        Self { max_connections: 64, header_read_timeout: Duration::from_secs(10) }
    }
}

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
    serve_limited(addr, registry, health, secure, ConnectionLimits::default(), cancel).await
}

/// [`serve`] with `limits` instead of the default ones.
///
/// # Errors
///
/// The bind error, if `addr` cannot be bound.
pub async fn serve_limited(
    addr: SocketAddr,
    registry: Option<Arc<Registry>>,
    health: Health,
    secure: Option<Secure>,
    limits: ConnectionLimits,
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    let what = match (&registry, &secure) {
        (Some(_), Some(_)) => "/metrics over HTTPS to authorized callers",
        (Some(_), None) => "/metrics over plain HTTP",
        (None, _) => "/healthz, /livez and /readyz",
    };
    info!(address = %listener.local_addr()?, "serving {what}");
    let routes = Routes {
        registry,
        health,
        authorizer: secure.as_ref().map(|s| s.authorizer.clone()),
        header_read_timeout: limits.header_read_timeout,
    };
    let open = Arc::new(Semaphore::new(limits.max_connections));
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
            // Dropped, the stream is closed: the client sees its connection end at once.
            let Ok(permit) = open.clone().try_acquire_owned() else {
                debug!(max = limits.max_connections, "connection closed: as many are open as allowed");
                continue;
            };
            let routes = routes.clone();
            let tls = secure.as_ref().map(|s| s.tls.clone());
            tokio::spawn(async move {
                let _permit = permit;
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
    header_read_timeout: Duration,
}

async fn serve_connection<I>(io: I, routes: Routes)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let header_read_timeout = routes.header_read_timeout;
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
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    if let Err(err) = http.serve_connection(io, service).await {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn server(limits: ConnectionLimits) -> (SocketAddr, CancellationToken) {
        // Bound on a free port, then served there: `serve_limited` binds itself.
        let address = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let cancel = CancellationToken::new();
        serve_limited(address, None, Health::default(), None, limits, cancel.clone()).await.unwrap();
        (address, cancel)
    }

    /// Reads until the server closes the connection; what it sent.
    async fn until_closed(stream: &mut TcpStream) -> String {
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn a_connection_beyond_the_limit_is_closed_and_the_others_are_served() {
        let limits = ConnectionLimits { max_connections: 2, header_read_timeout: Duration::from_secs(30) };
        let (address, cancel) = server(limits).await;
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(TcpStream::connect(address).await.unwrap());
        }
        let mut third = TcpStream::connect(address).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), until_closed(&mut third)).await;
        assert_eq!(answer.as_deref(), Ok(""), "the third connection is closed unanswered");
        // The two held ones are served.
        let first = &mut held[0];
        first.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        assert!(until_closed(first).await.starts_with("HTTP/1.1 200"), "a held connection is served");
        // Once one closes, a new one is served.
        drop(held);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut again = TcpStream::connect(address).await.unwrap();
        again.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        assert!(until_closed(&mut again).await.starts_with("HTTP/1.1 200"));
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_connection_that_does_not_send_its_headers_in_time_is_closed() {
        let limits = ConnectionLimits { max_connections: 4, header_read_timeout: Duration::from_millis(300) };
        let (address, cancel) = server(limits).await;
        let mut slow = TcpStream::connect(address).await.unwrap();
        slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n").await.unwrap();
        // Never finished: the server closes it (with a 408) rather than waiting for ever.
        let answer = tokio::time::timeout(Duration::from_secs(10), until_closed(&mut slow)).await;
        let answer = answer.expect("the server closed the connection");
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer:?}");
        cancel.cancel();
    }
}
