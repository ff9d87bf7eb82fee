//! The Database reconcile of database-operator, written the way the kube-rs community writes a
//! controller: `kube::runtime::Controller` with `.owns()` streams for the Deployment and the
//! Service, reflector `Store`s to read them, `Arc<Context>`, an `error_policy` with per-object
//! backoff, and server-side apply (`Patch::Apply`, forced) as field manager `database-operator`.
//!
//! A peer in the end-to-end benchmark (docs/benchmarks.md): it writes exactly what
//! database-operator writes (the same Deployment, Service, status and events) and only when the
//! cached object differs, so the work is equal and only the machinery differs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, ResourceRequirements, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, CustomResource, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::{info, warn};

mod throttle;

const MANAGER: &str = "database-operator";

/// The Database resource, as database-operator defines it (its CRD is installed from there).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(group = "example.com", version = "v1", kind = "Database", namespaced, status = "DatabaseStatus")]
#[kube(schema = "disabled")]
pub struct DatabaseSpec {
    pub size: Size,
    pub image: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    Small,
    Medium,
    Large,
}

impl Size {
    /// (cpu request, memory request, cpu limit, memory limit)
    fn resources(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Size::Small => ("250m", "256Mi", "500m", "512Mi"),
            Size::Medium => ("500m", "1Gi", "1", "2Gi"),
            Size::Large => ("1", "4Gi", "2", "8Gi"),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DatabaseStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Parser)]
struct Args {
    /// Path to a kubeconfig (default: KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Concurrent reconciles.
    #[arg(long, default_value_t = 2)]
    workers: u16,
    /// Client-side throttling of API requests; 0 disables it.
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f32,
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Threads of the async runtime: 1 (the default) is a current-thread runtime, as
    /// database-operator's default; more is a multi-thread one.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    runtime_threads: u16,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("writing {0}: {1}")]
    Write(String, #[source] kube::Error),
}

/// What every reconcile shares.
struct Context {
    client: Client,
    deployments: Store<Deployment>,
    services: Store<Service>,
    recorder: Recorder,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let args = Args::parse();
    let runtime = match args.runtime_threads {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        threads => tokio::runtime::Builder::new_multi_thread().worker_threads(threads.into()).enable_all().build()?,
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    config.read_timeout = Some(Duration::from_secs(295));
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&throttle::ThrottleLayer::new(args.kube_api_qps, args.kube_api_burst))
        .build();

    // Nothing here reads managedFields: keep them out of the caches (the kube-rs optimization
    // guide's `.modify()`).
    let (databases, databases_writer) = reflector::store();
    let database_stream = watcher(Api::<Database>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|db| db.managed_fields_mut().clear())
        .reflect(databases_writer)
        .applied_objects();
    let (deployments, deployments_writer) = reflector::store();
    let (services, services_writer) = reflector::store();
    let deployment_stream = watcher(Api::<Deployment>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|d| d.managed_fields_mut().clear())
        .reflect(deployments_writer)
        .touched_objects();
    let service_stream = watcher(Api::<Service>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|s| s.managed_fields_mut().clear())
        .reflect(services_writer)
        .touched_objects();

    let reporter =
        Reporter { controller: "example.com/database-operator".into(), instance: std::env::var("HOSTNAME").ok() };
    let context =
        Arc::new(Context { client: client.clone(), deployments, services, recorder: Recorder::new(client, reporter) });
    info!(workers = args.workers, "starting");
    Controller::for_stream(database_stream, databases)
        .owns_stream(deployment_stream)
        .owns_stream(service_stream)
        .with_config(controller::Config::default().concurrency(args.workers))
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(err) = result {
                warn!(error = %err, "reconcile failed");
            }
        })
        .await;
    Ok(())
}

fn error_policy(_db: Arc<Database>, error: &Error, _ctx: Arc<Context>) -> Action {
    warn!(%error, "requeueing");
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(db: Arc<Database>, ctx: Arc<Context>) -> Result<Action, Error> {
    if db.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, name) = (db.namespace().unwrap_or_default(), db.name_any());
    let live_deployment = ctx.deployments.get(&ObjectRef::new(&name).within(&namespace));
    let live_service = ctx.services.get(&ObjectRef::new(&name).within(&namespace));

    let foreign = match (&live_deployment, &live_service) {
        (Some(d), _) if !controlled_by(d.meta(), &db) => Some("Deployment"),
        (_, Some(s)) if !controlled_by(s.meta(), &db) => Some("Service"),
        _ => None,
    };
    let (deployment, blocker) = match foreign {
        Some(kind) => (None, Some(Blocker::NotOwned(kind, name.clone()))),
        None => {
            let mut wrote = Wrote::default();
            let deployment = ensure(&ctx, desired_deployment(&db), live_deployment, &mut wrote).await?;
            let service = ensure(&ctx, desired_service(&db), live_service, &mut wrote).await?;
            wrote.publish(&ctx, &db).await;
            match (deployment, service) {
                (Err(message), _) => (None, Some(Blocker::Rejected("Deployment", message))),
                (Ok(d), Err(message)) => (Some(d), Some(Blocker::Rejected("Service", message))),
                (Ok(d), Ok(_)) => {
                    let failing = failing(&d);
                    (Some(d), failing)
                }
            }
        }
    };
    if let Some(blocker) = &blocker {
        publish(&ctx, &db, EventType::Warning, blocker.reason(), blocker.message()).await;
    }
    let status = desired_status(&db, deployment.as_deref(), blocker.as_ref(), &Time(Timestamp::now()));
    if db.status.as_ref() != Some(&status) {
        let body = json!({"apiVersion": "example.com/v1", "kind": "Database", "status": status});
        Api::<Database>::namespaced(ctx.client.clone(), &namespace)
            .patch_status(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&body))
            .await
            .map_err(|e| Error::Write(format!("status of Database {namespace}/{name}"), e))?;
    }
    Ok(Action::await_change())
}

