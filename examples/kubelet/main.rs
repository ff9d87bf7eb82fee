//! A stand-in for the kubelet, from the shell (hack/kubelet.sh runs it): the local control
//! plane's kwok nodes only pretend to run the Pods scheduled on them; this runs a Pod's
//! containers for real, with podman, as the installation tests do ([`pod`]).
//!
//! - `start -n NS -l SELECTOR [-c CONTAINER] [--timeout 120s]` waits until a Pod matching the
//!   selector is scheduled on a kwok node and not terminating, starts its containers detached,
//!   prints their podman names on stdout and exits; they keep running. A container that runs
//!   already is left alone.
//! - `stop -n NS [-l SELECTOR]` stops them as the kubelet does (SIGTERM, SIGKILL after the
//!   Pod's grace period), prints their names, and removes them and their ServiceAccount files;
//!   also those whose Pod is gone, which a kubelet would have stopped.
//! - `logs -n NS [-l SELECTOR] [-c CONTAINER] [-f]` prints what they wrote.
//!
//! Progress goes to stderr; an error ends it with exit code 1 and what to do.
//!
//! Not part of the crate's API: an example target, so that it shares the crate's build and
//! its dev-dependencies.

mod pod;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube_client::api::{Api, ListParams};
use kube_client::{Client, Config};
use tokio::time::Instant;

use crate::pod::RunningContainer;

/// Runs the containers of Pods that the local control plane scheduled on kwok nodes with podman.
#[derive(Debug, Parser)]
#[command(name = "kubelet", bin_name = "hack/kubelet.sh")]
struct Cli {
    #[command(subcommand)]
    command: Subcommand,
}

