//! A plane of several real nodes (`REAL_NODES=3 NODES=real hack/control-plane.sh up`: each
//! node its own network namespace, containerd, kubelet, kube-proxy and CoreDNS), the ground
//! a Database of several instances will stand on: pods on one node reach a database on
//! another through its Service, and a node that stops answering (frozen) or loses its power
//! (killed) is seen as lost by the cluster and by the Database's status, and comes back with
//! its data. Data is proven by reading it back (count and checksum) from clients on the other
//! nodes.
//!
//! hack/test.sh runs this binary after the rest of the suite, on a plane of its own (a test
//! here freezes and kills nodes, which the suite's tests must never see), with
//! `cargo test --test nodes`: it is no part of `cargo test --all-targets` (`test = false`
//! in Cargo.toml), whose plane has one real node. Its tests run one at a time ([`SERIAL`]).

#[path = "../e2e/common.rs"]
#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use database_operator::api::{Database, DatabaseSpec, DatabaseStatus, EngineKind, Phase, Role, Size};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube_client::Client;
use kube_client::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::common::{
    Nodes, Operator, PG_READ, PG_WRITE, TestNamespace, client, client_pod_on, images, install_crd, reaching, ready,
    wait_until,
};

/// One test at a time: a node one test freezes must not be under another's pods.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long the cluster may take to see a node lost: the node lifecycle controller's grace
/// period is 10 s on this plane (hack/control-plane.sh), checked every second; the rest is
/// room for a busy two-core machine.
const NOTICE: Duration = Duration::from_secs(60);

/// A second batch of rows, from another node than the first's.
const PG_WRITE_MORE: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c "insert into items select i, 'item ' || i from generate_series(1001, 2000) i""#;

/// The plane's real nodes, by name, Ready or not; panics with instructions when it has fewer
/// than three.
async fn real_nodes(client: &Client) -> Vec<String> {
    let nodes = Api::<Node>::all(client.clone()).list(&ListParams::default().labels("type=real")).await.unwrap();
    let names: Vec<String> = nodes.items.into_iter().filter_map(|node| node.metadata.name).collect();
    assert!(
        names.len() >= 3,
        "these tests need a plane of three real nodes, and this one has {names:?}: start it with \
         `REAL_NODES=3 NODES=real hack/control-plane.sh up` (hack/test.sh does)"
    );
    names
}

/// Node `name`'s Ready condition: "True", "False" or "Unknown".
async fn node_ready(client: &Client, name: &str) -> Option<String> {
    let node = Api::<Node>::all(client.clone()).get(name).await.ok()?;
    node.status?.conditions?.into_iter().find(|c| c.type_ == "Ready").map(|c| c.status)
}

/// Whether node `name` has the taint the node lifecycle controller puts on a node it cannot
/// reach (`node.kubernetes.io/unreachable`, NoExecute).
async fn tainted_unreachable(client: &Client, name: &str) -> bool {
    let node = Api::<Node>::all(client.clone()).get(name).await.ok();
    let taints = node.and_then(|node| node.spec?.taints).unwrap_or_default();
    taints.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
}

/// Runs `hack/control-plane.sh node ACTION NODE` on the tests' plane; panics with its words
/// when it fails.
fn node_action(action: &str, node: &str) {
    node_command(&[action, node]);
}

/// Runs `hack/control-plane.sh node ARGS...` on the tests' plane; panics with its words when
/// it fails.
fn node_command(args: &[&str]) {
    let kubeconfig = std::env::var("KUBECONFIG").expect("the tests run with KUBECONFIG set");
    let plane = std::path::Path::new(&kubeconfig).parent().and_then(|dir| dir.file_name()).unwrap();
    let output = std::process::Command::new("hack/control-plane.sh")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PLANE", plane)
        .arg("node")
        .args(args)
        .output()
        .expect("hack/control-plane.sh runs");
    assert!(output.status.success(), "node {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
}

/// The node Database `name`'s pod (its primary's, with several instances) runs on.
async fn node_of(pods: &Api<Pod>, name: &str) -> String {
    let primary = ListParams::default().labels(&format!("app.kubernetes.io/instance={name},example.com/role=primary"));
    let selector = match pods.list(&primary).await.unwrap().items.is_empty() {
        true => ListParams::default().labels(&format!("app.kubernetes.io/instance={name}")),
        false => primary,
    };
    let pod = pods.list(&selector).await.unwrap().items.into_iter().next().expect("the Database's pod");
    pod.spec.and_then(|spec| spec.node_name).expect("a scheduled pod")
}

/// One test's ground: the lock of [`SERIAL`], a restricted namespace with an operator of
/// its own, a Ready postgres Database `orders` of `instances` in it, the node it (its
/// primary) runs on and the others.
struct Ground {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    client: Client,
    ns: TestNamespace,
    _operator: Operator,
    home: String,
    others: Vec<String>,
}

async fn ground(prefix: &str, instances: i32) -> Ground {
    ground_with(prefix, instances, |_| {}).await
}

/// [`ground`], with the Database's spec changed by `change` before it is created.
async fn ground_with(prefix: &str, instances: i32, change: impl FnOnce(&mut DatabaseSpec)) -> Ground {
    let serial = SERIAL.lock().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, prefix, Nodes::Real(1)).await;
    let operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let mut db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    db.spec.instances = (instances > 1).then_some(instances);
    change(&mut db.spec);
    databases.create(&PostParams::default(), &db).await.unwrap();
    ready(&databases, "orders").await;
    let home = node_of(&Api::namespaced(client.clone(), &ns.name), "orders").await;
    let others = real_nodes(&client).await.into_iter().filter(|node| *node != home).collect();
    Ground { _serial: serial, client, ns, _operator: operator, home, others }
}

