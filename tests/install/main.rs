//! The operator installed as a user installs it, on the real control plane, with its image
//! run as its Pod by the plane's real node (a kubelet and containerd: `hack/control-plane.sh`
//! with `NODES=kwok,real`, whose namespace database-operator-system and every other one the
//! tests do not send to kwok run on the real node): `kubectl apply -k manifests/`
//! ([`manifests`]) and `helm install` of charts/database-operator ([`chart`]); the README's
//! run command ([`run_script`]); and the release artifacts of hack/release.sh ([`release`]).
//!
//! They need the image (`IMAGE`, built by hack/image.sh and imported into the node's
//! containerd) and for the chart `HELM` (hack/helm.sh); hack/test.sh provides both. Each
//! installs an operator that watches every namespace, so they run one at a time ([`SERIAL`]),
//! in a test binary of their own: cargo runs test binaries one after another, never beside
//! the end-to-end tests, whose operators must be alone in their namespaces.

mod chart;
#[path = "../e2e/common.rs"]
#[allow(dead_code)]
mod common;
mod manifests;
mod release;
mod run_script;

use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::Pod;
use kube_client::Client;
use kube_client::api::{Api, ListParams};

use crate::common::wait_until;

/// One installation at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The image under test: `IMAGE`, as hack/test.sh sets it from hack/image.sh.
fn image() -> String {
    std::env::var("IMAGE").unwrap_or_else(|_| {
        panic!(
            "IMAGE is not set: build the image with `hack/image.sh` and set IMAGE to the tag it prints last, \
             or run the whole suite with hack/test.sh"
        )
    })
}

/// Runs `program` with `args` (and `stdin`, if given); returns stdout and stderr, panicking
/// with both when it fails.
fn run(program: &str, args: &[&str], stdin: Option<&str>) -> (String, String) {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("{program}: {err}"));
    let mut input = child.stdin.take().unwrap();
    if let Some(stdin) = stdin {
        input.write_all(stdin.as_bytes()).unwrap();
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned());
    assert!(output.status.success(), "{program} {}: {stderr}{stdout}", args.join(" "));
    (stdout, stderr)
}

/// `program` with the environment a user's shell would give it, not the variables cargo sets
/// for a test (OUT_DIR, CARGO_PKG_*, ...): a script that runs cargo would otherwise see another
/// environment than the suite's own builds and rebuild the binaries.
fn user_command(program: &str) -> Command {
    const KEPT: [&str; 11] = [
        "PATH",
        "HOME",
        "USER",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "RUSTUP_HOME",
        "CARGO_HOME",
        "HELM",
        "CONTAINERS_CONF",
        "KUBECONFIG",
        "IMAGE",
    ];
    let mut command = Command::new(program);
    command.env_clear();
    for (name, value) in std::env::vars_os() {
        let name_str = name.to_string_lossy();
        if KEPT.contains(&name_str.as_ref()) || name_str.starts_with("GO") {
            command.env(name, value);
        }
    }
    command
}

/// The Ready operator Pod in `namespace` that the real node runs, once the plane has admitted
/// it (the restricted Pod Security level), the kubelet has started its container and its
/// readiness probe (/readyz: caches synced) has passed.
async fn ready_operator_pod(client: &Client, namespace: &str, not: Option<&str>) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels("app.kubernetes.io/component=controller-manager");
    let what = "the operator's Pod to run on the real node and be Ready (its image must be in the node's \
                containerd: hack/image.sh imports it when CONTAINERD_ADDRESS is set, as hack/test.sh does)";
    wait_until(what, std::time::Duration::from_secs(120), || async {
        pods.list(&selector).await.ok()?.items.into_iter().find(|pod| {
            let on_real_node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(common::REAL_NODE);
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            on_real_node && ready && pod.metadata.deletion_timestamp.is_none() && pod.metadata.name.as_deref() != not
        })
    })
    .await
}

/// An installed operator whose Pod the real node runs.
struct RunningOperator {
    client: Client,
    namespace: String,
    pod: String,
}

