//! The seam to the apiserver: one list page, or one watch.
//!
//! The reflector talks to the apiserver only through [`ListWatch`], so a test can put a scripted
//! fake in its place to inject faults (410 Gone, refused streaming lists, dropped streams) that a
//! real apiserver produces only now and then. It is implemented for [`kube_client::Api`], and for
//! a plain URL on a [`kube_client::Client`] (what the [`Factory`](super::Factory) uses, since it
//! must reach any kind, namespaced or not, with or without a namespace).
//!
//! Both decode [one object at a time](super::decode): a list item or watch event that does not
//! decode is set aside and the rest flows (kube-client's own `Api::list` and `Api::watch` decode
//! whole bodies, so `Api` goes through the URL implementation here).

use std::fmt;
use std::marker::PhantomData;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{AsyncBufReadExt, FutureExt, StreamExt};
use kube_client::{Api, Client};
use kube_core::params::{ListParams, WatchParams};
use kube_core::{Request, Resource, WatchEvent};
use prometheus_client::metrics::counter::Counter;
use serde::de::DeserializeOwned;

use super::Error;
use super::decode::{self, ListPage};

/// The events of one watch, until the apiserver closes it.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, Error>>;

/// Lists and watches one collection (one kind, in one namespace or all, with fixed selectors).
///
/// Implementations do exactly one request per call and never retry: retrying, backing off and
/// relisting are the reflector's job.
pub trait ListWatch<K>: Send + Sync + 'static {
    /// One page of a list, with `params` as given (the reflector sets `limit`, `continue` and
    /// the selectors).
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ListPage<K>, Error>>;

    /// Opens a watch from `resource_version` ("" with `params.send_initial_events` for a
    /// streaming list).
    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>>;
}

impl<K> ListWatch<K> for Api<K>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        async move { UrlListWatch::from_api(self).list(params).await }.boxed()
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        async move { UrlListWatch::from_api(self).watch(params, resource_version).await }.boxed()
    }
}

/// Lists and watches the collection at a URL path (`/api/v1/namespaces/ns/configmaps`).
pub(crate) struct UrlListWatch<K> {
    client: Client,
    request: Request,
    /// Counts the bytes of every body read (`informer_received_bytes_total`).
    received: Counter,
    _kind: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for UrlListWatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UrlListWatch").field("url", &self.request.url_path).finish_non_exhaustive()
    }
}

impl<K: Resource<DynamicType = ()>> UrlListWatch<K> {
    /// The collection of `K` in `namespace`, or across namespaces when `None`. A namespace is
    /// ignored for a cluster-scoped kind, as `kubectl get nodes -n x` ignores it.
    pub(crate) fn new(client: Client, namespace: Option<&str>) -> Self {
        let namespace = namespace.filter(|ns| !ns.is_empty() && is_namespaced::<K>());
        let request = Request::new(K::url_path(&(), namespace));
        UrlListWatch { client, request, received: Counter::default(), _kind: PhantomData }
    }

    /// Counts the bytes read into `received`.
    pub(crate) fn counting(self, received: Counter) -> Self {
        UrlListWatch { received, ..self }
    }
}

impl<K: Resource + Clone> UrlListWatch<K> {
    /// The collection `api` addresses, through its client.
    pub(crate) fn from_api(api: &Api<K>) -> Self {
        UrlListWatch {
            client: api.clone().into_client(),
            request: Request::new(api.resource_url()),
            received: Counter::default(),
            _kind: PhantomData,
        }
    }
}

/// One line of a watch body: an event, a bad object, or the end of the stream. A connection
/// cut mid-stream (an unexpected EOF) or the client's read timeout ends the stream as a normal
/// close does, and the reflector watches again from the last resourceVersion, as kube-client
/// does.
fn watch_line<K: DeserializeOwned>(line: std::io::Result<String>) -> Option<Result<WatchEvent<K>, Error>> {
    match line {
        Ok(line) => decode::event(&line),
        Err(error) if ends_quietly(&error) => None,
        Err(error) => Some(Err(Error::Transport(kube_client::Error::ReadEvents(error)))),
    }
}

/// An EOF or a timeout anywhere in the error's chain (hyper nests the I/O error, and
/// kube-client wraps the body's error in an `io::Error` of kind `Other`).
fn ends_quietly(error: &std::io::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if current.to_string().contains("unexpected EOF during chunk") {
            return true;
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::TimedOut) {
                return true;
            }
            if let Some(inner) = io.get_ref() {
                cause = Some(inner);
                continue;
            }
        }
        cause = current.source();
    }
    false
}

/// Whether `K` lives in namespaces. `Resource::Scope` is a marker type with no methods, and
/// `TypeId` would need `K::Scope: 'static` (a bound every caller would have to repeat), so the
/// type's name decides: every cluster-scoped kind, built in or derived by kube-derive, has
/// `Scope = k8s_openapi::ClusterResourceScope`.
pub(crate) fn is_namespaced<K: Resource>() -> bool {
    !std::any::type_name::<K::Scope>().ends_with("ClusterResourceScope")
}

impl<K> ListWatch<K> for UrlListWatch<K>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        async move {
            let mut request = self.request.list(params).map_err(kube_client::Error::BuildRequest)?;
            request.extensions_mut().insert("list");
            let body = self.client.request_text(request).await?;
            self.received.inc_by(body.len() as u64);
            Ok(decode::list(&body).map_err(kube_client::Error::SerdeError)?)
        }
        .boxed()
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        async move {
            let mut request = self.request.watch(params, resource_version).map_err(kube_client::Error::BuildRequest)?;
            request.extensions_mut().insert("watch");
            // As kube-client's `request_events`: Kubernetes 1.37 gzips a watch one member per
            // event, which the client's decompression does not follow.
            request.headers_mut().insert(http::header::ACCEPT_ENCODING, http::HeaderValue::from_static("identity"));
            let body = self.client.request_stream(request).await?;
            let received = self.received.clone();
            let count = move |line: std::io::Result<String>| {
                if let Ok(line) = &line {
                    // The line and its newline.
                    received.inc_by(line.len() as u64 + 1);
                }
                std::future::ready(watch_line(line))
            };
            Ok(body.lines().filter_map(count).boxed())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    fn client() -> Client {
        // Never connects: the tests only look at URLs.
        let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
        Client::try_from(config).unwrap()
    }

    #[test]
    fn a_cut_connection_ends_the_watch_quietly_and_other_read_errors_do_not() {
        use std::io::{Error as IoError, ErrorKind};
        let nested = IoError::other(IoError::new(ErrorKind::UnexpectedEof, "tls close_notify missing"));
        assert!(watch_line::<ConfigMap>(Err(nested)).is_none());
        assert!(
            watch_line::<ConfigMap>(Err(IoError::other("error reading a body: unexpected EOF during chunk size line")))
                .is_none()
        );
        let reset = IoError::other(IoError::new(ErrorKind::ConnectionReset, "reset by peer"));
        assert!(matches!(watch_line::<ConfigMap>(Err(reset)), Some(Err(Error::Transport(_)))));
    }

    #[tokio::test]
    async fn namespace_applies_to_namespaced_kinds_only() {
        assert_eq!(
            UrlListWatch::<ConfigMap>::new(client(), Some("ns")).request.url_path,
            "/api/v1/namespaces/ns/configmaps"
        );
        assert_eq!(UrlListWatch::<ConfigMap>::new(client(), None).request.url_path, "/api/v1/configmaps");
        assert_eq!(UrlListWatch::<Namespace>::new(client(), Some("ns")).request.url_path, "/api/v1/namespaces");
    }
}