impl Ground {
    /// Runs client `script` (with [`reaching`]) in pod `pod` on `node`, logged in to `orders`,
    /// and returns its log.
    async fn run_on(&self, node: &str, pod: &str, script: &str) -> String {
        let (image, secret) = (images::POSTGRES, "orders-credentials");
        client_pod_on(&self.client, &self.ns.name, Some(node), pod, image, secret, &reaching(script)).await
    }
}

#[tokio::test]
async fn clients_on_two_nodes_write_and_read_a_database_on_a_third_through_its_service() {
    let ground = ground("spread", 1).await;
    let (home, first, second) = (&ground.home, &ground.others[0], &ground.others[1]);
    ground.run_on(first, "write", PG_WRITE).await;
    ground.run_on(second, "write-more", PG_WRITE_MORE).await;
    let from_first = ground.run_on(first, "read", PG_READ).await;
    let from_second = ground.run_on(second, "read-again", PG_READ).await;
    assert!(from_first.starts_with("2000|"), "read on {first} from the database on {home}: {from_first}");
    assert_eq!(from_second, from_first, "the same rows, read on {second} and on {first}");
    let pods: Api<Pod> = Api::namespaced(ground.client.clone(), &ground.ns.name);
    for (pod, node) in [("write", first), ("write-more", second), ("read", first), ("read-again", second)] {
        assert_eq!(&pods.get(pod).await.unwrap().spec.unwrap().node_name.unwrap(), node, "{pod} ran on {node}");
    }
}

#[tokio::test]
async fn a_node_that_stops_answering_or_loses_its_power_is_seen_lost_and_comes_back_with_its_data() {
    let ground = ground("lost-node", 1).await;
    let (client, home, reader) = (&ground.client, &ground.home, &ground.others[0]);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ground.ns.name);
    ground.run_on(reader, "write", PG_WRITE).await;
    let written = ground.run_on(reader, "read", PG_READ).await;
    assert!(written.starts_with("1000|"), "{written}");

    for (lose, back, round) in [("freeze", "thaw", "frozen"), ("kill", "start", "killed")] {
        let lost = Instant::now();
        node_action(lose, home);
        wait_until(&format!("{home} ({round}) to read Ready Unknown"), NOTICE, || async {
            (node_ready(client, home).await.as_deref() == Some("Unknown")).then_some(())
        })
        .await;
        let noticed = lost.elapsed();
        wait_until(&format!("{home} ({round}) to be tainted unreachable"), NOTICE, || async {
            tainted_unreachable(client, home).await.then_some(())
        })
        .await;
        // The node lifecycle controller marks the lost node's pods not Ready: the Database
        // tells the truth.
        let status = wait_until(&format!("Database orders on {home} ({round}) to be not Ready"), NOTICE, || async {
            let status = databases.get("orders").await.ok()?.status?;
            (status.phase != Some(Phase::Ready)).then_some(status)
        })
        .await;
        let degraded = lost.elapsed();
        let reason = status.conditions.iter().find(|c| c.type_ == "Degraded" && c.status == "True").map(|c| &c.reason);
        assert_eq!(
            (status.phase, reason.map(String::as_str)),
            (Some(Phase::Degraded), Some("NoReadyReplicas")),
            "{round} {home}: {status:?}"
        );

        let returned = Instant::now();
        node_action(back, home);
        wait_until(&format!("{home} ({back}) to be Ready"), NOTICE, || async {
            (node_ready(client, home).await.as_deref() == Some("True")).then_some(())
        })
        .await;
        ready(&databases, "orders").await;
        let again = returned.elapsed();
        let read = ground.run_on(reader, &format!("read-after-{round}"), PG_READ).await;
        assert_eq!(read, written, "the rows after {home} was {round} and came back");
        eprintln!(
            "[figure] {round} node: Ready Unknown after {:.1} s, the Database Degraded after {:.1} s; \
             {back}: the Database Ready again after {:.1} s",
            noticed.as_secs_f64(),
            degraded.as_secs_f64(),
            again.as_secs_f64(),
        );
    }
}

