//! The measuring side of the end-to-end reconcile benchmark (hack/bench/e2e.sh), the same for
//! every implementation measured.
//!
//! - `seed`: creates the benchmark namespaces and N parent objects in them (Databases, or
//!   sample-controller's Foos), before any controller runs.
//! - `run`: watches the parents and their Deployments and Services (one list, then one watch
//!   per resource, metadata only for the children: the lowest-cost way to see every change),
//!   starts the implementation's command, and stops the clock when every parent has its
//!   children and an up-to-date status. At that moment it reads the process's CPU time
//!   (utime + stime, /proc/PID/stat) and peak RSS (VmHWM, /proc/PID/status), then stops it.
//!   While it waits it also samples the resident set's two halves (RssAnon: heap and stacks;
//!   RssFile: the mapped binary and libraries) and reports the highest of each, so that a change
//!   in peak RSS can be told apart as memory the program holds or code it touched. It prints
//!   one JSON line with the figures.
//!
//! Converged means, for a Database: a Deployment and a Service of the same name whose
//! controller ownerReference carries the Database's uid, and `status.observedGeneration ==
//! metadata.generation`. For a Foo (sample-controller, which has no Service and no
//! observedGeneration): a Deployment named `spec.deploymentName` controlled by the Foo, and
//! `status.availableReplicas` written.
//!
//! Not part of the crate's API: an example target so that it shares the crate's build.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use database_operator::desired::ROLLOUT_LABEL;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube_client::Client;
use kube_client::api::{Api, ListParams, PostParams, WatchParams};
use kube_core::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, WatchEvent};
use serde_json::json;
use tokio::sync::Notify;

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// example.com/v1 Database (database-operator and its peers).
    Database,
    /// samplecontroller.k8s.io/v1alpha1 Foo (k8s.io/sample-controller).
    Foo,
    /// apps/v1 Deployments of nobody's (0 replicas, none of the operator's labels): the rest
    /// of a cluster, which an operator should not pay memory for. `seed` only.
    UnrelatedDeployment,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the namespaces and N parents spread over them.
    Seed {
        #[arg(long, value_enum)]
        kind: Kind,
        #[arg(long)]
        n: usize,
        /// Comma-separated namespaces (created here).
        #[arg(long, value_delimiter = ',')]
        namespaces: Vec<String>,
        /// Creates in flight.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
    },
    /// Start COMMAND and measure until every parent in NAMESPACES has converged.
    Run {
        #[arg(long, value_enum)]
        kind: Kind,
        #[arg(long)]
        n: usize,
        #[arg(long, value_delimiter = ',')]
        namespaces: Vec<String>,
        /// Where the command's stdout and stderr go.
        #[arg(long)]
        log: PathBuf,
        /// Also report the CPU-seconds these processes (NAME=PID, e.g. the apiserver) spent
        /// during the measurement.
        #[arg(long = "also", value_parser = parse_named_pid)]
        also: Vec<(String, u32)>,
        /// Write the apiserver's requests during the measurement (the increase of
        /// apiserver_request_total by verb, resource and subresource) to this file.
        #[arg(long)]
        requests: Option<PathBuf>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
        /// A rollout: converged also means that the Deployment carries the label
        /// bench.example.com/rollout=MARKER (the script starts the command with
        /// DATABASE_OPERATOR_BENCH_ROLLOUT=MARKER, or the peer's equivalent).
        #[arg(long)]
        rollout: Option<String>,
        /// Databases created while the command runs, in --arrival-namespace (created here), one
        /// every --arrival-interval-ms, from the moment the first Deployment is rolled (at once
        /// without --rollout). Their latencies from create to converged are reported.
        #[arg(long, default_value_t = 0)]
        arrivals: usize,
        #[arg(long, default_value = "arrivals")]
        arrival_namespace: String,
        #[arg(long, default_value_t = 500)]
        arrival_interval_ms: u64,
        /// After convergence, keep the command running until its CPU time has not moved for
        /// this many seconds, and report when it last moved (`busy_seconds`): for a restart,
        /// where everything has converged before the command starts, the time it takes to go
        /// through every key.
        #[arg(long)]
        idle_secs: Option<f64>,
        /// After convergence, keep the command running until none of its writes has been seen
        /// for this many seconds: a parent's status (any change of a parent once seeded), a
        /// Service created or changed, a Deployment created or its spec changed (a new
        /// generation: kube-controller-manager's status writes make none), an Event about a
        /// parent. Seen through the watches, so the same for every implementation whatever it
        /// exposes. Reports when the last one came (`idle_seconds`), the writes seen
        /// (`writes`, `writes_after_convergence`), and the CPU time and peak RSS at the end of
        /// the quiet window; `converged_cpu_seconds` is the CPU time at convergence.
        #[arg(long)]
        quiet_secs: Option<f64>,
        /// The implementation's command line.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

fn api_resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Database => ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Database")),
        Kind::Foo => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo"),
            "foos",
        ),
        Kind::UnrelatedDeployment => ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment")),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let client = Client::try_default().await.context("loading KUBECONFIG")?;
    match cli.command {
        Command::Seed { kind, n, namespaces, concurrency } => seed(client, kind, n, &namespaces, concurrency).await,
        Command::Run {
            kind,
            n,
            namespaces,
            log,
            also,
            requests,
            timeout,
            rollout,
            arrivals,
            arrival_namespace,
            arrival_interval_ms,
            idle_secs,
            quiet_secs,
            command,
        } => {
            let arrivals = Arrivals {
                count: arrivals,
                namespace: arrival_namespace,
                interval: Duration::from_millis(arrival_interval_ms),
            };
            let options = RunOptions {
                log,
                also,
                requests,
                timeout: Duration::from_secs(timeout),
                rollout,
                arrivals,
                idle: idle_secs.map(Duration::from_secs_f64),
                quiet: quiet_secs.map(Duration::from_secs_f64),
            };
            run(client, kind, n, namespaces, options, command).await
        }
    }
}