#[derive(Debug, clap::Subcommand)]
enum Subcommand {
    /// Waits for a scheduled Pod matching the selector, starts its containers, prints their
    /// podman names and exits, leaving them running.
    Start {
        /// The Pod's namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// A label selector, as kubectl's: `app.kubernetes.io/name=database-operator`.
        #[arg(short = 'l', long)]
        selector: String,
        /// Only this container (default: every container of the Pod).
        #[arg(short, long)]
        container: Option<String>,
        /// How long to wait for the Pod to be scheduled.
        #[arg(long, default_value = "120s")]
        timeout: humantime::Duration,
    },
    /// Stops the containers started for the Pods matching the selector (every one in the
    /// namespace without), as the kubelet does, and removes them.
    Stop {
        /// The Pods' namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// A label selector, as kubectl's.
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
    /// Prints what the containers started for the Pods matching the selector wrote.
    Logs {
        /// The Pods' namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// A label selector, as kubectl's.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Only this container.
        #[arg(short, long)]
        container: Option<String>,
        /// Keep printing what they write.
        #[arg(short, long)]
        follow: bool,
    },
}

fn progress(message: impl std::fmt::Display) {
    eprintln!("[kubelet] {message}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("[kubelet] error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    pod::check_podman()?;
    match cli.command {
        Subcommand::Start { namespace, selector, container, timeout } => {
            let (client, namespace) = cluster(namespace).await?;
            start(&client, &namespace, &selector, container.as_deref(), timeout.into()).await
        }
        Subcommand::Stop { namespace, selector } => {
            let (namespace, containers) = chosen(namespace, selector.as_deref(), None).await?;
            stop(&namespace, selector.as_deref(), containers)
        }
        Subcommand::Logs { namespace, selector, container, follow } => {
            let (_, containers) = chosen(namespace, selector.as_deref(), container.as_deref()).await?;
            logs(&containers, follow)
        }
    }
}

/// A client for the cluster of the kubeconfig, and `namespace` or else its context's.
async fn cluster(namespace: Option<String>) -> anyhow::Result<(Client, String)> {
    let config = Config::infer().await.context(
        "cannot load the kubeconfig: set KUBECONFIG (for the local plane: eval \"$(hack/control-plane.sh env)\")",
    )?;
    let namespace = namespace.unwrap_or_else(|| config.default_namespace.clone());
    Ok((Client::try_from(config).context("cannot build a client for the kubeconfig")?, namespace))
}

async fn start(
    client: &Client,
    namespace: &str,
    selector: &str,
    container: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let pods = scheduled_pods(client, namespace, selector, timeout).await?;
    let existing = RunningContainer::list(Some(namespace))?;
    for pod in &pods {
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let spec = pod.spec.as_ref().context("a Pod without a spec")?;
        let node = spec.node_name.as_deref().unwrap_or_default();
        check_kwok_node(client, namespace, pod_name, node).await?;
        let all: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        let containers = match container {
            Some(container) if !all.contains(&container) => {
                bail!("Pod {namespace}/{pod_name} has no container {container} (its containers: {})", all.join(", "))
            }
            Some(container) => vec![container],
            None => all,
        };
        for container in containers {
            let running = existing.iter().find(|found| found.uid == uid && found.container == container);
            if let Some(running) = running.filter(|running| running.is_running().unwrap_or(false)) {
                progress(format_args!(
                    "container {container} of Pod {namespace}/{pod_name} is already running: {}",
                    running.name
                ));
                println!("{}", running.name);
                continue;
            }
            progress(format_args!("starting container {container} of Pod {namespace}/{pod_name} (node {node})"));
            let started = RunningContainer::start(client, pod, container).await?;
            // A container that fails at once (a wrong flag, an apiserver it cannot reach) says
            // so now rather than after the caller has moved on. It stays, as a kubelet keeps a
            // crashed container, for `logs`.
            tokio::time::sleep(Duration::from_secs(2)).await;
            let started = started.detach();
            if !started.is_running()? {
                bail!(
                    "container {} exited at once, with code {}; it wrote:\n{}\n\
                     (`hack/kubelet.sh logs -n {namespace} -l {selector}` shows it again, \
                     `hack/kubelet.sh stop -n {namespace} -l {selector}` removes it)",
                    started.name,
                    started.stop()?,
                    started.logs().trim()
                );
            }
            progress(format_args!(
                "started {}; it runs until `hack/kubelet.sh stop -n {namespace} -l {selector}`",
                started.name
            ));
            println!("{}", started.name);
        }
    }
    Ok(())
}

/// The Pods matching `selector` in `namespace` that are scheduled and not terminating, once
/// there is one; progress on the way.
async fn scheduled_pods(
    client: &Client,
    namespace: &str,
    selector: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(selector);
    let start = Instant::now();
    let mut last = (String::new(), start);
    progress(format_args!(
        "waiting up to {} for a Pod matching -l {selector} in namespace {namespace} to be scheduled",
        humantime::format_duration(timeout)
    ));
    loop {
        let listed = pods.list(&params).await.map_err(|err| {
            api_error(err, format!("cannot list the Pods matching -l {selector} in namespace {namespace}"))
        })?;
        let (scheduled, waiting): (Vec<Pod>, Vec<Pod>) = listed.items.into_iter().partition(|pod| {
            pod.metadata.deletion_timestamp.is_none() && pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
        });
        if !scheduled.is_empty() {
            return Ok(scheduled);
        }
        let state = match waiting.first() {
            None => "no Pod matches yet".to_string(),
            Some(pod) => describe(pod),
        };
        if state != last.0 || last.1.elapsed() >= Duration::from_secs(15) {
            progress(format_args!("{state} ({}s)", start.elapsed().as_secs()));
            last = (state, Instant::now());
        }
        if start.elapsed() >= timeout {
            bail!(
                "no Pod matching -l {selector} in namespace {namespace} was scheduled within {}: {}. \
                 `kubectl get deployments,replicasets,pods -n {namespace}` and `kubectl get events -n {namespace}` \
                 say why (a Pod refused by Pod Security, for instance)",
                humantime::format_duration(timeout),
                last.0
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Why `pod` is not one to start yet.
fn describe(pod: &Pod) -> String {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        return format!("Pod {name} is terminating");
    }
    let unscheduled = pod
        .status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message.clone());
    match unscheduled {
        Some(message) => format!("Pod {name} is not scheduled: {message}"),
        None => format!("Pod {name} is not scheduled yet"),
    }
}

/// `err` in a kubectl user's words: the apiserver's own message when it answered, else a hint
/// that it may be down.
fn api_error(err: kube_client::Error, what: String) -> anyhow::Error {
    match err {
        kube_client::Error::Api(status) => {
            anyhow::anyhow!("{what}: the apiserver answered {} {}: {}", status.code, status.reason, status.message)
        }
        other => anyhow::Error::new(other)
            .context(format!("{what} (is the control plane up? `hack/control-plane.sh status` says)")),
    }
}

/// Refuses a Pod on a node that a real kubelet runs: it would run twice.
async fn check_kwok_node(client: &Client, namespace: &str, pod: &str, node: &str) -> anyhow::Result<()> {
    let found = Api::<Node>::all(client.clone())
        .get(node)
        .await
        .map_err(|err| api_error(err, format!("cannot read Node {node}")))?;
    let annotations = found.metadata.annotations.unwrap_or_default();
    if annotations.get("kwok.x-k8s.io/node").map(String::as_str) != Some("fake") {
        bail!(
            "Pod {namespace}/{pod} is scheduled on node {node}, which is not a kwok node: its own kubelet runs it. \
             This stand-in runs only the Pods of kwok's nodes, which pretend to run them"
        );
    }
    Ok(())
}

/// The namespace, and the containers started in it for the Pods matching `selector` (all of
/// them without one), and for Pods that are gone; only `container`, if given.
async fn chosen(
    namespace: Option<String>,
    selector: Option<&str>,
    container: Option<&str>,
) -> anyhow::Result<(String, Vec<RunningContainer>)> {
    // Without a selector and with a namespace, no cluster is needed: a plane already stopped
    // does not keep its containers running.
    let (client, namespace) = match (&namespace, selector) {
        (Some(namespace), None) => (None, namespace.clone()),
        _ => {
            let (client, namespace) = cluster(namespace).await?;
            (Some(client), namespace)
        }
    };
    let mut containers = RunningContainer::list(Some(&namespace))?;
    containers.retain(|found| container.is_none_or(|container| found.container == container));
    if let (Some(client), Some(selector)) = (client, selector) {
        let pods: Api<Pod> = Api::namespaced(client, &namespace);
        let uids = |listed: Vec<Pod>| -> Vec<String> { listed.into_iter().filter_map(|p| p.metadata.uid).collect() };
        let failed = |err| api_error(err, format!("cannot list the Pods in namespace {namespace}"));
        let matching = uids(pods.list(&ListParams::default().labels(selector)).await.map_err(failed)?.items);
        let existing = uids(pods.list(&ListParams::default()).await.map_err(failed)?.items);
        containers.retain(|found| {
            let gone = !existing.contains(&found.uid);
            if gone {
                progress(format_args!("{}: its Pod {} is gone", found.name, found.pod));
            }
            gone || matching.contains(&found.uid)
        });
    }
    Ok((namespace, containers))
}

fn stop(namespace: &str, selector: Option<&str>, containers: Vec<RunningContainer>) -> anyhow::Result<()> {
    if containers.is_empty() {
        let which = selector.map(|s| format!(" for Pods matching -l {s}")).unwrap_or_default();
        progress(format_args!(
            "no container started by hack/kubelet.sh in namespace {namespace}{which}: nothing to stop"
        ));
    }
    for container in containers {
        progress(format_args!(
            "stopping {}: SIGTERM, then SIGKILL after {}s (the Pod's terminationGracePeriodSeconds)",
            container.name,
            container.grace_period.as_secs()
        ));
        let code = container.stop()?;
        progress(format_args!("{} exited with code {code}; removing it and its ServiceAccount files", container.name));
        let name = container.name.clone();
        container.remove()?;
        println!("{name}");
    }
    Ok(())
}

fn logs(containers: &[RunningContainer], follow: bool) -> anyhow::Result<()> {
    if containers.is_empty() {
        bail!("no container started by hack/kubelet.sh matches: `hack/kubelet.sh start` starts one");
    }
    let mut children = Vec::new();
    for container in containers {
        if containers.len() > 1 {
            progress(format_args!("==> {} <==", container.name));
        }
        let mut command = pod::podman();
        command.arg("logs");
        if follow {
            command.arg("--follow");
        }
        let child = command.arg(&container.name).spawn().context("cannot run podman logs")?;
        // Followed, they all print at once; else one after the other.
        if follow {
            children.push(child);
        } else {
            wait(child)?;
        }
    }
    children.into_iter().try_for_each(wait)
}

fn wait(mut child: std::process::Child) -> anyhow::Result<()> {
    let status = child.wait().context("podman logs")?;
    if !status.success() {
        bail!("podman logs failed ({status})");
    }
    Ok(())
}
