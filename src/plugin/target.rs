//! Where a verb works ([`Target`]: a client, the namespace, kubectl's flags), and the one wait
//! loop `--wait` uses ([`wait`]), shared by the verbs.

use std::ffi::OsString;
use std::future::Future;
use std::time::Duration;

use kube_client::Client;

use super::error::Error;

/// How often `--wait` reads the object it waits for: a person watches, a second is prompt.
const POLL: Duration = Duration::from_secs(1);

/// Where a verb works: a client, the namespace, and kubectl's flags for the same cluster (for
/// the verbs that run kubectl).
#[derive(Clone)]
pub(crate) struct Target {
    /// A client of the kubeconfig's cluster and user.
    pub(crate) client: Client,
    /// The namespace of the Database.
    pub(crate) namespace: String,
    /// `--kubeconfig` and `--context` as given, for kubectl.
    pub(crate) kubectl_flags: Vec<OsString>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("namespace", &self.namespace).finish_non_exhaustive()
    }
}

/// What one look at the waited-for object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Look {
    /// Not there yet, or on its way: the line to print when it differs from the last one.
    Waiting(String),
    /// Done well: the last line to print.
    Done(String),
    /// Done badly: why.
    Failed(String),
}

/// Calls `look` every [`POLL`] until it is done or failed, printing each new line of
/// progress once on stdout; [`Error::Timeout`] after `timeout`, naming `what` and `hint`.
///
/// # Errors
///
/// What `look` returns, [`Error::Failed`] when it says so, and [`Error::Timeout`].
pub(crate) async fn wait<F, Fut>(what: &str, hint: &str, timeout: Duration, mut look: F) -> Result<String, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Look, Error>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        match look().await? {
            Look::Done(line) => return Ok(line),
            Look::Failed(why) => return Err(Error::Failed(why)),
            Look::Waiting(line) => {
                if line != last {
                    println!("{line}");
                    last = line;
                }
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout { what: what.to_string(), timeout, hint: hint.to_string() });
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wait_returns_the_last_line_once_done_and_times_out_naming_what_it_waited_for() {
        let mut looks = vec![Look::Done("done".into()), Look::Waiting("b".into()), Look::Waiting("a".into())];
        let done = wait("x", "", Duration::from_secs(60), || {
            let next = looks.pop().unwrap();
            async move { Ok(next) }
        })
        .await;
        assert_eq!(done.unwrap(), "done");

        let never = wait("backup b", "look at it", Duration::from_secs(5), || async { Ok(Look::Waiting("w".into())) });
        let err = never.await.unwrap_err().to_string();
        assert_eq!(err, "timed out after 5s waiting for backup b; look at it");

        let failed = wait("x", "", Duration::from_secs(5), || async { Ok(Look::Failed("it broke".into())) }).await;
        assert_eq!(failed.unwrap_err().to_string(), "it broke");
    }
}
