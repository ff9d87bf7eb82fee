//! `helm install` of charts/database-operator on the plane, into a namespace that enforces the
//! restricted Pod Security level, whose Pod the real node runs; stopped by the kubelet (a scale
//! to zero), then `helm uninstall`, which keeps the CRD.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use database_operator::api::{Database, DatabaseSpec, Size};

use crate::common::{TestNamespace, client};
use crate::{RunningOperator, SERIAL, image, run, wait_ready};

const RELEASE: &str = "e2e-chart";
const LEASE: &str = "database-operator.example.com";

pub(crate) fn helm() -> String {
    std::env::var("HELM").unwrap_or_else(|_| {
        panic!("HELM is not set: build helm with `hack/helm.sh` and set HELM to the path it prints last, or run hack/test.sh")
    })
}

/// `helm install RELEASE charts/database-operator` into `namespace`, with the image under test.
pub(crate) fn install(namespace: &str, release: &str) {
    let image = image();
    let (repository, tag) = image.rsplit_once(':').expect("IMAGE is repository:tag");
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/database-operator");
    // --take-ownership: the CRD may already be on the plane, applied by other tests.
    let values = [format!("image.repository={repository}"), format!("image.tag={tag}")];
    let mut args = vec!["install", release, chart, "--namespace", namespace, "--take-ownership"];
    for value in &values {
        args.extend(["--set", value.as_str()]);
    }
    let (notes, warnings) = run(&helm(), &args, None);
    assert!(!warnings.contains("Warning"), "{warnings}");
    assert!(notes.contains("STATUS: deployed"), "{notes}");
}

#[tokio::test]
async fn the_chart_installs_an_operator_that_converges_a_database_and_uninstalls_keeping_the_crd() {
    let _serial = SERIAL.lock().await;
    let client = client().await;
    let namespace = TestNamespace::create_on_real_node(&client, "chart").await;
    let restricted = json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }}});
    Api::<Namespace>::all(client.clone())
        .patch(&namespace.name, &PatchParams::default(), &Patch::Merge(&restricted))
        .await
        .unwrap();
    install(&namespace.name, RELEASE);

    let operator = RunningOperator::start(&client, &namespace.name, LEASE, None).await;
    let databases = TestNamespace::create(&client, "chart-db").await;
    let db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
    Api::<Database>::namespaced(client.clone(), &databases.name).create(&PostParams::default(), &db).await.unwrap();
    wait_ready(&client, &databases.name, &["orders"]).await;
    operator.check_metrics(&databases.name, &format!("{RELEASE}-database-operator-metrics-reader")).await;

    // Scaled to zero, the kubelet stops the Pod (SIGTERM); the operator releases its Lease.
    let deployment = format!("deployment/{RELEASE}-database-operator-controller-manager");
    let scale_to_zero = || drop(run("kubectl", &["scale", &deployment, "--replicas=0", "-n", &namespace.name], None));
    operator.stopped_by_the_kubelet(true, scale_to_zero).await;
    assert_eq!(operator.lease_holder(LEASE).await, None, "the Lease is released");

    run(&helm(), &["uninstall", RELEASE, "--namespace", &namespace.name], None);
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get("databases.example.com").await;
    let annotations = crd.expect("helm uninstall keeps the CRD").metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("helm.sh/resource-policy").map(String::as_str), Some("keep"));
    assert!(
        Api::<Database>::namespaced(client, &databases.name).get_opt("orders").await.unwrap().is_some(),
        "the Database outlives the release"
    );
}
