//! The operator installed as a user installs it, on the real control plane, with its image run
//! as the kubelet would run its Pod ([`kubelet`], the stand-in that hack/kubelet.sh runs too:
//! examples/kubelet/pod.rs): `kubectl apply -k manifests/` ([`manifests`]) and `helm install` of
//! charts/database-operator ([`chart`]), then the operator's Pod started and stopped with
//! hack/kubelet.sh ([`kubelet_script`]); and the release artifacts of hack/release.sh
//! ([`release`]).
//!
//! They need the image (`IMAGE`, built by hack/image.sh), podman, and for the chart `HELM`
//! (hack/helm.sh); hack/test.sh provides all three. Each installs an operator that watches
//! every namespace, so they run one at a time ([`SERIAL`]), in a test binary of their own:
//! cargo runs test binaries one after another, never beside the end-to-end tests, whose
//! operators must be alone in their namespaces.

mod chart;
#[path = "../e2e/common.rs"]
#[allow(dead_code)]
mod common;
// Shared with `cargo run --example kubelet`, which uses parts that the tests do not.
#[path = "../../examples/kubelet/pod.rs"]
#[allow(dead_code)]
mod kubelet;
mod kubelet_script;
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

/// The operator's Pod in `namespace`, once the plane has admitted it, scheduled it on a kwok
/// node and kwok reports it running.
async fn scheduled_operator_pod(client: &Client, namespace: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels("app.kubernetes.io/component=controller-manager");
    wait_until(
        "the operator's Pod to be admitted (restricted Pod Security), scheduled on a kwok node and running",
        std::time::Duration::from_secs(90),
        || async {
            pods.list(&selector).await.ok()?.items.into_iter().find(|pod| {
                let on_kwok =
                    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| n.starts_with("kwok-"));
                let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                on_kwok && running && pod.metadata.deletion_timestamp.is_none()
            })
        },
    )
    .await
}

/// An installed operator whose Pod runs under podman.
struct RunningOperator {
    client: Client,
    namespace: String,
    pod: String,
    container: kubelet::RunningContainer,
}

impl RunningOperator {
    /// Runs the operator's Pod in `namespace` and checks what a kubelet would see once it runs:
    /// the probes answer on the Pod's ports, the in-cluster configuration is in use, and the
    /// Lease `lease` in the Pod's namespace names the Pod.
    async fn start(client: &Client, namespace: &str, lease: &str) -> Self {
        let pod = scheduled_operator_pod(client, namespace).await;
        let container = kubelet::RunningContainer::start(client, &pod, "manager")
            .await
            .unwrap_or_else(|err| panic!("running the operator's Pod with podman: {:#}", anyhow::Error::from(err)));
        let operator =
            Self { client: client.clone(), namespace: namespace.into(), pod: pod.metadata.name.unwrap(), container };
        let health = operator.address("health");
        wait_until("/readyz on the Pod's health port to answer 200", std::time::Duration::from_secs(60), || async {
            (common::http_get(health, "/readyz").await?.0 == 200).then_some(())
        })
        .await;
        for path in ["/healthz", "/livez"] {
            assert_eq!(common::http_get(health, path).await.map(|r| r.0), Some(200), "{path}");
        }
        let logs = operator.container.logs();
        assert!(logs.contains("using the in-cluster configuration"), "the ServiceAccount's configuration: {logs}");
        let prefix = format!("{}_", operator.pod);
        let holder = wait_until("the Lease to name the Pod", std::time::Duration::from_secs(30), || async {
            operator.lease_holder(lease).await.filter(|holder| holder.starts_with(&prefix))
        })
        .await;
        assert!(holder.len() > prefix.len(), "the pod name and a unique suffix: {holder}");
        operator
    }

    /// 127.0.0.1 and the Pod's named port (the container runs in the host's network).
    fn address(&self, port: &str) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.container.ports[port]).into()
    }

    /// The holder of `lease` in the operator's namespace, if it has one.
    async fn lease_holder(&self, lease: &str) -> Option<String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), &self.namespace);
        leases.get(lease).await.ok()?.spec?.holder_identity.filter(|holder| !holder.is_empty())
    }

    /// Scrapes /metrics on the Pod's metrics port: refused without a token, served to a
    /// ServiceAccount bound to `reader_role`.
    async fn check_metrics(&self, scraper_namespace: &str, reader_role: &str) {
        let metrics = self.address("metrics");
        let (status, body) = common::https_get(metrics, "/metrics", None).await;
        assert_eq!(status, 401, "no token: {body}");
        let token = scraper_token(&self.client, scraper_namespace, reader_role).await;
        let (status, body) = common::https_get(metrics, "/metrics", Some(&token)).await;
        assert_eq!(status, 200, "a token bound to {reader_role}: {body}");
        assert!(
            body.contains(r#"controller_runtime_reconcile_total{controller="database",result="success"}"#),
            "{body}"
        );
        assert!(body.contains("leader_election_master_status"), "{body}");
    }

    /// Stops the container as the kubelet does, with the Pod's grace period: it must exit 0
    /// and release `lease`.
    async fn stop(self, lease: &str) {
        let code = self.container.stop().unwrap_or_else(|err| panic!("{:#}", anyhow::Error::from(err)));
        let logs = self.container.logs();
        assert_eq!(code, 0, "a stop within the grace period ({:?}) exits 0: {logs}", self.container.grace_period);
        assert!(logs.contains("released the Lease"), "{logs}");
        assert_eq!(self.lease_holder(lease).await, None, "the Lease is released");
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

/// Waits until every Database in `namespace` named in `names` is Ready.
async fn wait_ready(client: &Client, namespace: &str, names: &[&str]) {
    use database_operator::database::{Database, Phase};
    let databases: Api<Database> = Api::namespaced(client.clone(), namespace);
    for name in names {
        wait_until(&format!("Database {namespace}/{name} to be Ready"), std::time::Duration::from_secs(90), || async {
            (databases.get(name).await.ok()?.status?.phase? == Phase::Ready).then_some(())
        })
        .await;
    }
}
