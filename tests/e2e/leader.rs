//! Leader election with two operator processes (the real binary) on the real plane: only the
//! holder of the Lease writes; a killed leader is replaced within the Lease duration, a
//! terminated one at once because it releases the Lease.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use database_operator::api::{Database, DatabaseSpec, Phase, Size};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube_client::Client;
use kube_client::api::{Api, PostParams};

use crate::common::{TestNamespace, client, free_address, http_get, install_crd, wait_until};

const LEASE: &str = "database-operator-e2e";
const LEASE_DURATION: Duration = Duration::from_secs(6);
const RETRY_PERIOD: Duration = Duration::from_secs(1);

/// One operator process, logging JSON to a file of its own.
struct Replica {
    name: &'static str,
    child: Child,
    log: PathBuf,
    metrics: std::net::SocketAddr,
}

impl Replica {
    fn start(name: &'static str, namespace: &str, dir: &Path) -> Self {
        Self::start_with(name, namespace, dir, &[])
    }

    /// A replica with `extra` flags after the usual ones (the last of a repeated flag wins).
    fn start_with(name: &'static str, namespace: &str, dir: &Path, extra: &[&str]) -> Self {
        let log = dir.join(format!("{name}.log"));
        let metrics = free_address();
        let child = Command::new(env!("CARGO_BIN_EXE_database-operator"))
            .args(["run", "--namespace", namespace, "--leader-elect", "--leader-election-id", LEASE])
            .args(["--leader-election-namespace", namespace, "--leader-elect-lease-duration", "6s"])
            .args(["--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s"])
            .args(["--metrics-bind-address", &metrics.to_string(), "--metrics-secure=false"])
            .args(["--health-probe-bind-address", "0"])
            .args(["--log-format", "json", "--log-level", "info"])
            .args(extra)
            .env("POD_NAME", name)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create the log file"))
            .spawn()
            .expect("start the operator binary");
        Self { name, child, log, metrics }
    }