async fn seed(client: Client, kind: Kind, n: usize, namespaces: &[String], concurrency: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces {
        let namespace =
            Namespace { metadata: ObjectMeta { name: Some(ns.clone()), ..Default::default() }, ..Default::default() };
        ns_api.create(&PostParams::default(), &namespace).await.with_context(|| format!("creating namespace {ns}"))?;
    }
    let resource = api_resource(kind);
    futures::stream::iter(0..n)
        .map(|i| {
            let (client, resource) = (client.clone(), resource.clone());
            let ns = namespaces[i % namespaces.len()].clone();
            async move {
                let name = format!("db-{i:05}");
                let spec = match kind {
                    Kind::Database => json!({"size": "small", "image": "postgres:17"}),
                    Kind::Foo => json!({"deploymentName": name, "replicas": 1}),
                    Kind::UnrelatedDeployment => json!({
                        "replicas": 0,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}
                    }),
                };
                let object = DynamicObject::new(&name, &resource).within(&ns).data(json!({ "spec": spec }));
                let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &resource);
                api.create(&PostParams::default(), &object).await.with_context(|| format!("creating {ns}/{name}"))
            }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    eprintln!(
        "[probe] seeded {n} {kind:?} objects in {} namespaces in {:.1}s",
        namespaces.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What the watches have seen, per `namespace/name`, and which parents have converged.
#[derive(Default)]
struct State {
    /// parent key -> (uid, converged status, child key)
    parents: HashMap<String, (String, bool, String)>,
    /// child key -> controller uid, per child kind
    deployments: HashMap<String, String>,
    services: HashMap<String, String>,
    converged: HashSet<String>,
    /// With --rollout: the label value every Deployment must carry, and the Deployments that do.
    marker: Option<String>,
    rolled: HashSet<String>,
    /// Arrivals not yet converged: when each was created.
    created: HashMap<String, Instant>,
    /// Arrivals' seconds from create to converged.
    latencies: Vec<f64>,
    /// The command's writes seen so far ([`Watch::apply`]), and when the last one was seen.
    writes: u64,
    last_write: Option<Instant>,
    /// Deployment key -> its generation: a new one is a write of the command's.
    generations: HashMap<String, i64>,
}

impl State {
    fn check(&mut self, kind: Kind, parent: &str) {
        let done = self.parents.get(parent).is_some_and(|(uid, status_ok, child)| {
            *status_ok
                && self.deployments.get(child) == Some(uid)
                && (kind == Kind::Foo || self.services.get(child) == Some(uid))
                && (self.marker.is_none() || self.rolled.contains(child))
        });
        if done {
            self.converged.insert(parent.to_string());
            if let Some(created) = self.created.remove(parent) {
                self.latencies.push(created.elapsed().as_secs_f64());
            }
        } else {
            self.converged.remove(parent);
        }
    }

    /// The parents whose child is `child` (the child's key equals the parent's for
    /// Databases; for Foos it is the Foo's deploymentName, which the seed sets to its name).
    fn parents_of(&self, child: &str) -> Vec<String> {
        if self.parents.contains_key(child) { vec![child.to_string()] } else { Vec::new() }
    }
}

fn key(meta: &ObjectMeta) -> String {
    format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}

fn controller_uid(meta: &ObjectMeta) -> String {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
        .unwrap_or_default()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Watched {
    Parent,
    Deployment,
    Service,
    /// Events about parents (a field selector on the involved object's kind).
    Event,
}

/// How an object reached the probe: in a list, or in a watch event.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Listed,
    Added,
    Modified,
    Deleted,
}

struct Watch {
    state: Arc<Mutex<State>>,
    kind: Kind,
    namespaces: Arc<HashSet<String>>,
    changed: Arc<Notify>,
}

impl Watch {
    fn apply(&self, what: Watched, meta: &ObjectMeta, data: Option<&serde_json::Value>, seen: Seen) {
        if !meta.namespace.as_ref().is_some_and(|ns| self.namespaces.contains(ns)) {
            return;
        }
        let key = key(meta);
        let deleted = seen == Seen::Deleted;
        let mut state = self.state.lock().expect("no panics while locked");
        // Whether this is a write of the command's: once the parents are seeded, nothing else
        // changes a parent, writes a Service, changes a Deployment's spec or reports on a
        // parent (an added parent is an arrival, the probe's own write).
        let new_generation = what == Watched::Deployment && !deleted && {
            let generation = meta.generation.unwrap_or_default();
            state.generations.insert(key.clone(), generation).is_none_or(|before| generation > before)
        };
        let wrote = match (seen, what) {
            (Seen::Listed | Seen::Deleted, _) => false,
            (_, Watched::Parent) => seen == Seen::Modified,
            (_, Watched::Deployment) => new_generation,
            (_, Watched::Service | Watched::Event) => true,
        };
        if wrote {
            state.writes += 1;
            state.last_write = Some(Instant::now());
        }
        let parents = match what {
            Watched::Event => Vec::new(),
            Watched::Parent => {
                if deleted {
                    state.parents.remove(&key);
                } else {
                    let status = data.and_then(|d| d.get("status"));
                    let status_ok = match self.kind {
                        Kind::Database => {
                            meta.generation.is_some()
                                && status.and_then(|s| s.get("observedGeneration")).and_then(|g| g.as_i64())
                                    == meta.generation
                        }
                        Kind::Foo => status.and_then(|s| s.get("availableReplicas")).is_some(),
                        Kind::UnrelatedDeployment => unreachable!("refused by run"),
                    };
                    let child = match self.kind {
                        Kind::Database => key.clone(),
                        Kind::UnrelatedDeployment => unreachable!("refused by run"),
                        Kind::Foo => format!(
                            "{}/{}",
                            meta.namespace.as_deref().unwrap_or_default(),
                            data.and_then(|d| d["spec"]["deploymentName"].as_str()).unwrap_or_default()
                        ),
                    };
                    state.parents.insert(key.clone(), (meta.uid.clone().unwrap_or_default(), status_ok, child));
                }
                vec![key]
            }
            Watched::Deployment | Watched::Service => {
                let map = if what == Watched::Deployment { &mut state.deployments } else { &mut state.services };
                if deleted {
                    map.remove(&key);
                } else {
                    map.insert(key.clone(), controller_uid(meta));
                }
                if what == Watched::Deployment
                    && let Some(marker) = state.marker.clone()
                {
                    let carries = meta.labels.as_ref().and_then(|l| l.get(ROLLOUT_LABEL)) == Some(&marker);
                    if carries && !deleted {
                        state.rolled.insert(key.clone());
                    } else {
                        state.rolled.remove(&key);
                    }
                }
                state.parents_of(&key)
            }
        };
        for parent in parents {
            state.check(self.kind, &parent);
        }
        drop(state);
        self.changed.notify_one();
    }
}

/// Lists then watches `api` for ever, feeding `watch`; relists when the watch expires (410).
/// `listed` is notified after the first list.
async fn follow<K>(
    api: Api<K>,
    what: Watched,
    watch: Arc<Watch>,
    listed: Arc<Notify>,
    metadata_only: bool,
    fields: Option<&'static str>,
) -> anyhow::Result<()>
where
    K: kube_core::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K: serde::Serialize,
{
    let mut first = true;
    loop {
        // One paginated list, then a watch from its resourceVersion.
        let mut rv;
        let mut continue_token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(500);
            if let Some(fields) = fields {
                lp = lp.fields(fields);
            }
            if let Some(token) = &continue_token {
                lp = lp.continue_token(token);
            }
            if metadata_only {
                let list = api.list_metadata(&lp).await?;
                for item in &list.items {
                    watch.apply(what, &item.metadata, None, Seen::Listed);
                }
                rv = list.metadata.resource_version.unwrap_or_default();
                continue_token = list.metadata.continue_.filter(|c| !c.is_empty());
            } else {
                let list = api.list(&lp).await?;
                for item in &list.items {
                    let value = serde_json::to_value(item)?;
                    watch.apply(what, item.meta(), Some(&value), Seen::Listed);
                }
                rv = list.metadata.resource_version.unwrap_or_default();
                continue_token = list.metadata.continue_.filter(|c| !c.is_empty());
            }
            if continue_token.is_none() {
                break;
            }
        }
        if first {
            listed.notify_one();
            first = false;
        }
        loop {
            let mut wp = WatchParams::default().timeout(290);
            if let Some(fields) = fields {
                wp = wp.fields(fields);
            }
            let expired = if metadata_only {
                let mut stream = api.watch_metadata(&wp, &rv).await?.boxed();
                let mut expired = false;
                while let Some(event) = stream.try_next().await? {
                    match event {
                        WatchEvent::Added(o) => {
                            rv = o.metadata.resource_version.clone().unwrap_or(rv);
                            watch.apply(what, &o.metadata, None, Seen::Added);
                        }
                        WatchEvent::Modified(o) => {
                            rv = o.metadata.resource_version.clone().unwrap_or(rv);
                            watch.apply(what, &o.metadata, None, Seen::Modified);
                        }
                        WatchEvent::Deleted(o) => {
                            rv = o.metadata.resource_version.clone().unwrap_or(rv);
                            watch.apply(what, &o.metadata, None, Seen::Deleted);
                        }
                        WatchEvent::Bookmark(b) => rv = b.metadata.resource_version,
                        WatchEvent::Error(status) if status.code == 410 => expired = true,
                        WatchEvent::Error(status) => bail!("watch error: {}", status.message),
                    }
                }
                expired
            } else {
                let mut stream = api.watch(&wp, &rv).await?.boxed();
                let mut expired = false;
                while let Some(event) = stream.try_next().await? {
                    match event {
                        WatchEvent::Added(o) => {
                            rv = o.meta().resource_version.clone().unwrap_or(rv);
                            watch.apply(what, o.meta(), Some(&serde_json::to_value(&o)?), Seen::Added);
                        }
                        WatchEvent::Modified(o) => {
                            rv = o.meta().resource_version.clone().unwrap_or(rv);
                            watch.apply(what, o.meta(), Some(&serde_json::to_value(&o)?), Seen::Modified);
                        }
                        WatchEvent::Deleted(o) => {
                            rv = o.meta().resource_version.clone().unwrap_or(rv);
                            watch.apply(what, o.meta(), None, Seen::Deleted);
                        }
                        WatchEvent::Bookmark(b) => rv = b.metadata.resource_version,
                        WatchEvent::Error(status) if status.code == 410 => expired = true,
                        WatchEvent::Error(status) => bail!("watch error: {}", status.message),
                    }
                }
                expired
            };
            if expired {
                break;
            }
        }
    }
}

fn parse_named_pid(value: &str) -> Result<(String, u32), String> {
    let (name, pid) = value.split_once('=').ok_or("expected NAME=PID")?;
    Ok((name.to_string(), pid.parse().map_err(|e| format!("{pid}: {e}"))?))
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = stat.rsplit_once(')').context("malformed stat")?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); fields[0] is field 3.
    Ok(fields[11].parse::<f64>()? + fields[12].parse::<f64>()?)
}