/// Asks the Eviction API to evict `pod`, as `kubectl drain` does (with the `apiVersion` and
/// `kind` kube-client's own `Api::evict` leaves out).
async fn evict(pods: &Api<Pod>, pod: &str) -> Result<(), kube_client::Error> {
    let eviction = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": { "name": pod },
    });
    pods.create_subresource::<_, serde_json::Value>("eviction", pod, &PostParams::default(), &eviction).await.map(drop)
}

/// A client script that runs `sql` with psql at `$1` (a Service's name or a pod's address) as
/// the application's user, its password in the environment.
fn psql_at(host: &str, sql: &str) -> String {
    format!(
        r#"export PGPASSWORD="$DATABASE_PASSWORD"
reachable pg_isready --host="{host}"
psql --host="{host}" --username="$DATABASE_USER" --dbname=app -v ON_ERROR_STOP=1 -Atq -c "{sql}""#
    )
}

/// The status of Database `orders` once it is `Degraded` for `reason`.
async fn degraded_for(databases: &Api<Database>, reason: &str) -> DatabaseStatus {
    wait_until(&format!("orders to be Degraded, {reason}"), common::CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        let degraded = status.conditions.iter().find(|c| c.type_ == "Degraded" && c.status == "True")?;
        (degraded.reason == reason).then_some(status)
    })
    .await
}

/// The status and the Degraded message of Database `orders` once it is `Degraded` for
/// `reason` (a replica's fault), asserting that `Ready` stays True: the primary serves.
async fn degraded_while_the_primary_serves(databases: &Api<Database>, reason: &str) -> (DatabaseStatus, String) {
    let status = degraded_for(databases, reason).await;
    let said = status.conditions.iter().find(|c| c.type_ == "Degraded").map(|c| c.message.clone()).unwrap();
    let ready_condition = status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status.clone());
    assert_eq!((status.phase, ready_condition.as_deref()), (Some(Phase::Degraded), Some("True")), "{status:?}");
    (status, said)
}

/// What [`PG_READ`] reads: the count and a checksum of every name in order.
const COUNT_AND_CHECKSUM: &str = "select count(*), md5(string_agg(name, ',' order by id)) from items";

