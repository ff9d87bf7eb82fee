//! Least privilege and no secrets in logs: the operator runs as a ServiceAccount holding only
//! the roles of `manifests/rbac/` (the namespaced Role of `namespaced/role.yaml`, the Lease
//! Role of `leader_election_role.yaml`, the review rules of `metrics_auth_role.yaml`), with
//! leader election and secure metrics, and under the admission policy that limits its
//! ServiceAccount (`manifests/policy/operator_limits.yaml`), and does all its work without one
//! "forbidden" answer; `kubectl auth can-i` as that account says yes to its work in the watched
//! namespace and no to Secrets, Jobs and Deployments anywhere else and to any way to another
//! account's token;
//! a scrape without a token is refused 401, with the token of an account without
//! `database-operator-metrics-reader` 403, with one bound to it 200; at the most verbose log
//! level no bearer token ever appears in its output.

use std::process::{Command, Stdio};
use std::time::Duration;

use database_operator::api::{Database, DatabaseSpec, EngineKind, Phase, Size};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use kube_core::ObjectMeta;

use crate::common::{AdmissionPolicy, TestNamespace, client, free_address, https_get, install_crd, wait_until};

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
    // The operator's limits (manifests/policy/operator_limits.yaml), made for this account.
    let _limits = AdmissionPolicy::operator_limits(&ns.name, "operator").await;

    // What RBAC grants that account, asked as kubectl users ask: its work in the namespace it
    // watches, nothing of the kind anywhere else, and no way to a token of another account.
    let account = format!("system:serviceaccount:{}:operator", ns.name);
    // `where_` is `-n NAMESPACE` or `--all-namespaces`.
    let can_i = |verb: &str, resource: &str, where_: &[&str]| {
        let answer = Command::new("kubectl")
            .args(["auth", "can-i", verb, resource, "--as", &account])
            .args(where_)
            .output()
            .unwrap();
        String::from_utf8_lossy(&answer.stdout).trim() == "yes"
    };
    let watched = ["-n", ns.name.as_str()];
    for (verb, resource) in
        [("create", "secrets"), ("get", "secrets"), ("create", "jobs.batch"), ("create", "deployments.apps")]
    {
        assert!(can_i(verb, resource, &watched), "{verb} {resource} in the watched namespace");
        for elsewhere in [&["-n", "default"][..], &["-n", "kube-system"], &["--all-namespaces"]] {
            assert!(!can_i(verb, resource, elsewhere), "{verb} {resource} {elsewhere:?}");
        }
    }
    // A token of another account: neither asked for (TokenRequest), nor by a new account, nor
    // by rewriting a Secret (a service account token Secret's type the limits refuse on create).
    for (verb, resource) in [
        ("create", "serviceaccounts/token"),
        ("create", "serviceaccounts"),
        ("update", "secrets"),
        ("patch", "secrets"),
    ] {
        for where_ in [&watched[..], &["-n", "kube-system"], &["--all-namespaces"]] {
            assert!(!can_i(verb, resource, where_), "{verb} {resource} {where_:?}");
        }
    }

    let (dir, path) = kubeconfig_with(&token, &ns.name);
    let metrics = free_address();

    let log = dir.join("operator.log");
    let operator = Stopped(
        Command::new(env!("CARGO_BIN_EXE_database-operator"))
            .args(["run", "--namespace", &ns.name, "--log-level", "trace", "--log-format", "json"])
            .args(["--leader-elect", "--leader-election-namespace", &ns.name])
            .args(["--metrics-bind-address", &metrics.to_string(), "--health-probe-bind-address", "0"])
            .env("KUBECONFIG", &path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
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

    // A flood of scrapes with made-up tokens (each misses the review cache): none is served,
    // and the reconciles go on, their API budget untouched (the reviews have a client and a
    // budget of their own; connections beyond the cap are closed at once).
    const FLOOD: usize = 100;
    let flood: Vec<_> = (0..FLOOD)
        .map(|i| tokio::spawn(async move { https_get(metrics, "/metrics", Some(&format!("made-up-{i}"))).await.0 }))
        .collect();
    let during =
        Database::new("during", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &during).await.unwrap();
    wait_until("a Database made during the flood to be Ready", Duration::from_secs(60), || async {
        let phase = databases.get("during").await.ok()?.status?.phase?;
        (phase == Phase::Ready).then_some(())
    })
    .await;
    let mut answers = std::collections::BTreeMap::<u16, usize>::new();
    for scrape in flood {
        *answers.entry(scrape.await.unwrap()).or_default() += 1;
    }
    eprintln!("{FLOOD} scrapes with made-up tokens, by answer (0: closed or timed out): {answers:?}");
    assert!(!answers.contains_key(&200), "a made-up token was served: {answers:?}");
    assert!(answers.get(&401).is_some_and(|refused| *refused > 0), "none refused 401: {answers:?}");
    // After it, the reader is served again.
    let (status, body) = scrape(Some(reader.clone())).await;
    assert_eq!(status, 200, "the reader after the flood: {body}");

    drop(operator);

    let output = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.lines().count() > 20, "trace logging produced little: {output}");
    assert!(output.contains("wrote Deployment"), "the operator worked as that ServiceAccount");
    assert!(output.contains("became leader"), "leader election worked with the Role");
    // An RBAC refusal: a 403 whose message says who cannot do what. (A 422 "Forbidden" field
    // error, such as a server refusing streaming lists, is not one.)
    let forbidden: Vec<&str> = output.lines().filter(|l| is_rbac_refusal(l)).collect();
    assert!(forbidden.is_empty(), "the Role lacks a permission: {forbidden:#?}");
    assert!(!output.contains("ValidatingAdmissionPolicy"), "the operator's limits refused a write: {output}");
    // No token (the operator's own, or a scraper's), nor its signature alone, may appear.
    for token in [&token, &reader, &stranger] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(!output.contains(token.as_str()) && !output.contains(signature), "a bearer token was logged");
    }
}

