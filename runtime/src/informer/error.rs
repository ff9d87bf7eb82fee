//! The informer's one error type and how to classify it.
//!
//! The reflector never gives up: every [`Error`] it meets is logged, counted and retried. The
//! classification methods decide *how* it retries: [`Error::is_gone`] means "the resourceVersion
//! we hold is too old, list again", [`Error::is_streaming_rejected`] means "this server does not
//! do streaming lists, use a paginated list", anything else means "back off and try again".

use std::fmt;
use std::time::Duration;

use kube_core::Status;

/// Why a list, a watch or a wait for the cache failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The apiserver answered a list or watch request with an error status.
    #[error("the apiserver refused the request: {} (reason {:?}, code {})", .0.message, .0.reason, .0.code)]
    Api(Box<Status>),

    /// An open watch stream delivered an `ERROR` event.
    #[error("the watch stream reported an error: {} (reason {:?}, code {})", .0.message, .0.reason, .0.code)]
    WatchEvent(Box<Status>),

    /// The request got no usable answer: connection, TLS, or a body that does not decode.
    #[error("request to the apiserver failed: {0}")]
    Transport(#[source] kube_client::Error),

    /// One object of a watch did not decode as the informer's type. The watch goes on: the
    /// object is logged, counted and treated as absent (see [`Undecodable`]).
    #[error("{0}")]
    Undecodable(Box<Undecodable>),

    /// A watch closed within a second without delivering a single event (client-go's "very short
    /// watch"); retrying at once would spin, so it is backed off like any failure.
    #[error("the watch closed after less than a second without any event")]
    ShortWatch,

    /// A streaming list (`sendInitialEvents=true`) ended or went quiet before the bookmark
    /// annotated `k8s.io/initial-events-end: "true"` that marks the end of the initial state.
    #[error(
        "the stream of initial events ended before the `k8s.io/initial-events-end` bookmark; \
         the apiserver probably does not support streaming lists (feature gate WatchList)"
    )]
    InitialEventsIncomplete,

    /// Waiting for one or more caches to hold their first full list took longer than allowed.
    #[error(
        "the informer cache for {resources} did not sync within {timeout:?}: check that the \
         apiserver is reachable and that the service account may list and watch {resources}"
    )]
    SyncTimeout {
        /// The resources (plural names, comma separated) whose caches had not synced.
        resources: String,
        /// How long the caller waited.
        timeout: Duration,
    },
}

impl Error {
    /// The apiserver's status, for [`Error::Api`] and [`Error::WatchEvent`].
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Api(status) | Error::WatchEvent(status) => Some(status),
            _ => None,
        }
    }

    /// True for `410 Gone`, as an HTTP answer or a watch `ERROR` event (code 410, or reason
    /// `Expired` / `Gone`): the resourceVersion is older than the apiserver keeps, so the only
    /// way forward is a new list. Like client-go's `isExpiredError`, both reasons are accepted
    /// because servers before 1.18 sent `Gone` and later ones send `Expired`.
    pub fn is_gone(&self) -> bool {
        self.status().is_some_and(|status| status.code == 410 || status.reason == "Expired" || status.reason == "Gone")
    }

    /// True when a streaming-list watch was refused as a bad request (400 or 422): servers
    /// before 1.27 reject `resourceVersionMatch` on a watch, and servers with the `WatchList`
    /// feature gate off reject `sendInitialEvents`. The informer then falls back to a paginated
    /// list.
    pub fn is_streaming_rejected(&self) -> bool {
        matches!(self, Error::Api(status) if matches!(status.code, 400 | 422) || matches!(status.reason.as_str(), "BadRequest" | "Invalid"))
    }

    /// True for [`Error::SyncTimeout`].
    pub fn is_sync_timeout(&self) -> bool {
        matches!(self, Error::SyncTimeout { .. })
    }
}

impl From<kube_client::Error> for Error {
    fn from(error: kube_client::Error) -> Self {
        match error {
            kube_client::Error::Api(status) => Error::Api(status),
            other => Error::Transport(other),
        }
    }
}

/// An object that did not decode as the informer's type, named by its metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Undecodable {
    /// Its namespace, for a namespaced kind.
    pub namespace: Option<String>,
    /// Its name, when the metadata says.
    pub name: Option<String>,
    /// Its resourceVersion, when the metadata says: a watch goes on from there.
    pub resource_version: Option<String>,
    /// What the decoder said (a field path and the reason, never the field's value).
    pub error: String,
}

impl Undecodable {
    /// Its cache key (`namespace/name` or `name`), as [`key_of`](super::key_of) makes it.
    pub fn key(&self) -> Option<String> {
        let name = self.name.as_deref().filter(|name| !name.is_empty())?;
        Some(match self.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_string(),
        })
    }
}

impl fmt::Display for Undecodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key().unwrap_or_else(|| "an object without a name".into());
        write!(f, "{key} does not decode: {}", self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str) -> Box<Status> {
        Status::failure("m", reason).with_code(code).boxed()
    }

    #[test]
    fn gone_is_recognised_by_code_or_by_reason() {
        assert!(Error::Api(status(410, "Gone")).is_gone());
        assert!(Error::WatchEvent(status(410, "Expired")).is_gone());
        assert!(Error::WatchEvent(status(0, "Expired")).is_gone());
        assert!(!Error::Api(status(500, "InternalError")).is_gone());
        assert!(!Error::ShortWatch.is_gone());
    }

    #[test]
    fn only_bad_request_and_invalid_answers_reject_streaming() {
        assert!(Error::Api(status(422, "Invalid")).is_streaming_rejected());
        assert!(Error::Api(status(400, "BadRequest")).is_streaming_rejected());
        assert!(!Error::Api(status(403, "Forbidden")).is_streaming_rejected());
        assert!(!Error::Api(status(500, "InternalError")).is_streaming_rejected());
        assert!(!Error::WatchEvent(status(422, "Invalid")).is_streaming_rejected());
    }

    #[test]
    fn client_api_errors_keep_their_status() {
        let error = Error::from(kube_client::Error::Api(status(410, "Expired")));
        assert!(error.is_gone());
        let error = Error::from(kube_client::Error::LinesCodecMaxLineLengthExceeded);
        assert!(matches!(error, Error::Transport(_)));
    }

    #[test]
    fn sync_timeout_says_what_to_check() {
        let error = Error::SyncTimeout { resources: "configmaps".into(), timeout: Duration::from_secs(3) };
        assert!(error.is_sync_timeout());
        assert!(error.to_string().contains("may list and watch configmaps"));
    }
}