    /// The value of `leader_election_master_status` in this replica's /metrics, once it serves.
    async fn leader_status(&self) -> f64 {
        let series = format!(r#"leader_election_master_status{{name="{LEASE}"}} "#);
        wait_until(&format!("replica {} to serve /metrics", self.name), Duration::from_secs(30), || async {
            let (_, body) = http_get(self.metrics, "/metrics").await?;
            body.lines().find_map(|line| line.strip_prefix(&series)?.trim().parse().ok())
        })
        .await
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// The times at which this replica wrote to the apiserver (every write is logged).
    fn writes(&self) -> Vec<Timestamp> {
        self.logged(r#""message":"wrote "#)
    }

    /// The times of the log lines containing `text`.
    fn logged(&self, text: &str) -> Vec<Timestamp> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .filter(|line| line.contains(text))
            .map(|line| {
                let entry: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
                entry["timestamp"].as_str().expect("a timestamp").parse().expect("an RFC 3339 timestamp")
            })
            .collect()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt(LEASE).await.ok()??.spec?.holder_identity.filter(|h| !h.is_empty())
}

async fn wait_for_holder(leases: &Api<Lease>, prefix: &str, timeout: Duration) -> Duration {
    let started = Instant::now();
    wait_until(&format!("replica {prefix} to hold the Lease"), timeout, || async {
        holder(leases).await.filter(|h| h.starts_with(&format!("{prefix}_"))).map(|_| ())
    })
    .await;
    started.elapsed()
}

async fn create_and_wait_ready(client: &Client, namespace: &str, name: &str) {
    let databases: Api<Database> = Api::namespaced(client.clone(), namespace);
    let db = Database::new(name, DatabaseSpec::new(Size::Small, "postgres:17"));
    databases.create(&PostParams::default(), &db).await.unwrap();
    wait_until(&format!("Database {name} to be Ready"), Duration::from_secs(60), || async {
        let status = databases.get(name).await.ok()?.status?;
        (status.phase == Some(Phase::Ready)).then_some(())
    })
    .await;
}

/// Asserts that the two replicas' writes do not interleave: every write of `first` comes
/// before every write of `second`.
fn assert_writes_do_not_overlap(first: &Replica, second: &Replica) {
    let (a, b) = (first.writes(), second.writes());
    assert!(!a.is_empty(), "{} wrote nothing while leading", first.name);
    assert!(!b.is_empty(), "{} wrote nothing after taking over", second.name);
    let (last_a, first_b) = (a.iter().max().unwrap(), b.iter().min().unwrap());
    assert!(last_a < first_b, "{} wrote at {last_a} after {} started writing at {first_b}", first.name, second.name);
}

async fn two_replicas(prefix: &str) -> (Client, TestNamespace, tempdir::Dir, Replica, Replica, Api<Lease>) {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, prefix).await;
    let dir = tempdir::Dir::new(prefix);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let a = Replica::start("a", &ns.name, dir.path());
    wait_for_holder(&leases, "a", Duration::from_secs(30)).await;
    let b = Replica::start("b", &ns.name, dir.path());
    create_and_wait_ready(&client, &ns.name, "first").await;
    assert!(b.writes().is_empty(), "the follower wrote while the leader held the Lease");
    assert_eq!((a.leader_status().await, b.leader_status().await), (1.0, 0.0), "the metric names the leader");
    (client, ns, dir, a, b, leases)
}

#[tokio::test]
async fn killed_leader_is_replaced_within_the_lease_duration_and_only_one_writes() {
    let (client, ns, _dir, mut a, b, leases) = two_replicas("leader-kill").await;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // The survivor takes over once the Lease has not been renewed for its duration; it sees
    // that by polling every retry period, so it may take up to one more period.
    let took = wait_for_holder(&leases, "b", Duration::from_secs(30)).await;
    eprintln!("after SIGKILL, the other replica led after {took:?} (lease duration {LEASE_DURATION:?})");
    assert!(took <= LEASE_DURATION + 2 * RETRY_PERIOD, "took over after {took:?}");
    create_and_wait_ready(&client, &ns.name, "second").await;
    assert_writes_do_not_overlap(&a, &b);
}

#[tokio::test]
async fn terminated_leader_releases_the_lease_and_the_other_leads_within_3_seconds() {
    let (client, ns, _dir, mut a, b, leases) = two_replicas("leader-term").await;
    a.signal("-TERM");
    let took = wait_for_holder(&leases, "b", Duration::from_secs(30)).await;
    eprintln!("after SIGTERM, the other replica led after {took:?}");
    assert!(took <= Duration::from_secs(3), "took over after {took:?}");
    assert!(a.child.wait().unwrap().success(), "a SIGTERM is a clean exit");
    create_and_wait_ready(&client, &ns.name, "second").await;
    assert_eq!(b.leader_status().await, 1.0, "the new leader reports it");
    assert_writes_do_not_overlap(&a, &b);
}

/// A directory of the test's own under the system temp dir, removed when dropped.
mod tempdir {
    use std::path::{Path, PathBuf};

    pub(crate) struct Dir(PathBuf);

    impl Dir {
        pub(crate) fn new(prefix: &str) -> Self {
            let path = std::env::temp_dir().join(format!("database-operator-{prefix}-{:08x}", rand::random::<u32>()));
            std::fs::create_dir_all(&path).unwrap();
            Self(path)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The regression test of a leader that stopped renewing as soon as its shutdown began, and
/// whose renewals queued behind its reconciles in one client throttle: a drain longer than the
/// Lease let the follower take over while the old leader still wrote.
///
/// The leader runs with a client throttle of half a request a second: its reconciles wait for
/// tokens, two in flight take longer to drain than the Lease lasts, and its Events queue
/// behind them. It is terminated with reconciles in flight. It must keep renewing (its Lease
/// client has a bucket of its own) until its workers have drained and its Events are written,
/// then release; the follower must write nothing before that release.
#[tokio::test]
async fn a_leader_draining_longer_than_its_lease_keeps_it_until_released_and_the_follower_waits() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "leader-drain").await;
    let dir = tempdir::Dir::new("leader-drain");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    // Six tokens start the informers (three lists, three watches); two are left for writes.
    let throttled = ["--kube-api-qps=0.5", "--kube-api-burst=8", "--graceful-shutdown-timeout=90s"];
    let mut a = Replica::start_with("a", &ns.name, dir.path(), &throttled);
    wait_for_holder(&leases, "a", Duration::from_secs(30)).await;
    let b = Replica::start("b", &ns.name, dir.path());
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    for i in 0..6 {
        let db = Database::new(&format!("db-{i}"), DatabaseSpec::new(Size::Small, "postgres:17"));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }
    // Once the leader wrote its first children, its bucket is empty and every write waits.
    // The informers' first requests go through the same bucket: one each with streaming
    // lists, up to three where the apiserver refuses them (the refused stream, the list, the
    // watch), so with seven informers the first write may wait (21 - 6) / 0.2 = 75 s.
    wait_until("the leader to write", Duration::from_secs(150), || async { (!a.writes().is_empty()).then_some(()) })
        .await;

    a.signal("-TERM");
    let took = wait_for_holder(&leases, "b", Duration::from_secs(90)).await;
    let log = std::fs::read_to_string(&a.log).unwrap_or_default();
    assert!(a.child.wait().unwrap().success(), "a drained leader exits 0: {log}");
    eprintln!(
        "after SIGTERM, the draining leader kept the Lease; the follower led after {took:?} (lease {LEASE_DURATION:?})"
    );
    for i in 0..6 {
        wait_until(&format!("db-{i} to be Ready"), Duration::from_secs(60), || async {
            (databases.get(&format!("db-{i}")).await.ok()?.status?.phase? == Phase::Ready).then_some(())
        })
        .await;
    }

    assert!(a.logged("stepping down").is_empty(), "the leader never missed a renewal: {log}");
    let released = a.logged("released the Lease");
    assert_eq!(released.len(), 1, "the leader released the Lease once: {log}");
    let last_a = *a.writes().iter().max().unwrap();
    let first_b = *b.writes().iter().min().expect("the follower writes once it leads");
    assert!(released[0] < first_b, "the follower wrote at {first_b}, before the leader released at {}", released[0]);
    assert!(last_a < released[0], "the leader wrote at {last_a}, after releasing at {}", released[0]);
    assert!(
        took > LEASE_DURATION,
        "the drain outlasted the Lease ({took:?}): the test covered what it is about only if it did: {log}"
    );
    let step = |text: &str| *a.logged(text).first().unwrap_or_else(|| panic!("no {text:?} in the log: {log}"));
    let (drained, flushed) = (step("shutdown 2/6"), step("shutdown 3/6"));
    assert!(drained <= flushed && flushed <= released[0], "drain, flush, release, in that order: {log}");
}

/// The regression test of Lease renewals that shared the reconciles' client throttle: a leader
/// busy enough to keep its bucket empty missed its renew deadline and stepped down, again and
/// again. Here the leader's bucket (a fifth of a request a second) stays empty for longer than
/// two Lease durations; it must keep leading throughout.
#[tokio::test]
async fn a_leader_whose_client_throttle_is_saturated_keeps_renewing_its_lease() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "leader-busy").await;
    let dir = tempdir::Dir::new("leader-busy");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let a =
        Replica::start_with("a", &ns.name, dir.path(), &["--kube-api-qps=0.2", "--kube-api-burst=6", "--workers=4"]);
    wait_for_holder(&leases, "a", Duration::from_secs(30)).await;
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    for i in 0..8 {
        let db = Database::new(&format!("db-{i}"), DatabaseSpec::new(Size::Small, "postgres:17"));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }
    // The informers' first requests go through the same bucket: one each with streaming
    // lists, up to three where the apiserver refuses them (the refused stream, the list, the
    // watch), so with seven informers the first write may wait (21 - 6) / 0.2 = 75 s.
    wait_until("the leader to write", Duration::from_secs(150), || async { (!a.writes().is_empty()).then_some(()) })
        .await;
    // Eight Databases need more than forty writes: at 0.2/s, the bucket stays empty throughout.
    let watched = Instant::now();
    while watched.elapsed() < 2 * LEASE_DURATION + RETRY_PERIOD {
        let holder = holder(&leases).await.unwrap_or_default();
        assert!(holder.starts_with("a_"), "the busy leader lost its Lease (holder {holder:?})");
        tokio::time::sleep(RETRY_PERIOD / 2).await;
    }
    let log = std::fs::read_to_string(&a.log).unwrap_or_default();
    assert!(a.logged("stepping down").is_empty(), "{log}");
    assert!(
        databases.list(&Default::default()).await.unwrap().items.iter().any(|db| db.status.is_none()),
        "the leader was still busy at the end: the throttle stayed saturated"
    );
}
