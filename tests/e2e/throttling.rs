//! The apiserver's own throttling, for real: API Priority and Fairness puts the operator's
//! user in a priority level of three seats that rejects (429) what does not fit. The operator
//! retries as the server says, converges anyway, and counts the 429s in its metrics.

use std::time::Duration;

use database_operator::client::{self, Limits, RequestMetrics};
use database_operator::database::{Database, DatabaseSpec, Phase, Size};
use database_operator::operator::{self, Options};
use http::Method;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube_client::api::{Api, DeleteParams, ListParams, PostParams};
use kube_client::{Client, Config};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::common::{TestNamespace, client, install_crd, wait_until};

const DATABASES: usize = 60;
const WORKERS: usize = 16;

/// The cluster-scoped objects that route one user into a tiny priority level; removed on drop.
struct TinyPriorityLevel {
    client: Client,
    name: String,
}

impl TinyPriorityLevel {
    /// A priority level of one nominal share (three seats of the apiserver's 600), that lends
    /// and borrows nothing and rejects instead of queueing; a FlowSchema sending every request
    /// of `user` there; and cluster-admin for `user`, who is not in system:masters (that group
    /// is exempt from APF).
    async fn create(client: &Client, user: &str) -> (Self, String) {
        let name = user.to_string();
        let levels: Api<PriorityLevelConfiguration> = Api::all(client.clone());
        let level = json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"}}}
        });
        levels.create(&PostParams::default(), &serde_json::from_value(level).unwrap()).await.expect("create the level");
        let schemas: Api<FlowSchema> = Api::all(client.clone());
        let schema = json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": name},
                "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{
                    "subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                       "namespaces": ["*"], "clusterScope": true}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
                }]
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
        (Self { client: client.clone(), name }, schema.metadata.uid.expect("a created object has a uid"))
    }
}

impl Drop for TinyPriorityLevel {
    fn drop(&mut self) {
        let (client, name) = (self.client.clone(), self.name.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let params = DeleteParams::default();
                let _ = Api::<FlowSchema>::all(client.clone()).delete(&name, &params).await;
                let _ = Api::<PriorityLevelConfiguration>::all(client.clone()).delete(&name, &params).await;
                let _ = Api::<ClusterRoleBinding>::all(client).delete(&name, &params).await;
            });
        }
    }
}

/// A client acting as `user` (the test's admin identity impersonates it), built the way the
/// binary builds its own: throttle off here, retries, request metrics.
async fn impersonating(user: &str, metrics: &RequestMetrics) -> Client {
    let mut config = Config::infer().await.expect("the plane's kubeconfig");
    config.auth_info.impersonate = Some(user.to_string());
    client::from_config(config, Limits { qps: 0.0, burst: 1 }, metrics).expect("a client")
}

/// The FlowSchema that classified a request of `client`, from the apiserver's answer header.
async fn flow_schema_of(client: &Client) -> Option<String> {
    let request = http::Request::get("/api/v1/namespaces/default").body(Vec::new()).unwrap();
    let response = client.send(request.map(Into::into)).await.ok()?;
    let uid = response.headers().get("X-Kubernetes-PF-FlowSchema-UID")?;
    Some(uid.to_str().ok()?.to_string())
}

#[tokio::test]
async fn the_operator_converges_while_priority_and_fairness_rejects_it_with_429() {
    let admin = client().await;
    install_crd(&admin).await;
    let ns = TestNamespace::create(&admin, "apf").await;
    let user = format!("e2e-throttled-{:08x}", rand::random::<u32>());
    let (_level, schema_uid) = TinyPriorityLevel::create(&admin, &user).await;
    let metrics = RequestMetrics::default();
    let operator_client = impersonating(&user, &metrics).await;
    // APF picks up new configuration asynchronously: wait until our requests land in it.
    wait_until("the operator's requests to be classified by the new FlowSchema", Duration::from_secs(30), || async {
        (flow_schema_of(&operator_client).await? == schema_uid).then_some(())
    })
    .await;

    let databases: Api<Database> = Api::namespaced(admin.clone(), &ns.name);
    for i in 0..DATABASES {
        let db = Database::new(&format!("db-{i}"), DatabaseSpec { size: Size::Small, image: "postgres:17".into() });
        databases.create(&PostParams::default(), &db).await.expect("create a Database");
    }
    let cancel = CancellationToken::new();
    let mut options = Options::new(Some(ns.name.clone()), WORKERS);
    options.request_metrics = Some(metrics.clone());
    let task = tokio::spawn(operator::run(operator_client, options, cancel.clone()));

    wait_until("every Database to be Ready at its generation", Duration::from_secs(180), || async {
        let list = databases.list(&ListParams::default()).await.ok()?;
        let ready = list.items.iter().filter(|db| {
            db.status
                .as_ref()
                .is_some_and(|s| s.phase == Some(Phase::Ready) && s.observed_generation == db.metadata.generation)
        });
        (ready.count() == DATABASES).then_some(())
    })
    .await;
    cancel.cancel();
    task.await.unwrap().expect("the operator stops cleanly");

    let host = Config::infer().await.unwrap().cluster_url.authority().unwrap().to_string();
    let rejected: u64 = [Method::GET, Method::PATCH, Method::POST]
        .iter()
        .map(|method| metrics.requests(Some(429), method, &host))
        .sum();
    let patched =
        metrics.requests(Some(200), &Method::PATCH, &host) + metrics.requests(Some(201), &Method::PATCH, &host);
    eprintln!("{DATABASES} Databases, {WORKERS} workers: {rejected} answers 429, {patched} patches succeeded");
    assert!(rejected > 0, "APF never rejected a request: the test did not exercise a 429");
    assert!(patched >= 2 * DATABASES as u64, "every Database got its Deployment and Service applied");
}