/// utime + stime in seconds, and VmHWM in MiB, of a running process.
fn usage(pid: u32, ticks_per_second: f64) -> anyhow::Result<(f64, f64)> {
    let ticks = cpu_ticks(pid)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .context("no VmHWM")?
        .parse()?;
    Ok((ticks / ticks_per_second, hwm_kib / 1024.0))
}

/// The highest RssAnon and RssFile seen, in KiB, sampled at most every 100 ms.
#[derive(Default)]
struct RssHalves {
    anon_kib: f64,
    file_kib: f64,
    sampled: Option<Instant>,
}

impl RssHalves {
    fn sample(&mut self, pid: u32) {
        if self.sampled.is_some_and(|at| at.elapsed() < Duration::from_millis(100)) {
            return;
        }
        self.sampled = Some(Instant::now());
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return };
        for line in status.lines() {
            let kib = |v: &str| v.split_whitespace().next().and_then(|k| k.parse::<f64>().ok()).unwrap_or(0.0);
            if let Some(v) = line.strip_prefix("RssAnon:") {
                self.anon_kib = self.anon_kib.max(kib(v));
            } else if let Some(v) = line.strip_prefix("RssFile:") {
                self.file_kib = self.file_kib.max(kib(v));
            }
        }
    }
}

/// How `run` measures, besides what it waits for.
struct RunOptions {
    log: PathBuf,
    also: Vec<(String, u32)>,
    requests: Option<PathBuf>,
    timeout: Duration,
    rollout: Option<String>,
    arrivals: Arrivals,
    idle: Option<Duration>,
    quiet: Option<Duration>,
}

