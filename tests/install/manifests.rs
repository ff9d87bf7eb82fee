//! `kubectl apply --server-side -k manifests/`, as the README says, on a plane that enforces
//! the restricted Pod Security level in the operator's namespace and
//! OwnerReferencesPermissionEnforcement; the operator's Pod runs on the real node, survives a
//! rolling update (the kubelet stops the old Pod with SIGTERM, the Lease moves to the new one)
//! and an uninstall.

use database_operator::api::Database;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::Api;

use crate::common::{TestNamespace, client, wait_until};
use crate::{RunningOperator, SERIAL, image, run, wait_ready};

const NAMESPACE: &str = "database-operator-system";
const LEASE: &str = "database-operator.example.com";
const DEPLOYMENT: &str = "deployment/database-operator-controller-manager";

#[tokio::test]
async fn the_manifests_install_an_operator_whose_pod_runs_rolls_and_converges_the_samples() {
    let _serial = SERIAL.lock().await;
    let client = client().await;
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests");

    let (rendered, _) = run("kubectl", &["kustomize", manifests], None);
    let image = image();
    assert!(
        rendered.contains(&format!("image: {image}\n")),
        "manifests/kustomization.yaml's images: entry must name the image under test, {image}"
    );
    // As the README says: server-side, so an object that other tools (the other tests, Helm)
    // applied is shared, not overwritten. kubectl prints Pod Security's "warn" answers on
    // stderr: there must be none, nor any other warning.
    let (_, warnings) = run("kubectl", &["apply", "--server-side", "-f", "-"], Some(&rendered));
    assert!(!warnings.contains("Warning"), "{warnings}");
    let labels = Api::<Namespace>::all(client.clone()).get(NAMESPACE).await.unwrap().metadata.labels.unwrap();
    for mode in ["enforce", "warn", "audit"] {
        assert_eq!(labels[&format!("pod-security.kubernetes.io/{mode}")], "restricted", "{mode}");
    }

    let operator = RunningOperator::start(&client, NAMESPACE, LEASE, None).await;

    // The samples, applied as the README says, into a namespace of the test's own (on kwok:
    // the samples name images that no registry serves here).
    let samples = TestNamespace::create(&client, "samples").await;
    let (_, warnings) = run(
        "kubectl",
        &["apply", "-k", concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/samples"), "-n", &samples.name],
        None,
    );
    assert!(!warnings.contains("Warning"), "{warnings}");
    wait_ready(&client, &samples.name, &["orders", "inventory", "customers", "sessions", "web"]).await;
    operator.check_metrics(&samples.name, "database-operator-metrics-reader").await;

    // A rolling update of the operator: the new Pod is Ready (caches synced) before the
    // kubelet stops the old one, which releases the Lease on its way out; the new Pod takes it.
    let restart = || drop(run("kubectl", &["rollout", "restart", DEPLOYMENT, "-n", NAMESPACE], None));
    operator.stopped_by_the_kubelet(true, restart).await;
    let operator = RunningOperator::start(&client, NAMESPACE, LEASE, Some(&operator.pod)).await;

    // The README's uninstall that keeps the Databases: every object but the CRD. Waiting for
    // the namespace to go lets the test run again on the same plane.
    operator
        .stopped_by_the_kubelet(false, || {
            run(
                "kubectl",
                &["delete", "-k", manifests, "-l", "app.kubernetes.io/name=database-operator", "--wait=false"],
                None,
            );
        })
        .await;
    let namespaces = Api::<Namespace>::all(client.clone());
    wait_until("the operator's namespace to be deleted", std::time::Duration::from_secs(90), || async {
        namespaces.get_opt(NAMESPACE).await.ok()?.is_none().then_some(())
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt("databases.example.com").await.unwrap().is_some(), "the CRD stays");
    let databases: Api<Database> = Api::namespaced(client, &samples.name);
    assert_eq!(databases.list(&Default::default()).await.unwrap().items.len(), 5, "and so do the Databases");
}
