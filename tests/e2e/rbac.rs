//! Least privilege and no secrets in logs: the operator runs as a ServiceAccount holding only
//! the roles of `manifests/rbac/` (the namespaced Role of `namespaced/role.yaml`, the Lease
//! Role of `leader_election_role.yaml`, the review rules of `metrics_auth_role.yaml`), with
//! leader election and secure metrics, and does all its work without one "forbidden" answer;
//! a scrape without a token is refused 401, with the token of an account without
//! `database-operator-metrics-reader` 403, with one bound to it 200; at the most verbose log
//! level no bearer token ever appears in its output.

use std::process::{Command, Stdio};
use std::time::Duration;

use database_operator::api::{Database, DatabaseSpec, Phase, Size};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use kube_core::ObjectMeta;

use crate::common::{TestNamespace, client, free_address, https_get, install_crd, wait_until};

#[tokio::test]
async fn operator_works_with_the_least_privilege_role_and_never_logs_its_token() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "logs").await;

    // A ServiceAccount with the manifests' roles, and a token for it.
    let operator_account = create_account(&client, &ns.name, "operator").await;
    for file in ["namespaced/role.yaml", "leader_election_role.yaml"] {
        kubectl_apply(&ns.name, file);
    }
    bind(&client, &ns.name, "Role", "database-operator", "operator").await;
    bind(&client, &ns.name, "Role", "database-operator-leader-election", "operator").await;
    kubectl_apply(&ns.name, "metrics_auth_role.yaml");
    kubectl_apply(&ns.name, "metrics_reader_role.yaml");
    let _auth = ClusterBinding::create(&client, &ns.name, "database-operator-metrics-auth", "operator").await;
    // Two scrapers: one allowed to read /metrics, one not.
    let reader = create_account(&client, &ns.name, "reader").await;
    let _reader = ClusterBinding::create(&client, &ns.name, "database-operator-metrics-reader", "reader").await;
    let stranger = create_account(&client, &ns.name, "stranger").await;
    let token = operator_account;

    // A kubeconfig with that token, for the same server and CA.
    let view = Command::new("kubectl").args(["config", "view", "--minify", "--raw", "-o", "json"]).output().unwrap();
    let view: serde_json::Value = serde_json::from_slice(&view.stdout).unwrap();
    let cluster = &view["clusters"][0]["cluster"];
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "plane", "cluster": cluster}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "plane", "user": "sa", "namespace": ns.name}}],
    });
    let dir = std::env::temp_dir().join(format!("database-operator-logs-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
    let metrics = free_address();

    let log = dir.join("operator.log");
    let mut operator = Command::new(env!("CARGO_BIN_EXE_database-operator"))
        .args(["run", "--namespace", &ns.name, "--log-level", "trace", "--log-format", "json"])
        .args(["--leader-elect", "--leader-election-namespace", &ns.name])
        .args(["--metrics-bind-address", &metrics.to_string(), "--health-probe-bind-address", "0"])
        .env("KUBECONFIG", &path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
    databases.create(&PostParams::default(), &db).await.unwrap();
    wait_until("the Database to be Ready", Duration::from_secs(60), || async {
        let phase = databases.get("orders").await.ok()?.status?.phase?;
        (phase == Phase::Ready).then_some(())
    })
    .await;
    // Secure metrics: authenticated by a TokenReview, authorized by a SubjectAccessReview,
    // both made with the operator's own (least-privilege) token.
    let scrape = |token: Option<String>| async move { https_get(metrics, "/metrics", token.as_deref()).await };
    let (status, body) = scrape(None).await;
    assert_eq!(status, 401, "no token: {body}");
    let (status, body) = scrape(Some("not-a-token".into())).await;
    assert_eq!(status, 401, "a token the apiserver does not accept: {body}");
    let (status, body) = scrape(Some(stranger.clone())).await;
    assert_eq!(status, 403, "a token without the metrics-reader role: {body}");
    assert!(body.contains(&format!("system:serviceaccount:{}:stranger", ns.name)), "names the user: {body}");
    let (status, body) = scrape(Some(reader.clone())).await;
    assert_eq!(status, 200, "a token bound to database-operator-metrics-reader: {body}");
    assert!(body.contains("controller_runtime_reconcile_total"), "{body}");

    let _ = Command::new("kill").args(["-TERM", &operator.id().to_string()]).status();
    let _ = operator.wait();

    let output = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.lines().count() > 20, "trace logging produced little: {output}");
    assert!(output.contains("wrote Deployment"), "the operator worked as that ServiceAccount");
    assert!(output.contains("became leader"), "leader election worked with the Role");
    // An RBAC refusal: a 403 whose message says who cannot do what. (A 422 "Forbidden" field
    // error, such as a server refusing streaming lists, is not one.)
    let forbidden: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("code: 403") || l.contains("code 403") || l.contains(" cannot "))
        .collect();
    assert!(forbidden.is_empty(), "the Role lacks a permission: {forbidden:#?}");
    // No token (the operator's own, or a scraper's), nor its signature alone, may appear.
    for token in [&token, &reader, &stranger] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(!output.contains(token.as_str()) && !output.contains(signature), "a bearer token was logged");
    }
}

/// Applies `manifests/rbac/<file>` in `namespace` (a namespaced object goes there).
fn kubectl_apply(namespace: &str, file: &str) {
    let applied = Command::new("kubectl")
        .args(["apply", "-n", namespace, "-f"])
        .arg(format!("{}/manifests/rbac/{file}", env!("CARGO_MANIFEST_DIR")))
        .output()
        .unwrap();
    assert!(applied.status.success(), "kubectl apply {file}: {}", String::from_utf8_lossy(&applied.stderr));
}

/// Creates a ServiceAccount and returns a token for it.
async fn create_account(client: &Client, namespace: &str, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account =
        ServiceAccount { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let token = Command::new("kubectl").args(["create", "token", name, "-n", namespace]).output().unwrap();
    assert!(token.status.success(), "kubectl create token: {}", String::from_utf8_lossy(&token.stderr));
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    assert!(token.len() > 100, "a JWT");
    token
}

/// Binds the Role or ClusterRole `role` to the ServiceAccount `account` in `namespace`.
async fn bind(client: &Client, namespace: &str, kind: &str, role: &str, account: &str) {
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some(role.into()), ..Default::default() },
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: kind.into(), name: role.into() },
        subjects: Some(vec![subject(namespace, account)]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();
}

fn subject(namespace: &str, account: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: account.into(),
        namespace: Some(namespace.into()),
        ..Default::default()
    }
}

/// A ClusterRoleBinding of the test's own, deleted when dropped (cluster-scoped objects are
/// not removed with the test's namespace).
struct ClusterBinding {
    name: String,
}

impl ClusterBinding {
    async fn create(client: &Client, namespace: &str, role: &str, account: &str) -> Self {
        let api: Api<ClusterRoleBinding> = Api::all(client.clone());
        let name = format!("{namespace}-{account}-{role}");
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role.into(),
            },
            subjects: Some(vec![subject(namespace, account)]),
        };
        api.create(&PostParams::default(), &binding).await.unwrap();
        Self { name }
    }
}

impl Drop for ClusterBinding {
    fn drop(&mut self) {
        crate::common::delete_when_dropped(&[&format!("clusterrolebinding/{}", self.name)]);
    }
}