#[tokio::test]
async fn three_instances_on_three_nodes_stream_every_row_drain_one_at_a_time_and_a_replica_lost_cut_off_or_unplaceable_is_told_while_the_primary_serves()
 {
    let started = Instant::now();
    let ground = ground("replicas", 3).await;
    let client = &ground.client;
    let databases: Api<Database> = Api::namespaced(client.clone(), &ground.ns.name);
    let status = wait_until("every instance of orders to be ready", common::CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        (status.instances.len() == 3 && status.instances.iter().all(|i| i.ready)).then_some(status)
    })
    .await;
    let all_ready = started.elapsed();
    assert_eq!((status.current_primary.as_deref(), status.ready_replicas), (Some("orders"), Some(3)), "{status:?}");
    let roles: Vec<_> = status.instances.iter().map(|i| (i.name.as_str(), i.role)).collect();
    assert_eq!(
        roles,
        [
            ("orders", Some(Role::Primary)),
            ("orders-instance-2", Some(Role::Replica)),
            ("orders-instance-3", Some(Role::Replica))
        ]
    );

    // One node each, and the roles on the pods as the status says.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ground.ns.name);
    let instances = pods.list(&ListParams::default().labels("app.kubernetes.io/instance=orders")).await.unwrap();
    let mut placed: Vec<(String, String, String)> = instances
        .items
        .iter()
        .map(|pod| {
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default();
            (labels["example.com/role"].clone(), node, ip)
        })
        .collect();
    placed.sort();
    let nodes: std::collections::BTreeSet<_> = placed.iter().map(|(_, node, _)| node.clone()).collect();
    assert_eq!(nodes.len(), 3, "three instances on three nodes: {placed:?}");
    assert_eq!(placed.iter().map(|(role, ..)| role.as_str()).collect::<Vec<_>>(), ["primary", "replica", "replica"]);

    // Written through -rw from a node that is not the primary's; read back from each replica
    // by its own address once it has streamed the rows.
    let writer = &ground.others[0];
    let create = "create table items (id int primary key, name text)";
    let insert = "insert into items select i, 'item ' || i from generate_series(1, 2000) i";
    ground.run_on(writer, "write-rw", &psql_at("orders-rw", create)).await;
    ground.run_on(writer, "write-rw-more", &psql_at("orders-rw", insert)).await;
    let written = ground.run_on(writer, "read-rw", &psql_at("orders-rw", COUNT_AND_CHECKSUM)).await;
    assert!(written.starts_with("2000|"), "{written}");
    for (i, (_, node, ip)) in placed.iter().filter(|(role, ..)| role == "replica").enumerate() {
        let wait_for_rows = format!(
            "{}\nfor _ in $(seq 60); do [ \"$(psql --host={ip} --username=\"$DATABASE_USER\" --dbname=app -Atq -c 'select count(*) from items' 2>/dev/null)\" = 2000 ] && break; sleep 1; done\n{}",
            "export PGPASSWORD=\"$DATABASE_PASSWORD\"",
            psql_at(ip, COUNT_AND_CHECKSUM)
        );
        let read = ground.run_on(node, &format!("read-replica-{i}"), &wait_for_rows).await;
        assert_eq!(read, written, "the rows on the replica at {ip} on {node}");
    }

    // A drain evicts one instance at a time: the disruption controller counts the three
    // instances under the Database's PodDisruptionBudget and allows one disruption; a
    // replica's eviction is granted, and while the replica is away the budget allows none.
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ground.ns.name);
    let allowing = |healthy: i32, allowed: i32| {
        let budgets = budgets.clone();
        async move {
            let status = budgets.get("orders").await.ok()?.status?;
            let counted = (status.expected_pods, status.current_healthy, status.disruptions_allowed);
            (counted == (3, healthy, allowed)).then_some(())
        }
    };
    wait_until("the budget of orders to allow one disruption", common::CONVERGE, || allowing(3, 1)).await;
    let replica = "orders-instance-2";
    let selector = ListParams::default().labels(&format!("example.com/database-instance={replica}"));
    let old = pods.list(&selector).await.unwrap().items.remove(0).metadata.name.unwrap();
    evict(&pods, &old).await.unwrap();
    wait_until("the budget of orders to allow none", common::CONVERGE, || allowing(2, 0)).await;
    // The evicted replica starts again on its own data and follows the primary.
    let ip = wait_until(&format!("{replica}'s new pod to be ready"), common::CONVERGE, || async {
        let listed = pods.list(&selector).await.ok()?.items;
        let pod = listed
            .into_iter()
            .find(|p| p.metadata.name.as_deref() != Some(old.as_str()) && p.metadata.deletion_timestamp.is_none())?;
        let status = pod.status?;
        let ready = status.conditions?.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(status.pod_ip?)
    })
    .await;
    let again = ground.run_on(writer, "read-restarted", &psql_at(&ip, COUNT_AND_CHECKSUM)).await;
    assert_eq!(again, written, "the rows on {replica} after its pod was replaced");

    // A replica, through -ro, serves reads and refuses writes.
    let read_only = ground.run_on(writer, "read-ro", &psql_at("orders-ro", COUNT_AND_CHECKSUM)).await;
    assert_eq!(read_only, written, "read through orders-ro");
    let refused = format!("{} 2>&1 || echo refused", psql_at("orders-ro", "insert into items values (0, 'lost')"));
    let refused = ground.run_on(writer, "write-ro", &refused).await;
    assert!(refused.contains("read-only transaction") && refused.ends_with("refused"), "{refused}");
    eprintln!(
        "[figure] three instances on three real nodes: every instance ready {:.1} s after the test began",
        all_ready.as_secs_f64()
    );

    // A replica's node lost (killed: it loses its power): the Database names the replica's
    // pod and its node, NodeUnreachable, while the primary serves and takes a write; the node
    // back, every instance is ready again, and the replica catches up with the row written
    // meanwhile.
    let far =
        placed.iter().find(|(role, node, _)| role == "replica" && node != writer).map(|(_, node, _)| node.clone());
    let far = far.expect("a replica on the third node");
    let lost = Instant::now();
    node_action("kill", &far);
    let (_, said) = degraded_while_the_primary_serves(&databases, "NodeUnreachable").await;
    let told_lost = lost.elapsed();
    assert!(said.contains(&format!("on node {far} is not ready")), "{said}");
    let one_more = "insert into items values (2001, 'item 2001')";
    ground.run_on(writer, "write-rw-lost", &psql_at("orders-rw", one_more)).await;
    let written = ground.run_on(writer, "read-rw-lost", &psql_at("orders-rw", COUNT_AND_CHECKSUM)).await;
    assert!(written.starts_with("2001|"), "{written}");
    let returned = Instant::now();
    node_action("start", &far);
    wait_until("every instance of orders to be ready again", NOTICE + common::CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        let degraded = status.conditions.iter().any(|c| c.type_ == "Degraded" && c.status == "True");
        (!degraded && status.instances.iter().all(|i| i.ready)).then_some(())
    })
    .await;
    let back = returned.elapsed();
    // Caught up: the status says the replica lacks nothing of the primary's WAL, and its rows
    // read back from its own address are the primary's, the row written while it was away
    // included.
    let far_pod = wait_until("the far replica's pod to be ready again", common::CONVERGE, || async {
        let listed = pods.list(&ListParams::default().labels("app.kubernetes.io/instance=orders")).await.ok()?;
        listed.items.into_iter().find(|pod| {
            let on_far = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(far.as_str());
            on_far && pod.metadata.deletion_timestamp.is_none()
        })
    })
    .await;
    let (far_name, far_ip) = (far_pod.metadata.name.clone().unwrap(), far_pod.status.and_then(|s| s.pod_ip).unwrap());
    let status = wait_until("every replica of orders to have caught up", common::CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        let caught_up = status.instances.iter().all(|i| i.timeline == Some(1))
            && status.instances.iter().filter(|i| i.role == Some(Role::Replica)).all(|i| i.lag_bytes == Some(0));
        caught_up.then_some(status)
    })
    .await;
    let caught_up = returned.elapsed();
    assert_eq!(status.instances[0].lag_bytes, None, "a primary has no lag: {status:?}");
    let read = ground.run_on(writer, "read-far", &psql_at(&far_ip, COUNT_AND_CHECKSUM)).await;
    if read != written {
        let logs = pods.logs(&far_name, &Default::default()).await.unwrap_or_default();
        panic!("the rows on {far_name} at {far_ip} after its node came back: {read}, not {written}; its log:\n{logs}");
    }
    eprintln!(
        "[figure] a replica's node killed: the Database Degraded NodeUnreachable after {:.1} s; the node started: \
         every instance ready again after {:.1} s, every replica caught up (lag 0) after {:.1} s",
        told_lost.as_secs_f64(),
        back.as_secs_f64(),
        caught_up.as_secs_f64()
    );

    // A replica cut off from its primary (its node drops what it sends to port 5432
    // elsewhere) while a row is written: it stays ready (a hot standby serves reads without
    // its primary) but receives nothing, and the Database says so, Degraded
    // ReplicaNotFollowing naming it, while the primary serves; healed, it catches up.
    let far_instance = far_pod.metadata.labels.as_ref().map(|l| l["example.com/database-instance"].clone()).unwrap();
    node_command(&["partition", &far, &far_ip, "5432"]);
    let cut = Instant::now();
    let another = "insert into items values (2002, 'item 2002')";
    ground.run_on(writer, "write-rw-cut", &psql_at("orders-rw", another)).await;
    let written = ground.run_on(writer, "read-rw-cut", &psql_at("orders-rw", COUNT_AND_CHECKSUM)).await;
    assert!(written.starts_with("2002|"), "{written}");
    let (status, said) = degraded_while_the_primary_serves(&databases, "ReplicaNotFollowing").await;
    let told_cut = cut.elapsed();
    assert!(said.starts_with(&format!("replica {far_instance} is behind its primary")), "{said}");
    assert!(said.contains(&format!(" 30 s or more; its log says why (kubectl logs deployment/{far_instance})")));
    let behind = status.instances.iter().find(|i| i.name == far_instance).and_then(|i| i.lag_bytes);
    assert!(behind.is_some_and(|bytes| bytes > 0), "{status:?}");
    node_command(&["heal", &far, &far_ip, "5432"]);
    let healed = Instant::now();
    wait_until("orders to follow again", common::CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        let degraded = status.conditions.iter().any(|c| c.type_ == "Degraded" && c.status == "True");
        let caught_up =
            status.instances.iter().filter(|i| i.role == Some(Role::Replica)).all(|i| i.lag_bytes == Some(0));
        (!degraded && caught_up).then_some(())
    })
    .await;
    let followed = healed.elapsed();
    let read = ground.run_on(writer, "read-far-healed", &psql_at(&far_ip, COUNT_AND_CHECKSUM)).await;
    assert_eq!(read, written, "the rows on {far_instance} once it follows again");
    eprintln!(
        "[figure] a replica cut off from its primary: Degraded ReplicaNotFollowing {:.1} s after the cut; healed: \
         caught up and not Degraded {:.1} s later",
        told_cut.as_secs_f64(),
        followed.as_secs_f64()
    );

    // An instance the nodes cannot place: a fourth on three nodes stays Pending (every
    // instance keeps off the others' nodes). The Database says so, Degraded in the
    // scheduler's words with a Warning event, while the three serve on and lose nothing.
    let four = serde_json::json!({"spec": {"instances": 4}});
    databases.patch("orders", &PatchParams::default(), &Patch::Merge(&four)).await.unwrap();
    let raised = Instant::now();
    let status = degraded_for(&databases, "Unschedulable").await;
    let told = raised.elapsed();
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_).cloned().unwrap();
    let degraded = condition("Degraded").message;
    assert!(
        degraded.starts_with("pod orders-instance-4-") && degraded.contains("anti-affinity"),
        "the scheduler's words, naming the pod: {degraded}"
    );
    assert_eq!((status.phase, condition("Ready").status.as_str()), (Some(Phase::Degraded), "True"), "{status:?}");
    assert_eq!((status.ready_replicas, status.instances.len()), (Some(3), 4), "{status:?}");
    let events: Api<Event> = Api::namespaced(client.clone(), &ground.ns.name);
    wait_until("the Warning event of the unplaceable instance", common::CONVERGE, || async {
        let said = events.list(&Default::default()).await.ok()?.items.into_iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("orders")
                && e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("Unschedulable")
                && e.note.as_deref().is_some_and(|note| note.contains("orders-instance-4-"))
        });
        said.then_some(())
    })
    .await;
    let still = ground.run_on(writer, "read-rw-four", &psql_at("orders-rw", COUNT_AND_CHECKSUM)).await;
    assert_eq!(still, written, "the rows through orders-rw while the fourth instance cannot be placed");
    eprintln!(
        "[figure] a fourth instance on three real nodes: Degraded Unschedulable {:.1} s after spec.instances was raised",
        told.as_secs_f64()
    );

    // Only postgres replicates: the schema says so at apply.
    let mut mysql = Database::new("shop", DatabaseSpec::new(Size::Small, images::MYSQL).with_engine(EngineKind::Mysql));
    mysql.spec.instances = Some(2);
    let error = databases.create(&PostParams::default(), &mysql).await.unwrap_err().to_string();
    assert!(error.contains("spec.instances above 1 needs spec.engine postgres"), "{error}");
}