/// Waits until `pid`'s CPU time has not moved for `idle` (or `deadline` passes); returns when
/// it last moved.
async fn wait_until_idle(pid: u32, idle: Duration, deadline: Instant) -> anyhow::Result<Instant> {
    let mut ticks = cpu_ticks(pid)?;
    let mut moved = Instant::now();
    while moved.elapsed() < idle && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = cpu_ticks(pid)?;
        if now > ticks {
            (ticks, moved) = (now, Instant::now());
        }
    }
    Ok(moved)
}

/// Waits until no write of the command has been seen for `quiet` (fails at `deadline`);
/// returns when the last one was seen, if any was.
async fn wait_until_quiet(watch: &Watch, quiet: Duration, deadline: Instant) -> anyhow::Result<Option<Instant>> {
    let waited = Instant::now();
    loop {
        let last = watch.state.lock().expect("no panics while locked").last_write;
        if last.unwrap_or(waited).elapsed() >= quiet {
            return Ok(last);
        }
        anyhow::ensure!(Instant::now() < deadline, "the command still wrote at the timeout");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// New Databases created during a run.
struct Arrivals {
    count: usize,
    namespace: String,
    interval: Duration,
}

/// Creates the arrivals one by one, after the first Deployment is rolled if there is a rollout,
/// writing each one's creation time before creating it.
async fn arrive(client: Client, arrivals: Arrivals, watch: Arc<Watch>) -> anyhow::Result<()> {
    loop {
        let started = {
            let state = watch.state.lock().expect("no panics while locked");
            state.marker.is_none() || !state.rolled.is_empty()
        };
        if started {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resource = api_resource(Kind::Database);
    let api: Api<DynamicObject> = Api::namespaced_with(client, &arrivals.namespace, &resource);
    let mut tick = tokio::time::interval(arrivals.interval);
    for i in 0..arrivals.count {
        tick.tick().await;
        let name = format!("new-{i:04}");
        let key = format!("{}/{name}", arrivals.namespace);
        watch.state.lock().expect("no panics while locked").created.insert(key, Instant::now());
        let object = DynamicObject::new(&name, &resource)
            .within(&arrivals.namespace)
            .data(json!({ "spec": {"size": "small", "image": "postgres:17"} }));
        api.create(&PostParams::default(), &object).await.with_context(|| format!("creating arrival {name}"))?;
    }
    Ok(())
}

/// The `q` quantile of `values` (sorted here), nearest rank.
fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len().max(1));
    values.get(rank - 1).map(|v| (v * 1000.0).round() / 1000.0)
}

/// apiserver_request_total summed by (verb, group/resource/subresource), from /metrics.
async fn apiserver_requests(client: &Client) -> anyhow::Result<HashMap<(String, String), f64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await.context("reading the apiserver's /metrics")?;
    let mut totals = HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else { continue };
        let label = |name: &str| {
            labels
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_string()
        };
        let (group, resource, subresource) = (label("group"), label("resource"), label("subresource"));
        let mut what = if group.is_empty() { resource } else { format!("{group}/{resource}") };
        if !subresource.is_empty() {
            what = format!("{what}/{subresource}");
        }
        *totals.entry((label("verb"), what)).or_default() += value.parse::<f64>().unwrap_or(0.0);
    }
    Ok(totals)
}

