//! The informer against a real apiserver (the control plane of `hack/control-plane.sh`): create,
//! update and delete of ConfigMaps reach the store and the handlers, with paginated and
//! streaming lists, and through the factory. Each test works in a namespace of its own.
//! Fault injection (410 Gone, refused streaming, backoff) is unit-tested with a fake in
//! `src/informer/`; objects that do not decode are tested here too, on a CRD of the test's own.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_core::ObjectMeta;
use operator_runtime::informer::{Config, EventHandler, Factory, Informer, InitialListMode, Metrics, key_of};
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LABEL: &str = "informer-test";
const WAIT: Duration = Duration::from_secs(30);

/// The end-to-end tests' helpers: a client that refuses a non-loopback apiserver, a namespace
/// of the test's own.
#[path = "e2e/common.rs"]
#[allow(dead_code)]
mod common;
use common::{TestNamespace, client};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), ..Default::default() }
}

/// A labelled ConfigMap (every namespace also holds `kube-root-ca.crt`; the label keeps it out).
fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { labels: Some(BTreeMap::from([(LABEL.to_string(), "yes".to_string())])), ..meta(name) },
        data: Some(BTreeMap::from([("value".to_string(), value.to_string())])),
        ..Default::default()
    }
}

fn selected(config: Config) -> Config {
    Config { label_selector: Some(format!("{LABEL}=yes")), ..config }
}

/// Writes down handler calls as `add a=1`, `update a=1->2`, `delete a=2` (name=data value).
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

fn describe(obj: &ConfigMap) -> String {
    let value = obj.data.as_ref().and_then(|data| data.get("value")).cloned().unwrap_or_default();
    format!("{}={value}", obj.metadata.name.as_deref().unwrap_or_default())
}

impl EventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
        self.0.lock().unwrap().push(format!("add {}", describe(obj)));
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let value = describe(new);
        let value = value.split_once('=').map_or("", |(_, v)| v);
        self.0.lock().unwrap().push(format!("update {}->{value}", describe(old)));
    }
    fn on_delete(&self, obj: &Arc<ConfigMap>) {
        self.0.lock().unwrap().push(format!("delete {}", describe(obj)));
    }
}

