//! Logs carry no secret: the operator authenticated with a bearer token logs at the most
//! verbose level (every request) and the token never appears in its output.

use std::process::{Command, Stdio};
use std::time::Duration;

use database_operator::database::{Database, DatabaseSpec, Size};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube_client::api::{Api, PostParams};
use kube_core::ObjectMeta;

use crate::common::{TestNamespace, client, install_crd, wait_until};

#[tokio::test]
async fn trace_logs_never_contain_the_bearer_token() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "logs").await;

    // A ServiceAccount allowed everything in the test namespace (cluster-admin bound by a
    // RoleBinding), and a token for it.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns.name);
    let account = ServiceAccount {
        metadata: ObjectMeta { name: Some("operator".into()), ..Default::default() },
        ..Default::default()
    };
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns.name);
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some("operator-admin".into()), ..Default::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "cluster-admin".into(),
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
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .env("KUBECONFIG", &path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let db = Database::new("orders", DatabaseSpec { size: Size::Small, image: "postgres:17".into() });
    databases.create(&PostParams::default(), &db).await.unwrap();
    wait_until("the Database to get a status", Duration::from_secs(60), || async {
        databases.get("orders").await.ok()?.status.map(|_| ())
    })
    .await;
    let _ = Command::new("kill").args(["-TERM", &operator.id().to_string()]).status();
    let _ = operator.wait();

    let output = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.lines().count() > 20, "trace logging produced little: {output}");
    assert!(output.contains("wrote Deployment"), "the operator worked as that ServiceAccount");
    // The whole token, and its signature alone, must not appear.
    let signature = token.rsplit('.').next().unwrap();
    assert!(!output.contains(&token) && !output.contains(signature), "the bearer token was logged");
}
