//! The errors of `kubectl database`, each in a kubectl user's words.

use std::time::Duration;

/// What went wrong in a verb.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or used.
    #[error("reading the kubeconfig: {0}")]
    Config(#[source] operator_runtime::client::Error),

    /// A request to the apiserver failed.
    #[error("{what}: {}", api_words(.source))]
    Api {
        /// What was asked, e.g. "getting Database shop/orders".
        what: String,
        /// The client's error.
        #[source]
        source: kube_client::Error,
    },

    /// An object the verb needs is not there.
    #[error("{kind} {name} not found in namespace {namespace}")]
    NotFound {
        /// `Database`, `DatabaseBackup`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The namespace looked in.
        namespace: String,
    },

    /// The verb cannot do what it was asked, and says what to do instead.
    #[error("{0}")]
    Refused(String),

    /// What the verb waited for ended badly (a backup Failed, a verification Failed).
    #[error("{0}")]
    Failed(String),

    /// `--wait` ran out of `--timeout`.
    #[error("timed out after {} waiting for {what}; {hint}", humantime::format_duration(*.timeout))]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        timeout: Duration,
        /// Where to look next.
        hint: String,
    },

    /// kubectl could not be run.
    #[error("running kubectl (is it on PATH?): {0}")]
    Kubectl(#[source] std::io::Error),
}

impl Error {
    /// An [`Error::Api`] for `what`, or an [`Error::NotFound`] when the apiserver said 404.
    pub(crate) fn api(what: impl Into<String>, source: kube_client::Error) -> Self {
        Error::Api { what: what.into(), source }
    }

    /// Whether the apiserver said the object exists already (a create of a taken name).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, Error::Api { source: kube_client::Error::Api(status), .. } if status.is_already_exists())
    }
}

/// The apiserver's own message for an API error (not the client's debug dump of it).
fn api_words(error: &kube_client::Error) -> String {
    match error {
        kube_client::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}