/// What one reconcile created and updated, told in one event per reason that names every
/// child, as database-operator tells it: the same writes in the benchmark.
#[derive(Default)]
struct Wrote {
    created: Vec<String>,
    updated: Vec<String>,
}

impl Wrote {
    async fn publish(self, ctx: &Context, db: &Database) {
        if !self.created.is_empty() {
            publish(ctx, db, EventType::Normal, "Created", format!("created {}", self.created.join(" and "))).await;
        }
        if !self.updated.is_empty() {
            let note = format!("updated {} to match the Database spec", self.updated.join(" and "));
            publish(ctx, db, EventType::Normal, "Updated", note).await;
        }
    }
}

/// Applies `desired` unless the cached `live` already holds every field it sets, and notes the
/// write in `wrote`. The inner `Err` is the apiserver's refusal (400/422) of the child.
async fn ensure<K>(
    ctx: &Context,
    desired: K,
    live: Option<Arc<K>>,
    wrote: &mut Wrote,
) -> Result<Result<Arc<K>, String>, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Serialize
        + serde::de::DeserializeOwned,
{
    let repair = match &live {
        Some(live) if !differs(&desired, live.as_ref()) => return Ok(Ok(live.clone())),
        Some(_) => true,
        None => false,
    };
    let (namespace, name) = (desired.namespace().unwrap_or_default(), desired.name_any());
    let kind = K::kind(&());
    let api = Api::<K>::namespaced(ctx.client.clone(), &namespace);
    match api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&desired)).await {
        Ok(written) => {
            let list = if repair { &mut wrote.updated } else { &mut wrote.created };
            list.push(format!("{kind} {name}"));
            Ok(Ok(Arc::new(written)))
        }
        Err(kube::Error::Api(status)) if status.code == 400 || status.code == 422 => Ok(Err(status.message)),
        Err(e) => Err(Error::Write(format!("{kind} {namespace}/{name}"), e)),
    }
}

async fn publish(ctx: &Context, db: &Database, type_: EventType, reason: &str, note: String) {
    let event = Event { type_, reason: reason.into(), note: Some(note), action: "Reconcile".into(), secondary: None };
    if let Err(error) = ctx.recorder.publish(&event, &db.object_ref(&())).await {
        warn!(%error, "could not publish an event");
    }
}

fn controlled_by(meta: &ObjectMeta, db: &Database) -> bool {
    let uid = db.meta().uid.as_deref();
    meta.owner_references.iter().flatten().any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == uid)
}

/// Whether `live` lacks, or has another value for, any field `desired` sets.
fn differs<K: Serialize>(desired: &K, live: &K) -> bool {
    fn contains(live: &Value, desired: &Value) -> bool {
        match (live, desired) {
            (Value::Object(l), Value::Object(d)) => {
                d.iter().all(|(k, want)| want.is_null() || l.get(k).is_some_and(|have| contains(have, want)))
            }
            (Value::Array(l), Value::Array(d)) => l.len() == d.len() && l.iter().zip(d).all(|(h, w)| contains(h, w)),
            (l, d) => l == d,
        }
    }
    match (serde_json::to_value(desired), serde_json::to_value(live)) {
        (Ok(d), Ok(l)) => !contains(&l, &d),
        _ => true,
    }
}