#[tokio::test]
async fn a_synchronous_primary_acknowledges_a_write_only_once_its_replica_has_it() {
    let ground = ground_with("sync", 2, |spec| {
        spec.replication =
            Some(Box::new(database_operator::api::Replication { synchronous: Some(true), ..Default::default() }));
    })
    .await;
    let client = &ground.client;
    let databases: Api<Database> = Api::namespaced(client.clone(), &ground.ns.name);
    wait_until("the replica of orders to have caught up", common::CONVERGE, || async {
        let status = databases.get("orders").await.ok()?.status?;
        let replica = status.instances.iter().find(|i| i.role == Some(Role::Replica))?;
        (replica.ready && replica.lag_bytes == Some(0)).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ground.ns.name);
    let replicas = pods.list(&ListParams::default().labels("example.com/database-instance=orders-instance-2")).await;
    let replica = replicas.unwrap().items.into_iter().find(|p| p.metadata.deletion_timestamp.is_none()).unwrap();
    let node = replica.spec.and_then(|s| s.node_name).unwrap();
    let ip = replica.status.and_then(|s| s.pod_ip).unwrap();
    let writer = &ground.others.iter().find(|n| **n != node).cloned().unwrap_or_else(|| ground.home.clone());

    let setting = ground.run_on(writer, "show-sync", &psql_at("orders-rw", "show synchronous_standby_names")).await;
    assert_eq!(setting, "ANY 1 (*)");
    let create = "create table items (id int primary key, name text)";
    ground.run_on(writer, "write-sync", &psql_at("orders-rw", create)).await;
    let insert = "insert into items select i, 'item ' || i from generate_series(1, 100) i";
    ground.run_on(writer, "write-sync-more", &psql_at("orders-rw", insert)).await;

    // The replica cut off from the primary: a commit is not acknowledged (the client gives
    // up after 15 s); healed, the replica flushes what it missed and commits are acknowledged
    // again, and every row is on the replica.
    node_command(&["partition", &node, &ip, "5432"]);
    let unacknowledged = r#"export PGPASSWORD="$DATABASE_PASSWORD"
reachable pg_isready --host=orders-rw
timeout 15 psql --host=orders-rw --username="$DATABASE_USER" --dbname=app -Atq -c "insert into items values (101, 'item 101')"
echo "exit $?""#;
    let waited = ground.run_on(writer, "write-sync-cut", unacknowledged).await;
    assert_eq!(waited, "exit 124", "a commit acknowledged while its only replica was cut off: {waited}");
    node_command(&["heal", &node, &ip, "5432"]);
    let healed = Instant::now();
    let acknowledged = psql_at("orders-rw", "insert into items values (102, 'item 102')");
    ground.run_on(writer, "write-sync-healed", &acknowledged).await;
    let again = healed.elapsed();
    let written = ground.run_on(writer, "read-sync-rw", &psql_at("orders-rw", COUNT_AND_CHECKSUM)).await;
    assert!(written.starts_with("102|"), "the row the client gave up on was committed on the primary: {written}");
    let on_replica = ground.run_on(writer, "read-sync-replica", &psql_at(&ip, COUNT_AND_CHECKSUM)).await;
    assert_eq!(on_replica, written, "every acknowledged row is on the replica");
    eprintln!(
        "[figure] synchronous replication: no commit acknowledged in 15 s while the only replica was cut off; \
         healed, a commit acknowledged {:.1} s later (the client's whole run)",
        again.as_secs_f64()
    );
}

/// A client script that inserts one row after another through `orders-rw` (ids from 2001),
/// each in its own session that gives up after 3 s, printing `id seconds-since-the-epoch` for
/// each acknowledged one, until ten have been acknowledged after a refusal, or 170 s.
const WRITE_THROUGH_A_FAILOVER: &str = r#"export PGPASSWORD="$DATABASE_PASSWORD" PGCONNECT_TIMEOUT=3
reachable pg_isready --host=orders-rw
i=2001 refused=0 after=0 end=$(( $(date +%s) + 170 ))
while [ "$(date +%s)" -lt "$end" ] && [ "$after" -lt 10 ]; do
  if timeout 5 psql --host=orders-rw --username="$DATABASE_USER" --dbname=app -v ON_ERROR_STOP=1 -Atq -c "insert into items values ($i, 'item $i')" > /dev/null 2>&1; then
    echo "$i $(date +%s.%N)"
    [ "$refused" -eq 1 ] && after=$(( after + 1 ))
    i=$(( i + 1 ))
  else
    refused=1
  fi
  sleep 0.2
done"#;

/// [`WRITE_THROUGH_A_FAILOVER`], with ids from 3001.
static WRITE_SWITCHOVER: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| WRITE_THROUGH_A_FAILOVER.replace("i=2001", "i=3001"));

