//! API Priority and Fairness, to make the apiserver itself throttle one user: a priority
//! level of the test's own, a FlowSchema routing that user's requests to it, and cluster-admin
//! for the user (who is not in system:masters: that group is exempt from APF). The tests
//! impersonate the user.

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use serde_json::{Value, json};

/// A FlowSchema rule matching every request.
pub(crate) fn every_request() -> Value {
    json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                           "namespaces": ["*"], "clusterScope": true}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
    })
}

/// The cluster-scoped objects that route one user into a priority level; removed on drop.
pub(crate) struct PriorityLevel {
    name: String,
}

impl PriorityLevel {
    /// A priority level of `shares` nominal concurrency shares (each about three seats of the
    /// apiserver's 600; 0: no seat at all, every request is rejected), that lends and borrows
    /// nothing and rejects (429) instead of queueing; a FlowSchema sending the requests of
    /// `user` that `rules` match there; and cluster-admin for `user`. Returns the FlowSchema's
    /// uid, which [`flow_schema_of`] compares with.
    pub(crate) async fn create(client: &Client, user: &str, shares: u32, rules: &Value) -> (Self, String) {
        let name = user.to_string();
        let levels: Api<PriorityLevelConfiguration> = Api::all(client.clone());
        let level = json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": shares, "lendablePercent": 0, "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"}}}
        });
        levels.create(&PostParams::default(), &serde_json::from_value(level).unwrap()).await.expect("create the level");
        let schemas: Api<FlowSchema> = Api::all(client.clone());
        let mut rule = rules.clone();
        rule["subjects"] = json!([{"kind": "User", "user": {"name": user}}]);
        let schema = json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": name},
                "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [rule]
            }
        });
        let schema = schemas.create(&PostParams::default(), &serde_json::from_value(schema).unwrap()).await.unwrap();
        let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        });
        bindings.create(&PostParams::default(), &serde_json::from_value(binding).unwrap()).await.unwrap();
        (Self { name }, schema.metadata.uid.expect("a created object has a uid"))
    }
}

impl Drop for PriorityLevel {
    fn drop(&mut self) {
        let name = &self.name;
        crate::common::delete_when_dropped(&[
            &format!("flowschemas.flowcontrol.apiserver.k8s.io/{name}"),
            &format!("prioritylevelconfigurations.flowcontrol.apiserver.k8s.io/{name}"),
            &format!("clusterrolebinding/{name}"),
        ]);
    }
}

/// The uid of the FlowSchema that classified `request` of `client`, from the apiserver's
/// answer header (APF picks up new configuration asynchronously: wait until this names yours).
pub(crate) async fn flow_schema_of(client: &Client, request: http::Request<Vec<u8>>) -> Option<String> {
    let response = client.send(request.map(Into::into)).await.ok()?;
    let uid = response.headers().get("X-Kubernetes-PF-FlowSchema-UID")?;
    Some(uid.to_str().ok()?.to_string())
}
