//! The limit of the end-to-end reconcile benchmark: the writes of a reconcile with no
//! controller around them.
//!
//! It lists the Databases once and, `--workers` at a time, server-side applies each one's
//! Deployment and Service concurrently (database-operator's own `desired::deployment` / `service`) and
//! then its status (`desired::status` of the Deployment it got back), with the same field
//! manager, force and client throttling as the operator. With `--events` it also creates the
//! `Created` event the operator publishes for a new Database. No informer, no queue, no
//! cache, no drift check: whatever time it takes is the apiserver's and etcd's.
//!
//! Like a controller, it keeps running after the work is done (until SIGTERM or Ctrl-C), so
//! the benchmark measures it the same way.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use database_operator::api::Database;
use database_operator::desired::{self, DeploymentView, ServiceView};
use futures::{StreamExt, TryStreamExt};
use kube_client::Client;
use kube_client::api::{Api, ListParams, Patch, PatchParams};
use kube_core::Resource;
use operator_runtime::client;
use operator_runtime::events::{EventType, Recorder};

#[derive(Debug, Parser)]
struct Args {
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Databases written in parallel.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f32,
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Also create the `Created` event per Database that the operator publishes.
    #[arg(long)]
    events: bool,
    /// Threads of the async runtime: 1 (the default) is a current-thread runtime, as the
    /// operator's default; more is a multi-thread one.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    runtime_threads: u16,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = match args.runtime_threads {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        threads => tokio::runtime::Builder::new_multi_thread().worker_threads(threads.into()).enable_all().build()?,
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let limits = client::Limits { qps: args.kube_api_qps, burst: args.kube_api_burst };
    let (client, _) = client::load(
        args.kubeconfig.as_deref().map(std::path::Path::as_os_str),
        None,
        limits,
        &client::RequestMetrics::default(),
    )
    .await?;
    // Events go through the operator's own recorder (queued, written by a background task).
    let recorder = args.events.then(|| Recorder::new(client.clone(), "example.com/database-operator", "bare-writer").0);
    let started = Instant::now();
    let databases: Vec<Database> =
        Api::<Database>::all(client.clone()).list(&ListParams::default()).await.context("listing Databases")?.items;
    let count = databases.len();
    let recorder = Arc::new(recorder);
    futures::stream::iter(databases)
        .map(|db| write(client.clone(), db, recorder.clone()))
        .buffer_unordered(args.workers.max(1))
        .try_for_each(|()| async { Ok(()) })
        .await?;
    eprintln!("bare-writer: wrote {count} Databases in {:.2}s", started.elapsed().as_secs_f64());
    tokio::signal::ctrl_c().await.ok();
    Ok(())
}

async fn write(client: Client, db: Database, recorder: Arc<Option<Recorder>>) -> anyhow::Result<()> {
    let namespace = db.metadata.namespace.clone().unwrap_or_default();
    let name = db.metadata.name.clone().unwrap_or_default();
    let params = PatchParams::apply(desired::FIELD_MANAGER).force();
    // The two children at once, as the operator writes them when its cache holds the
    // Deployment (a new Database's Deployment it writes first: see the reconcile's docs).
    let deployments = Api::<DeploymentView>::namespaced(client.clone(), &namespace);
    let services = Api::<ServiceView>::namespaced(client.clone(), &namespace);
    let (deployment_body, service_body) = (desired::deployment(&db), desired::service(&db));
    let (deployment, _service) = futures::try_join!(
        async {
            deployments
                .patch(&name, &params, &Patch::Apply(&deployment_body))
                .await
                .with_context(|| format!("applying Deployment {namespace}/{name}"))
        },
        async {
            services
                .patch(&name, &params, &Patch::Apply(&service_body))
                .await
                .with_context(|| format!("applying Service {namespace}/{name}"))
        },
    )?;
    if let Some(recorder) = recorder.as_ref() {
        let note = format!("created Deployment {name} and Service {name}");
        recorder.publish(&db, EventType::Normal, "Created", "Reconcile", &note);
    }
    let status = desired::status(&db, Some(&deployment));
    let body = serde_json::json!({
        "apiVersion": Database::api_version(&()),
        "kind": Database::kind(&()),
        "status": status,
    });
    Api::<Database>::namespaced(client, &namespace)
        .patch_status(&name, &params, &Patch::Apply(&body))
        .await
        .with_context(|| format!("applying the status of Database {namespace}/{name}"))?;
    Ok(())
}