fn labels(name: &str) -> BTreeMap<String, String> {
    [
        ("app", name),
        ("app.kubernetes.io/name", "database"),
        ("app.kubernetes.io/instance", name),
        ("app.kubernetes.io/component", "database"),
        ("app.kubernetes.io/managed-by", MANAGER),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn child_metadata(db: &Database) -> ObjectMeta {
    ObjectMeta {
        name: Some(db.name_any()),
        namespace: db.namespace(),
        labels: Some(labels(&db.name_any())),
        owner_references: Some(vec![db.controller_owner_ref(&()).expect("a Database from the apiserver has a uid")]),
        ..Default::default()
    }
}

fn desired_deployment(db: &Database) -> Deployment {
    let name = db.name_any();
    let (cpu_request, memory_request, cpu_limit, memory_limit) = db.spec.size.resources();
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([("cpu".to_string(), Quantity(cpu.into())), ("memory".to_string(), Quantity(memory.into()))])
    };
    Deployment {
        metadata: child_metadata(db),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_string(), name.clone())])),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(&name)), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "database".into(),
                        image: Some(db.spec.image.clone()),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".into()),
                            container_port: 8080,
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        }]),
                        resources: Some(ResourceRequirements {
                            requests: Some(quantities(cpu_request, memory_request)),
                            limits: Some(quantities(cpu_limit, memory_limit)),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

fn desired_service(db: &Database) -> Service {
    Service {
        metadata: child_metadata(db),
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([("app".to_string(), db.name_any())])),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 8080,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

enum Blocker {
    NotOwned(&'static str, String),
    Rejected(&'static str, String),
    DeploymentFailing(String, String),
}

impl Blocker {
    fn reason(&self) -> &str {
        match self {
            Blocker::NotOwned(..) => "ResourceExists",
            Blocker::Rejected(..) => "InvalidSpec",
            Blocker::DeploymentFailing(reason, _) => reason,
        }
    }

    fn message(&self) -> String {
        match self {
            Blocker::NotOwned(kind, name) => format!(
                "{kind} {name:?} already exists and is not managed by this Database; \
                 delete or rename it, or rename the Database"
            ),
            Blocker::Rejected(kind, message) => {
                format!("the {kind} for this spec was rejected by the API server: {message}; fix the Database spec")
            }
            Blocker::DeploymentFailing(_, message) => format!("the Deployment cannot run the database: {message}"),
        }
    }
}

fn failing(deployment: &Deployment) -> Option<Blocker> {
    let conditions = deployment.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| {
            (c.type_ == "ReplicaFailure" && c.status == "True")
                || (c.type_ == "Progressing"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
        })
        .map(|c| {
            Blocker::DeploymentFailing(
                c.reason.clone().unwrap_or_else(|| c.type_.clone()),
                c.message.clone().unwrap_or_default(),
            )
        })
}

fn rolled_out(deployment: &Deployment) -> bool {
    let Some(status) = &deployment.status else { return false };
    let wanted = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    status.observed_generation >= deployment.metadata.generation
        && status.updated_replicas.unwrap_or(0) >= wanted
        && status.replicas.unwrap_or(0) <= wanted
}

/// database-operator's status rules: phase Pending / Ready / Degraded and the conditions
/// Ready, Progressing, Degraded, whose transition times move only when their status flips.
fn desired_status(
    db: &Database,
    deployment: Option<&Deployment>,
    blocker: Option<&Blocker>,
    now: &Time,
) -> DatabaseStatus {
    let generation = db.meta().generation;
    let previous = db.status.as_ref();
    let ready_replicas = deployment.and_then(|d| d.status.as_ref()?.ready_replicas).unwrap_or(0);
    let rolled_out = deployment.is_some_and(rolled_out);
    let was_ready = previous.is_some_and(|s| match s.phase.as_deref() {
        Some("Ready") => true,
        Some("Degraded") => s.conditions.iter().any(|c| c.type_ == "Degraded" && c.reason == "NoReadyReplicas"),
        _ => false,
    });
    let progressing_now = (true, "Reconciling", "the Deployment is rolling out the current spec".to_string());
    let (phase, ready, progressing, degraded) = match blocker {
        Some(b) => (
            "Degraded",
            (false, b.reason(), b.message()),
            (false, b.reason(), "the operator cannot proceed until the problem is fixed".to_string()),
            (true, b.reason(), b.message()),
        ),
        None if ready_replicas > 0 && (rolled_out || was_ready) => (
            "Ready",
            (true, "DeploymentReady", format!("{ready_replicas} replica(s) ready")),
            if rolled_out {
                (false, "ReconcileComplete", "the Deployment and Service match the spec".to_string())
            } else {
                progressing_now
            },
            (false, "AsExpected", "the database is running as expected".to_string()),
        ),
        None if was_ready => (
            "Degraded",
            (false, "NoReadyReplicas", "the database was ready and has no ready replica now".to_string()),
            progressing_now,
            (true, "NoReadyReplicas", "the database was ready and has no ready replica now".to_string()),
        ),
        None => (
            "Pending",
            (
                false,
                "DeploymentNotReady",
                "waiting for the Deployment to roll out and a replica to become ready".to_string(),
            ),
            progressing_now,
            (false, "AsExpected", "nothing is wrong yet".to_string()),
        ),
    };
    let condition = |type_: &str, (status, reason, message): (bool, &str, String)| {
        let status = if status { "True" } else { "False" }.to_string();
        let last_transition_time = previous
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message,
            last_transition_time,
            observed_generation: generation,
        }
    };
    DatabaseStatus {
        observed_generation: generation,
        ready_replicas: Some(ready_replicas),
        phase: Some(phase.to_string()),
        conditions: vec![
            condition("Ready", ready),
            condition("Progressing", progressing),
            condition("Degraded", degraded),
        ],
    }
}