async fn run(
    client: Client,
    kind: Kind,
    n: usize,
    namespaces: Vec<String>,
    options: RunOptions,
    command: Vec<String>,
) -> anyhow::Result<()> {
    let RunOptions { log, also, requests, timeout, rollout, arrivals, idle, quiet } = options;
    anyhow::ensure!(kind != Kind::UnrelatedDeployment, "unrelated Deployments are seeded, not measured");
    anyhow::ensure!(kind == Kind::Database || arrivals.count == 0, "arrivals are Databases");
    let mut namespaces = namespaces;
    if arrivals.count > 0 {
        let namespace = Namespace {
            metadata: ObjectMeta { name: Some(arrivals.namespace.clone()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {}", arrivals.namespace))?;
        namespaces.push(arrivals.namespace.clone());
    }
    let total = n + arrivals.count;
    let ticks_per_second: f64 =
        String::from_utf8(std::process::Command::new("getconf").arg("CLK_TCK").output()?.stdout)?
            .trim()
            .parse()
            .context("getconf CLK_TCK")?;
    let watch = Arc::new(Watch {
        state: Arc::new(Mutex::new(State { marker: rollout.clone(), ..State::default() })),
        kind,
        namespaces: Arc::new(namespaces.into_iter().collect()),
        changed: Arc::new(Notify::new()),
    });
    let listed: Vec<Arc<Notify>> = (0..4).map(|_| Arc::new(Notify::new())).collect();
    let resource = api_resource(kind);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(follow(
        Api::<DynamicObject>::all_with(client.clone(), &resource),
        Watched::Parent,
        watch.clone(),
        listed[0].clone(),
        false,
        None,
    ));
    tasks.spawn(follow(
        Api::<Deployment>::all(client.clone()),
        Watched::Deployment,
        watch.clone(),
        listed[1].clone(),
        true,
        None,
    ));
    tasks.spawn(follow(
        Api::<Service>::all(client.clone()),
        Watched::Service,
        watch.clone(),
        listed[2].clone(),
        true,
        None,
    ));
    let about = if kind == Kind::Foo { "involvedObject.kind=Foo" } else { "involvedObject.kind=Database" };
    tasks.spawn(follow(
        Api::<k8s_openapi::api::core::v1::Event>::all(client.clone()),
        Watched::Event,
        watch.clone(),
        listed[3].clone(),
        true,
        Some(about),
    ));
    for l in &listed {
        l.notified().await;
    }
    let parents = watch.state.lock().expect("no panics while locked").parents.len();
    if parents != n {
        bail!("expected {n} parents in the benchmark namespaces before the start, found {parents}");
    }

    let requests_before = match &requests {
        Some(_) => Some(apiserver_requests(&client).await?),
        None => None,
    };
    let also_before: Vec<f64> = also.iter().map(|(_, pid)| cpu_ticks(*pid).unwrap_or(f64::NAN)).collect();
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", command[0]))?;
    let pid = child.id().context("the command exited at once")?;
    eprintln!("[probe] started pid {pid}: {}", command.join(" "));
    if arrivals.count > 0 {
        tasks.spawn(arrive(client.clone(), arrivals, watch.clone()));
    }

    // Stopped ourselves (Ctrl-C, or the script's trap): stop the command too.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let deadline = started + timeout;
    let mut last_report = Instant::now();
    let mut halves = RssHalves::default();
    let outcome = loop {
        halves.sample(pid);
        let converged = watch.state.lock().expect("no panics while locked").converged.len();
        if converged >= total {
            break Ok(started.elapsed());
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            eprintln!("[probe] {:>5.0}s: {converged}/{total} converged", started.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
        tokio::select! {
            _ = watch.changed.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            status = child.wait() => break Err(anyhow::anyhow!("the command exited before convergence: {}", status?)),
            Some(result) = tasks.join_next() => match result? {
                // The arrivals are all created; the watches go on.
                Ok(()) => continue,
                Err(error) => break Err(anyhow::anyhow!("a watch or the arrivals stopped: {error:#}")),
            },
            _ = terminate.recv() => break Err(anyhow::anyhow!("terminated")),
            _ = tokio::signal::ctrl_c() => break Err(anyhow::anyhow!("interrupted")),
        }
        if Instant::now() > deadline {
            break Err(anyhow::anyhow!("timed out with {converged}/{total} converged"));
        }
    };
    let converged_cpu = usage(pid, ticks_per_second).map(|(cpu, _)| cpu);
    let writes_at_convergence = watch.state.lock().expect("no panics while locked").writes;
    let quiet = match (&outcome, quiet) {
        (Ok(_), Some(quiet)) => tokio::select! {
            // Idle is never before convergence: the probe sees the last write a moment before
            // it counts the convergence that write made.
            last = wait_until_quiet(&watch, quiet, deadline) => {
                let converged = *outcome.as_ref().expect("matched Ok");
                Some(last?.map_or(converged, |at| at.duration_since(started).max(converged)))
            }
            _ = terminate.recv() => bail!("terminated while waiting for the command's writes to stop"),
            _ = tokio::signal::ctrl_c() => bail!("interrupted while waiting for the command's writes to stop"),
        },
        _ => None,
    };
    let busy = match (&outcome, idle) {
        (Ok(_), Some(idle)) => tokio::select! {
            moved = wait_until_idle(pid, idle, deadline) => Some(moved?.duration_since(started)),
            _ = terminate.recv() => bail!("terminated while waiting for the command to go idle"),
            _ = tokio::signal::ctrl_c() => bail!("interrupted while waiting for the command to go idle"),
        },
        _ => None,
    };
    halves.sampled = None;
    halves.sample(pid);
    let measured = usage(pid, ticks_per_second);
    let also_cpu: serde_json::Map<String, serde_json::Value> = also
        .iter()
        .zip(&also_before)
        .map(|((name, pid), before)| {
            let spent = (cpu_ticks(*pid).unwrap_or(f64::NAN) - before) / ticks_per_second;
            (format!("{name}_cpu_seconds"), json!((spent * 100.0).round() / 100.0))
        })
        .collect();
    if let (Some(path), Some(before)) = (&requests, &requests_before) {
        let after = apiserver_requests(&client).await?;
        let mut rows: Vec<_> = after
            .iter()
            .map(|(key, v)| (key, v - before.get(key).copied().unwrap_or(0.0)))
            .filter(|(_, delta)| *delta > 0.0)
            .collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        let text: String = rows.iter().map(|((verb, what), delta)| format!("{delta}\t{verb}\t{what}\n")).collect();
        std::fs::write(path, text)?;
    }
    let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    if outcome.is_err() {
        // What a stopped rollout still tells: how long the arrivals that made it took.
        let mut latencies = watch.state.lock().expect("no panics while locked").latencies.clone();
        if !latencies.is_empty() {
            eprintln!(
                "[probe] before it stopped, {} arrivals converged: p50 {:.3} s, p99 {:.3} s, max {:.3} s",
                latencies.len(),
                quantile(&mut latencies, 0.5).unwrap_or(f64::NAN),
                quantile(&mut latencies, 0.99).unwrap_or(f64::NAN),
                quantile(&mut latencies, 1.0).unwrap_or(f64::NAN)
            );
        }
    }
    let seconds = outcome?.as_secs_f64();
    let (cpu_seconds, rss_mib) = measured?;
    let mut result = json!({
        "n": n,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "per_second": ((n as f64 / seconds) * 10.0).round() / 10.0,
        "cpu_seconds": (cpu_seconds * 100.0).round() / 100.0,
        "rss_mib": (rss_mib * 10.0).round() / 10.0,
        "rss_anon_peak_mib": (halves.anon_kib / 102.4).round() / 10.0,
        "rss_file_peak_mib": (halves.file_kib / 102.4).round() / 10.0,
    });
    result.as_object_mut().expect("an object").extend(also_cpu);
    if let Some(busy) = busy {
        result["busy_seconds"] = json!((busy.as_secs_f64() * 1000.0).round() / 1000.0);
    }
    if let Some(idle) = quiet {
        let writes = watch.state.lock().expect("no panics while locked").writes;
        result["idle_seconds"] = json!((idle.as_secs_f64() * 1000.0).round() / 1000.0);
        result["converged_cpu_seconds"] = json!((converged_cpu? * 100.0).round() / 100.0);
        result["writes"] = json!(writes);
        result["writes_after_convergence"] = json!(writes - writes_at_convergence);
    }
    let mut latencies = std::mem::take(&mut watch.state.lock().expect("no panics while locked").latencies);
    if !latencies.is_empty() {
        let extra = json!({
            "arrivals": latencies.len(),
            "arrival_p50_s": quantile(&mut latencies, 0.5),
            "arrival_p99_s": quantile(&mut latencies, 0.99),
            "arrival_max_s": quantile(&mut latencies, 1.0),
        });
        result.as_object_mut().expect("an object").extend(extra.as_object().expect("an object").clone());
    }
    println!("{result}");
    Ok(())
}
