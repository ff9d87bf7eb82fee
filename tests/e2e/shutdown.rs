//! Graceful shutdown under load, with the real binary: a SIGTERM stops taking new keys and
//! lets in-flight reconciles finish, so no Database is left half-reconciled (a Deployment
//! without its Service, or children without a status).

use std::process::{Command, Stdio};
use std::time::Duration;

use database_operator::api::{Database, DatabaseSpec, Size};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube_client::api::{Api, ListParams, PostParams};

use crate::common::{TestNamespace, client, install_crd, wait_until};

const COUNT: usize = 60;

#[tokio::test]
async fn sigterm_under_load_leaves_no_database_half_reconciled() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "shutdown").await;
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    for i in 0..COUNT {
        let db = Database::new(&format!("db-{i}"), DatabaseSpec::new(Size::Small, "postgres:17"));
        databases.create(&PostParams::default(), &db).await.unwrap();
    }

    // Throttled to 20 requests/s (3 writes per Database), the operator needs ~9 s for all of
    // them: a SIGTERM after the first few statuses lands in the middle of the work.
    let mut operator = Command::new(env!("CARGO_BIN_EXE_database-operator"))
        .args(["run", "--namespace", &ns.name, "--workers", "4", "--kube-api-qps", "20", "--kube-api-burst", "5"])
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the operator binary");
    let with_status = || async {
        let list = databases.list(&ListParams::default()).await.ok()?;
        Some(list.items.iter().filter(|db| db.status.is_some()).count())
    };
    wait_until("the first Databases to be reconciled", Duration::from_secs(60), || async {
        with_status().await.filter(|n| *n >= 3)
    })
    .await;
    let status = Command::new("kill").args(["-TERM", &operator.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || operator.wait()).await.unwrap().unwrap();
    assert!(exit.success(), "SIGTERM is a clean exit: {exit}");

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    let list = databases.list(&ListParams::default()).await.unwrap();
    let (mut complete, mut untouched) = (0, 0);
    for db in &list.items {
        let name = db.metadata.name.as_deref().unwrap();
        let deployment = deployments.get_opt(name).await.unwrap().is_some();
        let service = services.get_opt(name).await.unwrap().is_some();
        let status = db.status.as_ref().is_some_and(|s| s.observed_generation == db.metadata.generation);
        match (deployment, service, status) {
            (true, true, true) => complete += 1,
            (false, false, false) => untouched += 1,
            _ => panic!("Database {name} half-reconciled: deployment {deployment}, service {service}, status {status}"),
        }
    }
    eprintln!("after SIGTERM: {complete} Databases complete, {untouched} untouched, none half-done");
    assert!(untouched > 0, "the SIGTERM came after all the work; the test proves nothing");
}
