//! Least privilege and no secrets in logs: the operator runs as a ServiceAccount holding only
//! the namespaced Role of `manifests/rbac/namespaced/role.yaml`, with leader election, and
//! does all its work without one "forbidden" answer; at the most verbose log level its bearer
//! token never appears in its output.

use std::process::{Command, Stdio};
use std::time::Duration;

use database_operator::database::{Database, DatabaseSpec, Phase, Size};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube_client::api::{Api, PostParams};
use kube_core::ObjectMeta;

use crate::common::{TestNamespace, client, install_crd, wait_until};

#[tokio::test]
async fn operator_works_with_the_least_privilege_role_and_never_logs_its_token() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "logs").await;

    // A ServiceAccount with the manifests' Role, and a token for it.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns.name);
    let account = ServiceAccount {
        metadata: ObjectMeta { name: Some("operator".into()), ..Default::default() },
        ..Default::default()
    };
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns.name);
    let role = Command::new("kubectl")
        .args(["apply", "-n", &ns.name, "-f"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/rbac/namespaced/role.yaml"))
        .output()
        .unwrap();
    assert!(role.status.success(), "kubectl apply the Role: {}", String::from_utf8_lossy(&role.stderr));
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some("operator".into()), ..Default::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "database-operator".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "operator".into(),
            namespace: Some(ns.name.clone()),
            ..Default::default()
        }]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    let token = Command::new("kubectl").args(["create", "token", "operator", "-n", &ns.name]).output().unwrap();
    assert!(token.status.success(), "kubectl create token: {}", String::from_utf8_lossy(&token.stderr));
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    assert!(token.len() > 100, "a JWT");

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

    let log = dir.join("operator.log");
    let mut operator = Command::new(env!("CARGO_BIN_EXE_database-operator"))
        .args(["run", "--namespace", &ns.name, "--log-level", "trace", "--log-format", "json"])
        .args(["--leader-elect", "--leader-election-namespace", &ns.name])
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .env("KUBECONFIG", &path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db = Database::new("orders", DatabaseSpec { size: Size::Small, image: "postgres:17".into() });
    databases.create(&PostParams::default(), &db).await.unwrap();
    wait_until("the Database to be Ready", Duration::from_secs(60), || async {
        let phase = databases.get("orders").await.ok()?.status?.phase?;
        (phase == Phase::Ready).then_some(())
    })
    .await;
    let _ = Command::new("kill").args(["-TERM", &operator.id().to_string()]).status();
    let _ = operator.wait();

    let output = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.lines().count() > 20, "trace logging produced little: {output}");
    assert!(output.contains("wrote Deployment"), "the operator worked as that ServiceAccount");
    assert!(output.contains("became leader"), "leader election worked with the Role");
    let forbidden: Vec<&str> = output.lines().filter(|l| l.contains("forbidden") || l.contains("Forbidden")).collect();
    assert!(forbidden.is_empty(), "the Role lacks a permission: {forbidden:#?}");
    // The whole token, and its signature alone, must not appear.
    let signature = token.rsplit('.').next().unwrap();
    assert!(!output.contains(&token) && !output.contains(signature), "the bearer token was logged");
}
