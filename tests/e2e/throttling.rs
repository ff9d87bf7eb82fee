//! The apiserver's own throttling, for real: API Priority and Fairness puts the operator's
//! user in a priority level of three seats that rejects (429) what does not fit. The operator
//! retries as the server says, converges anyway, and counts the 429s in its metrics.

use std::time::Duration;

use database_operator::api::{Database, DatabaseSpec, Phase, Size};
use database_operator::operator::{self, Options};
use http::Method;
use kube_client::api::{Api, ListParams, PostParams};
use kube_client::{Client, Config};
use operator_runtime::client::{self, Limits, RequestMetrics};
use tokio_util::sync::CancellationToken;

use crate::apf::{self, PriorityLevel, flow_schema_of};
use crate::common::{TestNamespace, client, install_crd, wait_until};

const DATABASES: usize = 60;
const WORKERS: usize = 16;

/// A client acting as `user` (the test's admin identity impersonates it), built the way the
/// binary builds its own: throttle off here, retries, request metrics.
async fn impersonating(user: &str, metrics: &RequestMetrics) -> Client {
    let mut config = Config::infer().await.expect("the plane's kubeconfig");
    config.auth_info.impersonate = Some(user.to_string());
    client::from_config(config, Limits { qps: 0.0, burst: 1 }, metrics).expect("a client")
}

#[tokio::test]
async fn the_operator_converges_while_priority_and_fairness_rejects_it_with_429() {
    let admin = client().await;
    install_crd(&admin).await;
    let ns = TestNamespace::create(&admin, "apf").await;
    let user = format!("e2e-throttled-{:08x}", rand::random::<u32>());
    // One nominal share: three seats of the apiserver's 600, for every request of the user.
    let (_level, schema_uid) = PriorityLevel::create(&admin, &user, 1, &apf::every_request()).await;
    let metrics = RequestMetrics::default();
    let operator_client = impersonating(&user, &metrics).await;
    // APF picks up new configuration asynchronously: wait until our requests land in it.
    wait_until("the operator's requests to be classified by the new FlowSchema", Duration::from_secs(30), || async {
        let request = http::Request::get("/api/v1/namespaces/default").body(Vec::new()).unwrap();
        (flow_schema_of(&operator_client, request).await? == schema_uid).then_some(())
    })
    .await;

    let databases: Api<Database> = Api::namespaced(admin.clone(), &ns.name);
    for i in 0..DATABASES {
        let db = Database::new(&format!("db-{i}"), DatabaseSpec::new(Size::Small, "postgres:17"));
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