/// The ids a [`WRITE_THROUGH_A_FAILOVER`] client printed, and when the first one after `gap`
/// (its writes refused for longer than that) was acknowledged, in seconds since the epoch.
fn acknowledged(log: &str, gap: f64) -> (Vec<i64>, Option<f64>) {
    let lines: Vec<(i64, f64)> = log
        .lines()
        .filter_map(|line| {
            let (id, at) = line.split_once(' ')?;
            Some((id.parse().ok()?, at.parse().ok()?))
        })
        .collect();
    let resumed = lines.windows(2).find(|w| w[1].1 - w[0].1 > gap).map(|w| w[1].1);
    (lines.iter().map(|(id, _)| *id).collect(), resumed)
}

fn epoch_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

#[tokio::test]
async fn a_primary_s_node_lost_under_writes_fails_over_to_the_replica_furthest_ahead_the_old_primary_rejoins_as_a_replica_and_a_switchover_loses_nothing()
 {
    let ground = ground_with("failover", 3, |spec| {
        let delay = database_operator::api::Replication { failover_delay_seconds: Some(10), ..Default::default() };
        spec.replication = Some(Box::new(delay));
    })
    .await;
    let client = &ground.client;
    let databases: Api<Database> = Api::namespaced(client.clone(), &ground.ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ground.ns.name);
    let caught_up = || async {
        let status = databases.get("orders").await.ok()?.status?;
        let all = status.instances.len() == 3 && status.instances.iter().all(|i| i.ready);
        let replicas = status.instances.iter().filter(|i| i.role == Some(Role::Replica));
        (all && replicas.clone().count() == 2 && replicas.clone().all(|i| i.lag_bytes == Some(0))).then_some(status)
    };
    wait_until("every replica of orders to have caught up", common::CONVERGE, caught_up).await;
    let writer = ground.others[0].clone();
    ground.run_on(&writer, "write-before", PG_WRITE).await;
    let before = ground.run_on(&writer, "read-before", &psql_at("orders-rw", COUNT_AND_CHECKSUM)).await;
    assert!(before.starts_with("1000|"), "{before}");

    // The primary's node killed while a client writes through -rw, one row at a time.
    let (log, killed_at) = tokio::join!(ground.run_on(&writer, "write-through", WRITE_THROUGH_A_FAILOVER), async {
        tokio::time::sleep(Duration::from_secs(12)).await;
        let at = epoch_now();
        node_action("kill", &ground.home);
        at
    });
    let (ids, resumed) = acknowledged(&log, 3.0);
    let resumed = resumed.unwrap_or_else(|| panic!("the writes never resumed after a refusal: {log}"));
    let failover = resumed - killed_at;
    let status = databases.get("orders").await.unwrap().status.unwrap();
    let promoted = status.current_primary.clone().unwrap();
    assert_ne!(promoted, "orders", "{status:?}");
    let promoted_status = status.instances.iter().find(|i| i.name == promoted).unwrap();
    assert_eq!((promoted_status.role, promoted_status.timeline), (Some(Role::Primary), Some(2)), "{status:?}");
    let events = Api::<Event>::namespaced(client.clone(), &ground.ns.name).list(&ListParams::default()).await.unwrap();
    let failovers: Vec<_> = events.items.iter().filter(|e| e.reason.as_deref() == Some("FailingOver")).collect();
    assert_eq!(failovers.len(), 1, "one failover: {failovers:?}");
    let said = failovers[0].note.clone().unwrap_or_default();
    assert!(said.contains(&format!("promoting replica {promoted}")) && said.contains("bytes of WAL behind"), "{said}");

    // Every row written before is on the new primary; of the rows acknowledged during the
    // run, those missing are what the asynchronous failover lost.
    let first = "select count(*), md5(string_agg(name, ',' order by id)) from items where id <= 1000";
    assert_eq!(ground.run_on(&writer, "read-first", &psql_at("orders-rw", first)).await, before);
    let stored =
        ground.run_on(&writer, "read-ids", &psql_at("orders-rw", "select id from items where id > 2000")).await;
    let stored: Vec<i64> = stored.lines().filter_map(|l| l.parse().ok()).collect();
    let lost: Vec<i64> = ids.iter().copied().filter(|id| !stored.contains(id)).collect();
    assert!(ids.len() >= 10, "ten rows are acknowledged after the failover: {log}");

    // The old primary's node back: it rejoins as a replica (copied afresh), has every row, and
    // refuses a write; one pod is the primary, now and all along.
    node_action("start", &ground.home);
    let back = Instant::now();
    let status = wait_until("orders to rejoin as a replica and catch up", common::CONVERGE, || async {
        let primaries = pods.list(&ListParams::default().labels("example.com/role=primary")).await.ok()?;
        let serving = primaries.items.iter().filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
            conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
        });
        assert!(serving.count() <= 1, "two primaries serve: {:?}", primaries.items);
        let status = caught_up().await?;
        let old = status.instances.iter().find(|i| i.name == "orders")?;
        (old.role == Some(Role::Replica)).then_some(status)
    })
    .await;
    let rejoined = back.elapsed();
    assert_eq!(status.current_primary.as_deref(), Some(promoted.as_str()));
    let old = pods.list(&ListParams::default().labels("example.com/database-instance=orders")).await.unwrap();
    let old = old.items.into_iter().find(|p| p.metadata.deletion_timestamp.is_none()).unwrap();
    let old_ip = old.status.and_then(|s| s.pod_ip).unwrap();
    let on_rw = ground.run_on(&writer, "read-rw", &psql_at("orders-rw", COUNT_AND_CHECKSUM)).await;
    assert_eq!(ground.run_on(&writer, "read-old", &psql_at(&old_ip, COUNT_AND_CHECKSUM)).await, on_rw);
    let refused = format!("{}; echo \"exit $?\"", psql_at(&old_ip, "insert into items values (9999, 'split brain')"));
    let refused = ground.run_on(&writer, "write-old", &refused).await;
    assert!(refused.contains("read-only transaction") && refused.ends_with("exit 1"), "{refused}");

    // A switchover back to orders under writes: the old primary shuts down first, so no
    // acknowledged row is lost, asynchronous as it is.
    let plugin = env!("CARGO_BIN_EXE_kubectl-database");
    let (log, switched_at) = tokio::join!(ground.run_on(&writer, "write-switch", &WRITE_SWITCHOVER), async {
        tokio::time::sleep(Duration::from_secs(12)).await;
        let at = epoch_now();
        let output = tokio::process::Command::new(plugin)
            .args(["switchover", "orders", "--to", "orders", "--wait", "-n", &ground.ns.name])
            .output()
            .await
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success() && said.contains("orders is the primary"), "{said}");
        at
    });
    let (ids, resumed) = acknowledged(&log, 3.0);
    let switchover = resumed.unwrap_or_else(|| panic!("the writes never resumed after a refusal: {log}")) - switched_at;
    let stored =
        ground.run_on(&writer, "read-switch", &psql_at("orders-rw", "select id from items where id > 3000")).await;
    let stored: Vec<i64> = stored.lines().filter_map(|l| l.parse().ok()).collect();
    let missing: Vec<i64> = ids.iter().copied().filter(|id| !stored.contains(id)).collect();
    assert_eq!(missing, Vec::<i64>::new(), "rows acknowledged before the switchover are on the new primary");
    let status = databases.get("orders").await.unwrap().status.unwrap();
    let orders = status.instances.iter().find(|i| i.name == "orders").unwrap();
    assert_eq!((status.current_primary.as_deref(), orders.timeline), (Some("orders"), Some(3)), "{status:?}");
    eprintln!(
        "[figure] switchover to orders under writes: -rw acknowledging writes again {switchover:.1} s after the \
         command; 0 of {} acknowledged rows lost",
        ids.len()
    );
    eprintln!(
        "[figure] failover: primary's node killed -> -rw acknowledging writes again in {failover:.1} s \
         (failoverDelaySeconds 10); {} of {} rows acknowledged around the kill lost (asynchronous); old primary \
         rejoined as a replica and caught up {:.1} s after its node's start",
        lost.len(),
        ids.len(),
        rejoined.as_secs_f64()
    );
}