impl RunningOperator {
    /// Waits for the operator's Pod in `namespace` (other than `not`) to be Ready on the real
    /// node and checks what the kubelet shows of it: no restart, the in-cluster configuration
    /// in use (its ServiceAccount token, through the `kubernetes` Service), and the Lease
    /// `lease` in the Pod's namespace naming the Pod.
    async fn start(client: &Client, namespace: &str, lease: &str, not: Option<&str>) -> Self {
        let pod = ready_operator_pod(client, namespace, not).await;
        let restarts = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|statuses| statuses.iter().map(|c| c.restart_count).sum::<i32>());
        let operator = Self { client: client.clone(), namespace: namespace.into(), pod: pod.metadata.name.unwrap() };
        let logs = operator.logs();
        assert_eq!(restarts, Some(0), "the operator's container never restarted: {logs}");
        assert!(logs.contains("using the in-cluster configuration"), "the ServiceAccount's configuration: {logs}");
        let prefix = format!("{}_", operator.pod);
        let holder = wait_until("the Lease to name the Pod", std::time::Duration::from_secs(60), || async {
            operator.lease_holder(lease).await.filter(|holder| holder.starts_with(&prefix))
        })
        .await;
        assert!(holder.len() > prefix.len(), "the pod name and a unique suffix: {holder}");
        operator
    }

    /// What the Pod's container wrote, as `kubectl logs` shows it.
    fn logs(&self) -> String {
        run("kubectl", &["logs", "-n", &self.namespace, &self.pod, "-c", "manager"], None).0
    }

    /// The holder of `lease` in the operator's namespace, if it has one.
    async fn lease_holder(&self, lease: &str) -> Option<String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), &self.namespace);
        leases.get(lease).await.ok()?.spec?.holder_identity.filter(|holder| !holder.is_empty())
    }

    /// Scrapes /metrics on the Pod's metrics port, through `kubectl port-forward` (the
    /// apiserver, the kubelet, then the Pod's network namespace): refused without a token,
    /// served to a ServiceAccount bound to `reader_role`.
    async fn check_metrics(&self, scraper_namespace: &str, reader_role: &str) {
        let forward = PortForward::start(&self.namespace, &self.pod, 8443);
        let (status, body) = common::https_get(forward.address, "/metrics", None).await;
        assert_eq!(status, 401, "no token: {body}");
        let token = scraper_token(&self.client, scraper_namespace, reader_role).await;
        let (status, body) = common::https_get(forward.address, "/metrics", Some(&token)).await;
        assert_eq!(status, 200, "a token bound to {reader_role}: {body}");
        assert!(
            body.contains(r#"controller_runtime_reconcile_total{controller="database",result="success"}"#),
            "{body}"
        );
        assert!(body.contains("leader_election_master_status"), "{body}");
    }

    /// Follows the Pod until it is gone, after `stop` (which makes the kubelet stop it: a
    /// scale to zero, a rolling update, an uninstall), and checks how it went: the container
    /// exited 0 within the grace period after the kubelet's SIGTERM, and, when `releases`, said
    /// it released the Lease (an uninstall deletes the operator's RBAC beside its Deployment,
    /// so the apiserver may refuse the release: the Lease then goes with its namespace).
    async fn stopped_by_the_kubelet(&self, releases: bool, stop: impl FnOnce()) {
        use futures::{StreamExt, TryStreamExt};
        use kube_client::api::{WatchEvent, WatchParams};

        let logs = std::process::Command::new("kubectl")
            .args(["logs", "--follow", "-n", &self.namespace, &self.pod, "-c", "manager"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let fields = format!("metadata.name={}", self.pod);
        let version = pods.get(&self.pod).await.unwrap().metadata.resource_version.unwrap();
        let mut events = pods.watch(&WatchParams::default().fields(&fields), &version).await.unwrap().boxed();
        stop();
        let mut exit_code = None;
        let followed = tokio::time::timeout(std::time::Duration::from_secs(120), async {
            while let Some(event) = events.try_next().await.unwrap() {
                let (pod, gone) = match event {
                    WatchEvent::Modified(pod) => (pod, false),
                    WatchEvent::Deleted(pod) => (pod, true),
                    _ => continue,
                };
                let terminated = pod
                    .status
                    .and_then(|s| s.container_statuses)
                    .into_iter()
                    .flatten()
                    .find_map(|c| c.state.and_then(|state| state.terminated).filter(|_| c.name == "manager"));
                exit_code = terminated.map(|t| t.exit_code).or(exit_code);
                if gone {
                    return;
                }
            }
        })
        .await;
        assert!(followed.is_ok(), "the operator's Pod was not gone within 120 s of being stopped");
        let output = logs.wait_with_output().unwrap();
        let logs = String::from_utf8_lossy(&output.stdout);
        assert_eq!(exit_code, Some(0), "a stop within the grace period exits 0: {logs}");
        assert!(!releases || logs.contains("released the Lease"), "{logs}");
    }
}

/// `kubectl port-forward` to a Pod's port, from a free local port; stopped when dropped.
struct PortForward {
    child: std::process::Child,
    address: std::net::SocketAddr,
    /// Its standard output, kept open: kubectl writes a line per connection and would die of
    /// a closed pipe.
    _output: std::io::BufReader<std::process::ChildStdout>,
}

impl PortForward {
    fn start(namespace: &str, pod: &str, port: u16) -> Self {
        use std::io::BufRead;
        let mut child = Command::new("kubectl")
            .args(["port-forward", "-n", namespace, &format!("pod/{pod}"), &format!(":{port}")])
            .args(["--address", "127.0.0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // "Forwarding from 127.0.0.1:41234 -> 8443"
        let mut line = String::new();
        let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
        output.read_line(&mut line).unwrap();
        let address = line
            .split_whitespace()
            .nth(2)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("kubectl port-forward printed {line:?}"));
        Self { child, address, _output: output }
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A ServiceAccount `scraper` in `namespace`, bound to the ClusterRole `role`; its token.
async fn scraper_token(client: &Client, namespace: &str, role: &str) -> String {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
    use kube_client::api::PostParams;
    use kube_core::ObjectMeta;

    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let meta = |name: &str| ObjectMeta { name: Some(name.into()), ..Default::default() };
    accounts
        .create(&PostParams::default(), &ServiceAccount { metadata: meta("scraper"), ..Default::default() })
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: meta(&format!("{namespace}-scraper")),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "scraper".into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone()).create(&PostParams::default(), &binding).await.unwrap();
    run("kubectl", &["create", "token", "scraper", "-n", namespace], None).0.trim().to_string()
}

/// Waits until every Database in `namespace` named in `names` is Ready: as long as the
/// end-to-end tests wait for a real database's first start on a busy two-core machine.
async fn wait_ready(client: &Client, namespace: &str, names: &[&str]) {
    use database_operator::api::{Database, Phase};
    let databases: Api<Database> = Api::namespaced(client.clone(), namespace);
    for name in names {
        wait_until(
            &format!("Database {namespace}/{name} to be Ready"),
            std::time::Duration::from_secs(180),
            || async { (databases.get(name).await.ok()?.status?.phase? == Phase::Ready).then_some(()) },
        )
        .await;
    }
}
