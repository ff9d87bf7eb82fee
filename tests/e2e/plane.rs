//! The control plane is real: a Deployment's pod is scheduled onto a kwok node and becomes
//! Ready, and deleting the Deployment garbage-collects its ReplicaSet and pod.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_client::api::{Api, DeleteParams, ListParams, PostParams};
use kube_core::ObjectMeta;

use crate::common::{TestNamespace, client, wait_until};

#[tokio::test]
async fn deployment_pod_runs_on_a_kwok_node_and_is_garbage_collected() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "plane").await;
    let labels = BTreeMap::from([("app".to_string(), "plane-check".to_string())]);
    let deployment = Deployment {
        metadata: ObjectMeta { name: Some("plane-check".into()), ..Default::default() },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        image: Some("registry.invalid/plane-check:1".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns.name);
    deployments.create(&PostParams::default(), &deployment).await.expect("create the Deployment");

    let selector = ListParams::default().labels("app=plane-check");
    let node = wait_until("the pod to be Ready on a kwok node", Duration::from_secs(60), || async {
        let pod = pods.list(&selector).await.ok()?.items.into_iter().next()?;
        let node = pod.spec.as_ref()?.node_name.clone()?;
        let ready = pod.status?.conditions?.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(node)
    })
    .await;
    assert!(node.starts_with("kwok-node-"), "scheduled onto {node}, not a kwok node");

    wait_until("the Deployment to report one ready replica", Duration::from_secs(60), || async {
        let status = deployments.get("plane-check").await.ok()?.status?;
        (status.ready_replicas == Some(1)).then_some(())
    })
    .await;
    assert_eq!(replica_sets.list(&selector).await.expect("list ReplicaSets").items.len(), 1);

    deployments.delete("plane-check", &DeleteParams::default()).await.expect("delete the Deployment");
    wait_until("the ReplicaSet and pod to be garbage-collected", Duration::from_secs(60), || async {
        let sets = replica_sets.list(&selector).await.ok()?.items.len();
        let remaining = pods.list(&selector).await.ok()?.items.len();
        (sets == 0 && remaining == 0).then_some(())
    })
    .await;
}
