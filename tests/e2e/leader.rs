//! Leader election with two operator processes (the real binary) on the real plane: only the
//! holder of the Lease writes; a killed leader is replaced within the Lease duration, a
//! terminated one at once because it releases the Lease.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use database_operator::database::{Database, DatabaseSpec, Phase, Size};
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
        let log = dir.join(format!("{name}.log"));
        let metrics = free_address();
        let child = Command::new(env!("CARGO_BIN_EXE_database-operator"))
            .args(["run", "--namespace", namespace, "--leader-elect", "--leader-election-id", LEASE])
            .args(["--leader-election-namespace", namespace, "--leader-elect-lease-duration", "6s"])
            .args(["--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s"])
            .args(["--metrics-bind-address", &metrics.to_string(), "--metrics-secure=false"])
            .args(["--health-probe-bind-address", "0"])
            .args(["--log-format", "json", "--log-level", "info"])
            .env("POD_NAME", name)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create the log file"))
            .spawn()
            .expect("start the operator binary");
        Self { name, child, log, metrics }
    }

    /// The value of `leader_election_master_status` in this replica's /metrics, once it serves.
    async fn leader_status(&self) -> f64 {
        let series = r#"leader_election_master_status{name="database-operator"} "#;
        wait_until(&format!("replica {} to serve /metrics", self.name), Duration::from_secs(30), || async {
            let (_, body) = http_get(self.metrics, "/metrics").await?;
            body.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        })
        .await
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// The times at which this replica wrote to the apiserver (every write is logged).
    fn writes(&self) -> Vec<Timestamp> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .filter(|line| line.contains(r#""message":"wrote "#))
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
    let db = Database::new(name, DatabaseSpec { size: Size::Small, image: "postgres:17".into() });
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