impl Recorder {
    fn events(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

async fn wait_until<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out after {WAIT:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn spawn_run(informer: &Arc<Informer<ConfigMap>>, cancel: &CancellationToken) -> JoinHandle<()> {
    let (informer, cancel) = (informer.clone(), cancel.clone());
    tokio::spawn(async move { informer.run(cancel).await })
}

/// Creates, updates and deletes `a` while the informer runs, checking store and handlers.
async fn create_update_delete_reach_store_and_handlers(mode: InitialListMode) -> [u64; 2] {
    let client = client().await;
    let ns = TestNamespace::create(&client, "informer").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    api.create(&PostParams::default(), &config_map("before", "0")).await.expect("create before");

    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let config = selected(Config { initial_list: mode, metrics: Some(metrics.clone()), ..Config::default() });
    let informer = Arc::new(Informer::new(api.clone(), config));
    let recorder = Arc::new(Recorder::default());
    informer.add_event_handler(recorder.clone());
    let cancel = CancellationToken::new();
    let task = spawn_run(&informer, &cancel);
    informer.wait_for_sync(WAIT).await.expect("the informer syncs");
    let store = informer.store();
    assert_eq!(store.keys(), [format!("{}/before", ns.name)]);

    api.create(&PostParams::default(), &config_map("a", "1")).await.expect("create a");
    let key = format!("{}/a", ns.name);
    wait_until("a in the store", || async { store.get(&key).is_some() }).await;
    let patch = Patch::Merge(serde_json::json!({ "data": { "value": "2" } }));
    api.patch("a", &PatchParams::default(), &patch).await.expect("update a");
    wait_until("a=2 in the store", || async { store.get(&key).is_some_and(|cm| describe(&cm) == "a=2") }).await;
    api.delete("a", &DeleteParams::default()).await.expect("delete a");
    wait_until("a gone from the store", || async { store.get(&key).is_none() }).await;
    wait_until("four handler calls", || async { recorder.events().len() >= 4 }).await;
    assert_eq!(recorder.events(), ["add before=0", "add a=1", "update a=1->2", "delete a=2"]);
    assert!(store.list().iter().all(|cm| cm.metadata.managed_fields.is_none()), "managedFields stripped");

    cancel.cancel();
    task.await.unwrap();
    [counter(&registry, "informer_lists_total"), counter(&registry, "informer_list_errors_total")]
}

/// The value of counter `name` for ConfigMaps, from the text exposition.
fn counter(registry: &Registry, name: &str) -> u64 {
    counter_of(registry, name, "configmaps")
}

/// The value of counter `name` for `resource`, from the text exposition.
fn counter_of(registry: &Registry, name: &str, resource: &str) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let prefix = format!("{name}{{resource=\"{resource}\"}} ");
    let line = text.lines().find_map(|line| line.strip_prefix(&prefix));
    line.unwrap_or_else(|| panic!("{name} missing from\n{text}")).parse().unwrap()
}

#[tokio::test]
async fn create_update_delete_reach_the_store_and_handlers_with_paginated_lists() {
    let [lists, list_errors] = create_update_delete_reach_store_and_handlers(InitialListMode::List).await;
    assert_eq!((lists, list_errors), (1, 0));
}

/// Whether this apiserver serves streaming lists: its `WatchList` feature gate, as its own
/// `kubernetes_feature_enabled` metric reports it (on by default from Kubernetes 1.34;
/// `APISERVER_FEATURE_GATES=WatchList=false hack/control-plane.sh up` turns it off).
async fn apiserver_streams_lists() -> bool {
    let client = client().await;
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let metrics = client.request_text(request).await.expect("the apiserver's /metrics");
    let gate = metrics
        .lines()
        .find(|line| line.starts_with("kubernetes_feature_enabled{") && line.contains(r#"name="WatchList""#))
        .unwrap_or_else(|| panic!("the apiserver reports no WatchList feature gate"));
    gate.ends_with(" 1")
}

#[tokio::test]
async fn auto_mode_streams_the_initial_list_where_the_apiserver_can_and_falls_back_where_not() {
    let streams = apiserver_streams_lists().await;
    let [lists, list_errors] = create_update_delete_reach_store_and_handlers(InitialListMode::Auto).await;
    if streams {
        assert_eq!((lists, list_errors), (1, 0), "one streaming list, answered the first time");
    } else {
        assert_eq!((lists, list_errors), (2, 1), "a refused streaming list, then a paginated one");
    }
}

#[tokio::test]
async fn a_forced_streaming_list_syncs_where_the_apiserver_streams_lists() {
    if !apiserver_streams_lists().await {
        // Nothing to sync against: a forced streaming list retries forever by contract.
        // The fallback is what the auto-mode test above checks on such a server.
        eprintln!("this apiserver has WatchList off: the forced streaming list has nothing to test against");
        return;
    }
    let [lists, list_errors] = create_update_delete_reach_store_and_handlers(InitialListMode::Streaming).await;
    assert_eq!((lists, list_errors), (1, 0), "the apiserver answered the streaming list the first time");
}

#[tokio::test]
async fn a_list_of_several_pages_syncs_every_object() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "informer").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    for i in 0..12 {
        api.create(&PostParams::default(), &config_map(&format!("cm-{i:02}"), "x")).await.expect("create");
    }
    let config = selected(Config { initial_list: InitialListMode::List, page_size: 5, ..Config::default() });
    let informer = Arc::new(Informer::new(api, config));
    let cancel = CancellationToken::new();
    let task = spawn_run(&informer, &cancel);
    informer.wait_for_sync(WAIT).await.expect("the informer syncs");
    assert_eq!(informer.store().len(), 12);
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn factory_shares_one_informer_per_kind_and_keeps_it_current() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "informer").await;
    let factory = Factory::new(client.clone(), Some(ns.name.clone()), selected(Config::default()));
    let informer = factory.informer::<ConfigMap>();
    assert!(Arc::ptr_eq(&informer, &factory.informer::<ConfigMap>()));
    let cancel = CancellationToken::new();
    let tasks = factory.start(cancel.clone());
    factory.wait_for_cache_sync(WAIT).await.expect("the factory's informers sync");
    // Synced: the cache holds what the namespace holds (kube-controller-manager's
    // kube-root-ca.crt, which every namespace gets, as on any cluster).
    let api: Api<ConfigMap> = Api::namespaced(client, &ns.name);
    let listed: Vec<String> = api.list(&Default::default()).await.expect("list").items.iter().map(key_of).collect();
    let mut cached: Vec<String> = informer.store().list().iter().map(|c| key_of(c.as_ref())).collect();
    cached.sort();
    assert_eq!(cached, listed);
    assert!(informer.store().get(&format!("{}/a", ns.name)).is_none());

    api.create(&PostParams::default(), &config_map("a", "1")).await.expect("create a");
    let store = informer.store();
    wait_until("a in the store", || async { store.get(&format!("{}/a", ns.name)).is_some() }).await;

    cancel.cancel();
    for task in tasks {
        task.await.unwrap();
    }
}

/// A handler that panics on its first object.
struct Panicking;

impl EventHandler<ConfigMap> for Panicking {
    fn on_add(&self, _: &Arc<ConfigMap>, _: bool) {
        panic!("a handler bug");
    }
    fn on_update(&self, _: &Arc<ConfigMap>, _: &Arc<ConfigMap>) {}
    fn on_delete(&self, _: &Arc<ConfigMap>) {}
}

/// The regression test of an informer that a panicking handler ended silently: its cache
/// froze while the factory still called it synced.
#[tokio::test]
async fn an_informer_ended_by_a_panicking_handler_is_reported_and_unsynced() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "informer").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    api.create(&PostParams::default(), &config_map("a", "1")).await.expect("create a");
    let factory = Factory::new(client, Some(ns.name.clone()), selected(Config::default()));
    factory.informer::<ConfigMap>().add_event_handler(Arc::new(Panicking));
    let cancel = CancellationToken::new();
    let tasks = factory.start(cancel.clone());

    let stopped = tokio::time::timeout(WAIT, factory.wait_for_unexpected_stop()).await;
    assert_eq!(stopped.expect("the stop is reported"), "configmaps");
    assert_eq!(factory.stopped(), ["configmaps"]);
    assert!(!factory.has_synced(), "a frozen cache is not a synced one");
    cancel.cancel();
    for task in tasks {
        assert!(task.await.unwrap_err().is_panic(), "the panic ended the task");
    }
}