#[tokio::test]
async fn the_operator_watches_exactly_its_namespaces_with_a_role_in_each_and_nothing_cluster_wide() {
    let client = client().await;
    install_crd(&client).await;
    let (a, b, c) = futures::join!(
        TestNamespace::create(&client, "watched-a"),
        TestNamespace::create(&client, "watched-b"),
        TestNamespace::create(&client, "unwatched"),
    );
    // The account lives in a; the Role of manifests/rbac/namespaced/ is bound in a and b.
    let token = create_account(&client, &a.name, "operator").await;
    for ns in [&a, &b] {
        kubectl_apply(&ns.name, "namespaced/role.yaml");
        let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns.name);
        let binding = RoleBinding {
            metadata: ObjectMeta { name: Some("database-operator".into()), ..Default::default() },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: "database-operator".into(),
            },
            subjects: Some(vec![subject(&a.name, "operator")]),
        };
        bindings.create(&PostParams::default(), &binding).await.unwrap();
    }
    let _limits = AdmissionPolicy::operator_limits(&a.name, "operator").await;
    let (dir, path) = kubeconfig_with(&token, &a.name);
    let log = dir.join("operator.log");
    let operator = Stopped(
        Command::new(env!("CARGO_BIN_EXE_database-operator"))
            .args(["run", "--namespace", &format!("{},{}", a.name, b.name), "--log-format", "json"])
            .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
            .env("KUBECONFIG", &path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    for ns in [&a, &b, &c] {
        let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
        let db =
            Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }
    for ns in [&a, &b] {
        let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
        wait_until(&format!("the Database in {} to be Ready", ns.name), Duration::from_secs(60), || async {
            let phase = databases.get("orders").await.ok()?.status?.phase?;
            (phase == Phase::Ready).then_some(())
        })
        .await;
    }
    // Both were Ready; the one in c, made at the same time, was never touched.
    let unwatched: Api<Database> = Api::namespaced(client.clone(), &c.name);
    assert!(
        unwatched.get("orders").await.unwrap().status.is_none(),
        "the Database of an unwatched namespace has a status"
    );
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &c.name);
    assert!(deployments.get_opt("orders").await.unwrap().is_none(), "a Deployment in an unwatched namespace");
    drop(operator);
    let output = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let refused: Vec<&str> =
        output.lines().filter(|l| is_rbac_refusal(l) || l.contains("ValidatingAdmissionPolicy")).collect();
    assert!(refused.is_empty(), "a request was refused: {refused:#?}");
}

/// A log line that reports an RBAC refusal: a 403, or the apiserver's "is forbidden: User ...
/// cannot ..." message. A 409 "Operation cannot be fulfilled" (the writer's create-only apply
/// meeting an object its cache had not shown yet) is not one, nor is a 422 "Forbidden" field
/// error.
fn is_rbac_refusal(line: &str) -> bool {
    line.contains("code: 403") || line.contains("code 403") || line.contains("is forbidden: User")
}

#[test]
fn a_conflict_is_not_an_rbac_refusal_and_a_forbidden_answer_is() {
    let conflict = r#"Unsuccessful: Status { status: Some(Failure), code: 409, message: \"Operation cannot be fulfilled on services \\\"orders\\\": the object has been modified; please apply your changes to the latest version and try again\", reason: \"Conflict\" }"#;
    let forbidden = r#"Unsuccessful: Status { status: Some(Failure), code: 403, message: \"jobs.batch is forbidden: User \\\"system:serviceaccount:ns:operator\\\" cannot create resource \\\"jobs\\\" in API group \\\"batch\\\" in the namespace \\\"default\\\"\", reason: \"Forbidden\" }"#;
    let message_only = r#"watch failed: databases.example.com is forbidden: User \"system:serviceaccount:ns:operator\" cannot watch resource"#;
    assert!(!is_rbac_refusal(conflict));
    assert!(is_rbac_refusal(forbidden));
    assert!(is_rbac_refusal(message_only));
}

/// An operator process, stopped (SIGTERM, then waited for) when dropped: at the test's end, or
/// when an assertion fails before it.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let _ = self.0.wait();
    }
}

/// A kubeconfig that authenticates with `token` to the test's server (same address and CA),
/// in a directory of its own: the directory, and the file.
fn kubeconfig_with(token: &str, namespace: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let view = Command::new("kubectl").args(["config", "view", "--minify", "--raw", "-o", "json"]).output().unwrap();
    let view: serde_json::Value = serde_json::from_slice(&view.stdout).unwrap();
    let cluster = &view["clusters"][0]["cluster"];
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "plane", "cluster": cluster}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "plane", "user": "sa", "namespace": namespace}}],
    });
    let dir = std::env::temp_dir().join(format!("database-operator-rbac-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
    (dir, path)
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
