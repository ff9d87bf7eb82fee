//! Running a verb: the connection (kubeconfig, context, namespace) and the dispatch.

use std::ffi::OsString;
use std::process::ExitCode;

use kube_client::Client;

use super::args::{Cli, Verb};
use super::error::Error;
use super::target::Target;
use super::{backup, list, restore, shell, switchover, why};

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
        Verb::Switchover(args) => switchover::run(&target, args).await?,
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