/// A kind whose stored objects can hold what its Rust type refuses: the CRD preserves any spec,
/// the type accepts two sizes. That is what a Database stored before a CRD change narrowed
/// `spec.size` looks like to the operator.
#[derive(kube_derive::CustomResource, Clone, Debug, serde::Deserialize, serde::Serialize)]
#[kube(
    group = "informer-test.example.com",
    version = "v1",
    kind = "Gadget",
    namespaced,
    schema = "disabled",
    crates(kube_core = "::kube_core")
)]
struct GadgetSpec {
    size: GadgetSize,
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum GadgetSize {
    Small,
    Large,
}

/// Installs the Gadget CRD (idempotent: server-side apply) and waits until it is served.
async fn install_gadget_crd(client: &kube_client::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.informer-test.example.com"},
        "spec": {"group": "informer-test.example.com", "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("informer-test").force();
    crds.patch("gadgets.informer-test.example.com", &params, &Patch::Apply(crd)).await.expect("apply the CRD");
    let gadgets: Api<Gadget> = Api::all(client.clone());
    wait_until("the Gadget CRD to be served", || async { gadgets.list(&Default::default()).await.is_ok() }).await;
}

fn gadget(name: &str, size: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "informer-test.example.com/v1", "kind": "Gadget",
        "metadata": {"name": name}, "spec": {"size": size}})
}

/// The value of counter `name` for Gadgets.
fn gadget_counter(registry: &Registry, name: &str) -> u64 {
    counter_of(registry, name, "gadgets.informer-test.example.com")
}

/// One stored object the type cannot hold: a fresh informer still syncs with every other one
/// (a restarted operator is a fresh informer), an object that turns bad leaves the cache and
/// comes back when it is fixed, and the rest of the kind keeps flowing on the same watch.
async fn one_bad_object_never_blocks_its_kind(mode: InitialListMode) {
    use kube_core::DynamicObject;
    let client = client().await;
    install_gadget_crd(&client).await;
    let ns = TestNamespace::create(&client, "informer").await;
    let resource = kube_core::ApiResource::erase::<Gadget>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &resource);
    let create = |name: &'static str, size: &'static str| {
        let raw = raw.clone();
        async move {
            let obj: DynamicObject = serde_json::from_value(gadget(name, size)).unwrap();
            raw.create(&PostParams::default(), &obj).await.expect("create a gadget");
        }
    };
    create("first", "small").await;
    create("bad", "huge").await;
    create("last", "large").await;

    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    // Pages of one object: the bad one is a page of its own, between two good ones.
    let config = Config { initial_list: mode, page_size: 1, metrics: Some(metrics), ..Config::default() };
    let informer = Arc::new(Informer::new(Api::<Gadget>::namespaced(client.clone(), &ns.name), config));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    informer.wait_for_sync(WAIT).await.expect("the informer syncs past the bad object");
    let store = informer.store();
    let key = |name: &str| format!("{}/{name}", ns.name);
    let mut keys = store.keys();
    keys.sort();
    assert_eq!(keys, [key("first"), key("last")]);
    assert_eq!(gadget_counter(&registry, "informer_undecodable_objects_total"), 1);
    if mode == InitialListMode::List {
        assert_eq!(gadget_counter(&registry, "informer_list_errors_total"), 0);
    }

    // On the watch: `first` turns bad and leaves, `new` arrives after it, `first` comes back.
    let patch = |size: &str| Patch::Merge(serde_json::json!({"spec": {"size": size}}));
    raw.patch("first", &PatchParams::default(), &patch("gigantic")).await.expect("patch first");
    create("new", "small").await;
    wait_until("new in the store and first gone", || async {
        store.get(&key("new")).is_some() && store.get(&key("first")).is_none()
    })
    .await;
    raw.patch("first", &PatchParams::default(), &patch("large")).await.expect("fix first");
    wait_until("first back in the store", || async { store.get(&key("first")).is_some() }).await;
    assert_eq!(gadget_counter(&registry, "informer_undecodable_objects_total"), 2);
    assert_eq!(gadget_counter(&registry, "informer_watch_errors_total"), 0, "the watch never failed");
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn one_bad_object_never_blocks_its_kind_with_paginated_lists() {
    one_bad_object_never_blocks_its_kind(InitialListMode::List).await;
}

#[tokio::test]
async fn one_bad_object_never_blocks_its_kind_with_streaming_lists() {
    if !apiserver_streams_lists().await {
        return one_bad_object_never_blocks_its_kind(InitialListMode::Auto).await;
    }
    one_bad_object_never_blocks_its_kind(InitialListMode::Streaming).await;
}
