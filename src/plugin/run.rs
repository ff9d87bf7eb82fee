//! Running a verb: the connection (kubeconfig, context, namespace), the dispatch, and the one
//! wait loop `--wait` uses.

use std::ffi::OsString;
use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use kube_client::Client;

use super::args::{Cli, Verb};
use super::error::Error;
use super::{backup, list, restore, shell, why};

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

/// Runs `cli`'s verb on a runtime of one thread; an error is printed on stderr (`error: ...`,
/// as kubectl's) and exits 1. `shell` exits with the client's exit code.
pub fn run(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(cli: Cli) -> Result<ExitCode, Error> {
    let target = connect(&cli).await?;
    match cli.verb {
        Verb::Backup(args) => backup::run(&target, args).await?,
        Verb::Restore(args) => restore::run(&target, args).await?,
        Verb::Backups(args) => list::run(&target, args).await?,
        Verb::Why(args) => why::run(&target, args).await?,
        Verb::Shell(args) => return shell::run(&target, args).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// The client and namespace of `cli`'s kubeconfig and context, as kubectl reads them.
async fn connect(cli: &Cli) -> Result<Target, Error> {
    let (config, _) = operator_runtime::client::load_config(cli.kubeconfig.as_deref(), cli.context.as_deref())
        .await
        .map_err(Error::Config)?;
    // kube-client reads the context's namespace into default_namespace ("default" without one).
    let namespace = cli.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(|e| Error::api("building a client for the kubeconfig", e))?;
    let mut kubectl_flags = Vec::new();
    // From KUBECONFIG, kubectl reads it itself (its --kubeconfig takes one path, KUBECONFIG
    // a list).
    let from_env = std::env::var_os("KUBECONFIG") == cli.kubeconfig;
    if let Some(kubeconfig) = cli.kubeconfig.as_ref().filter(|_| !from_env) {
        kubectl_flags.extend([OsString::from("--kubeconfig"), kubeconfig.clone()]);
    }
    if let Some(context) = &cli.context {
        kubectl_flags.extend([OsString::from("--context"), OsString::from(context)]);
    }
    Ok(Target { client, namespace, kubectl_flags })
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
