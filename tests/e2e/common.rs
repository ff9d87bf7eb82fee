//! Helpers shared by the end-to-end tests: a client for the running control plane, a fresh
//! namespace per test, the CRD, and waiting on a condition with a deadline.

use std::future::Future;
use std::time::Duration;

use database_operator::api::{Database, Phase};
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use kube_core::ObjectMeta;
use tokio_util::sync::CancellationToken;

const NO_PLANE: &str = "no control plane: KUBECONFIG is not set. Start one with \
`hack/control-plane.sh up` and `eval $(hack/control-plane.sh env)`, or run the whole suite with `hack/test.sh`";

/// Set to 1 to let the end-to-end tests run against an apiserver that is not on loopback.
pub(crate) const ALLOW_REMOTE: &str = "E2E_ALLOW_REMOTE_CLUSTER";

/// A client for the plane named by `KUBECONFIG`. Panics with instructions when there is none
/// (an end-to-end test never skips silently), and when its apiserver is not on loopback unless
/// [`ALLOW_REMOTE`] is 1: the tests create and delete cluster-wide objects, and a bare
/// `cargo test` with a user's KUBECONFIG must never touch a real cluster.
pub(crate) async fn client() -> Client {
    if std::env::var_os("KUBECONFIG").is_none() {
        panic!("{NO_PLANE}");
    }
    let config = kube_client::Config::infer()
        .await
        .unwrap_or_else(|err| panic!("cannot load the kubeconfig in KUBECONFIG ({err}); {NO_PLANE}"));
    let host = config.cluster_url.host().unwrap_or_default().trim_matches(['[', ']']).to_string();
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback && std::env::var(ALLOW_REMOTE).as_deref() != Ok("1") {
        panic!(
            "refusing to run end-to-end tests against {}: not a loopback address. These tests create and \
             delete cluster-wide objects; point KUBECONFIG at a throwaway plane ({NO_PLANE}), or set \
             {ALLOW_REMOTE}=1 if this cluster is one",
            config.cluster_url
        );
    }
    Client::try_from(config).unwrap_or_else(|err| panic!("cannot build a client for KUBECONFIG ({err}); {NO_PLANE}"))
}

/// Polls `check` every 200 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub(crate) async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Where a test namespace's pods go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nodes {
    /// The kwok nodes: pods are scheduled and reported Running and Ready, and never run.
    Kwok,
    /// The real node: pods run (containerd and a kubelet), their probes decide Ready. The
    /// test holds this many of the node's places for a small Database ([`REAL_NODE_PLACES`])
    /// while its namespace lives: as many as it runs database pods at once.
    Real(u32),
}

/// How many small Databases (250m CPU requested) the real node runs at once: its two CPUs.
/// Tests on the real node take places before they start and wait for them, so that the
/// suite's tests, which run in parallel, never leave a database pod Pending for CPU past
/// their patience.
pub(crate) const REAL_NODE_PLACES: u32 = 8;

static PLACES_LEFT: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(REAL_NODE_PLACES as usize);

/// The engines' images the real node has. No registry is reachable here, so
/// hack/engine-images.sh builds them from Debian's packages under the official images' names
/// (the mysql engine gets a MySQL-protocol image, MariaDB underneath) and hack/test.sh imports
/// them into the node's containerd.
pub(crate) mod images {
    /// postgres 17 (Debian trixie's).
    pub(crate) const POSTGRES: &str = "postgres:17";
    /// The same postgres 17 build under its Debian suite's tag, as the official images tag
    /// theirs: another image, for a rollout whose server reads the same data directory.
    pub(crate) const POSTGRES_TRIXIE: &str = "postgres:17-trixie";
    /// postgres 15 (Debian bookworm's): the older of the two majors.
    pub(crate) const POSTGRES_15: &str = "postgres:15";
    /// MariaDB 11.8.
    pub(crate) const MARIADB: &str = "mariadb:11.8";
    /// The mysql engine's image here: MariaDB 11.8 answering the MySQL protocol and the
    /// official mysql image's environment.
    pub(crate) const MYSQL: &str = "localhost/mysql-protocol:11.8";
    /// redis 8.0.
    pub(crate) const REDIS: &str = "redis:8.0";
    /// An image no node has and no registry here serves: its pods never start.
    pub(crate) const MISSING: &str = "postgres:17-not-built-here";
}

/// Long enough for a real database's first start, a dump or a client pod on a busy two-core
/// machine.
pub(crate) const CONVERGE: Duration = Duration::from_secs(180);

/// Waits up to a minute for `$1` (a command) to succeed: a client's first connection after the
/// server came back may find the Service's endpoints not yet updated, as a real client would.
const REACHABLE: &str =
    r#"reachable() { for _ in $(seq 60); do "$@" > /dev/null 2>&1 && return; sleep 1; done; "$@"; }"#;

/// A client script with [`REACHABLE`] defined.
pub(crate) fn reaching(script: &str) -> String {
    format!("{REACHABLE}\n{script}")
}

/// A thousand rows `(i, 'item i')` written by a SQL client, and what reads them back: the
/// count and a checksum of every name in order.
pub(crate) const PG_READ: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c "select count(*), md5(string_agg(name, ',' order by id)) from items""#;
pub(crate) const PG_WRITE: &str = r#"reachable pg_isready --host="$DATABASE_HOST"
psql "$DATABASE_URI" -v ON_ERROR_STOP=1 -Atq -c 'create table items (id int primary key, name text)' -c "insert into items select i, 'item ' || i from generate_series(1, 1000) i""#;

/// Waits until Database `name` is Ready and returns it.
pub(crate) async fn ready(databases: &Api<Database>, name: &str) -> Database {
    wait_until(&format!("Database {name} to be Ready"), CONVERGE, || async {
        let db = databases.get(name).await.ok()?;
        (db.status.as_ref()?.phase == Some(Phase::Ready)).then_some(db)
    })
    .await
}

/// Runs `sql` in the postgres of Database `database` in `namespace`, inside its container
/// (`kubectl exec`, psql on the server's local socket as the application user) and returns
/// what psql printed, unaligned and without headers (`count|checksum`). Panics with psql's
/// words when it fails.
pub(crate) fn psql(namespace: &str, database: &str, sql: &str) -> String {
    psql_as(namespace, database, "app", sql)
        .unwrap_or_else(|error| panic!("psql in {namespace}/{database}: {sql}: {error}"))
}

/// [`psql`] as `user` (the superuser `postgres` logs in through the socket too); psql's words
/// when it fails (also while the server cannot answer).
pub(crate) fn psql_as(namespace: &str, database: &str, user: &str, sql: &str) -> Result<String, String> {
    let output = std::process::Command::new("kubectl")
        .args(["exec", "-n", namespace, &format!("deployment/{database}"), "-c", "database", "--"])
        .args(["psql", &format!("--username={user}"), "--dbname=app", "--no-align", "--tuples-only"])
        .args(["--set=ON_ERROR_STOP=1", "--command", sql])
        .output()
        .expect("kubectl runs");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Runs `script` (`sh -c`) in a pod of `image` in `ns`, with Secret `secret`'s keys in its
/// environment (DATABASE_URI, DATABASE_HOST, DATABASE_USER, DATABASE_PASSWORD), and returns
/// its log once it succeeded; panics with the log when it failed.
pub(crate) async fn client_pod(
    client: &Client,
    ns: &str,
    name: &str,
    image: &str,
    secret: &str,
    script: &str,
) -> String {
    client_pod_on(client, ns, None, name, image, secret, script).await
}

/// [`client_pod`] on node `node` (its `kubernetes.io/hostname`), or where the scheduler puts
/// it.
pub(crate) async fn client_pod_on(
    client: &Client,
    ns: &str,
    node: Option<&str>,
    name: &str,
    image: &str,
    secret: &str,
    script: &str,
) -> String {
    let env: Vec<_> = [("DATABASE_URI", "uri"), ("DATABASE_HOST", "host"), ("DATABASE_USER", "username")]
        .into_iter()
        .chain([("DATABASE_PASSWORD", "password")])
        .map(|(var, key)| serde_json::json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}))
        // The MySQL family's root password, to show where root cannot log in from.
        .chain([serde_json::json!({"name": "DATABASE_ROOT_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": secret, "key": "root-password", "optional": true}}})])
        .collect();
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": node.map(|node| serde_json::json!({"kubernetes.io/hostname": node})),
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 999, "runAsGroup": 999,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "client", "image": image, "command": ["sh", "-c", script], "env": env,
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
            }],
        },
    }))
    .unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    let (phase, status) = loop {
        let status = pods.get(name).await.ok().and_then(|p| p.status).unwrap_or_default();
        let phase = status.phase.clone().unwrap_or_default();
        if ["Succeeded", "Failed"].contains(&phase.as_str()) || tokio::time::Instant::now() >= deadline {
            break (phase, status);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let log = pods.logs(name, &kube_client::api::LogParams::default()).await.unwrap_or_default();
    // A pod that failed without a word in its log (refused by the kubelet, its container never
    // made) says why in its status.
    let why = (status.reason, status.message, status.container_statuses.map(|c| c.into_iter().map(|c| c.state)));
    let why = format!("{:?}", (why.0, why.1, why.2.map(|s| s.collect::<Vec<_>>())));
    assert_eq!(phase, "Succeeded", "client pod {name} (phase {phase:?}, {why}): {log}");
    log.trim().to_string()
}

/// A ValidatingAdmissionPolicy of the test's own and its binding, deleted when dropped.
pub(crate) struct AdmissionPolicy {
    name: String,
}

/// The username the shipped `manifests/policy/operator_limits.yaml` limits.
const SHIPPED_OPERATOR: &str = "system:serviceaccount:database-operator-system:database-operator";

impl AdmissionPolicy {
    /// One bound to `namespace` that refuses the objects of the resource `rule` (a
    /// `resourceRules` entry) for which `expression` is false, with `message` (422): what a
    /// cluster's policy refuses although the CRD schema allowed it. Waits until the apiserver
    /// enforces it (policies take effect asynchronously): until a server-side dry run of
    /// `probe`, an object the policy refuses, is refused with `message`.
    pub(crate) async fn create(
        namespace: &str,
        rule: serde_json::Value,
        expression: &str,
        message: &str,
        probe: serde_json::Value,
    ) -> Self {
        let name = format!("e2e-{namespace}");
        let policy = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": expression, "message": message}]
            }
        });
        let binding = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}}
        });
        apply_stdin(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [policy, binding]}).to_string());
        let probe = format!("echo '{probe}' | kubectl create --dry-run=server -n {namespace} -f -");
        Self::enforced(name, &probe, message).await
    }

    /// The operator's limits (`manifests/policy/operator_limits.yaml`), made for the
    /// ServiceAccount `account` of `namespace` instead of the installed operator's, under a
    /// name of the test's own. Waits until the apiserver enforces it: until a server-side dry
    /// run, as `account`, of an unlabelled Secret is refused (so the account must be allowed to
    /// create Secrets in `namespace`).
    pub(crate) async fn operator_limits(namespace: &str, account: &str) -> Self {
        let shipped = include_str!("../../manifests/policy/operator_limits.yaml");
        let user = format!("system:serviceaccount:{namespace}:{account}");
        let name = format!("database-operator-limits-{namespace}");
        assert_eq!(shipped.matches(SHIPPED_OPERATOR).count(), 1, "the policy names the operator's account once");
        apply_stdin(&shipped.replace(SHIPPED_OPERATOR, &user).replace("database-operator-limits", &name));
        let probe = format!(
            "kubectl create secret generic probe --from-literal=a=b --dry-run=server -n {namespace} --as {user}"
        );
        let refusal = format!("ValidatingAdmissionPolicy '{name}'");
        Self::enforced(name, &probe, &refusal).await
    }

    /// Waits until the shell command `probe` says `refusal`; the policy `name`, then.
    async fn enforced(name: String, probe: &str, refusal: &str) -> Self {
        wait_until(&format!("the admission policy {name} to be enforced"), Duration::from_secs(120), || async {
            let refused = std::process::Command::new("sh").args(["-c", &format!("{probe} 2>&1")]).output().ok()?;
            String::from_utf8_lossy(&refused.stdout).contains(refusal).then_some(())
        })
        .await;
        Self { name }
    }
}

impl Drop for AdmissionPolicy {
    fn drop(&mut self) {
        delete_when_dropped(&[
            &format!("validatingadmissionpolicybinding/{}", self.name),
            &format!("validatingadmissionpolicy/{}", self.name),
        ]);
    }
}

/// `kubectl apply --server-side -f -` of `objects` (YAML or JSON documents).
fn apply_stdin(objects: &str) {
    use std::io::Write;
    let mut apply = std::process::Command::new("kubectl")
        .args(["apply", "--server-side", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    apply.stdin.take().unwrap().write_all(objects.as_bytes()).unwrap();
    assert!(apply.wait().unwrap().success(), "kubectl apply:\n{objects}");
}

/// A namespace of the test's own, so tests run in parallel; deleted when dropped.
pub(crate) struct TestNamespace {
    /// The namespace's name.
    pub(crate) name: String,
    /// Its places on the real node, given back when it is dropped.
    _places: Option<tokio::sync::SemaphorePermit<'static>>,
}

/// The name of the plane's real node (hack/control-plane/node.sh).
pub(crate) const REAL_NODE: &str = "real-node";

/// The annotation of the apiserver's PodNodeSelector admission: the node selector every pod
/// of the namespace gets. On the test command's plane (`NODES=kwok,real`) pods go to the real
/// node unless their namespace selects the kwok nodes with it.
const NODE_SELECTOR: &str = "scheduler.alpha.kubernetes.io/node-selector";

impl TestNamespace {
    /// Creates `e2e-<prefix>-<random>`, whose pods go to the kwok nodes (scheduled and
    /// reported Ready, never run), and waits for its `default` ServiceAccount, without which
    /// no pod can be created in it.
    pub(crate) async fn create(client: &Client, prefix: &str) -> Self {
        Self::create_on(client, prefix, "type=kwok").await
    }

    /// Like [`TestNamespace::create`], but its pods run for real, on the plane's real node:
    /// for a test whose meaning depends on a container running (an engine, a backup, a
    /// restore, an upgrade, a probe). Panics with instructions when the plane has no real
    /// node Ready.
    pub(crate) async fn create_on_real_node(client: &Client, prefix: &str) -> Self {
        let node = Api::<Node>::all(client.clone()).get_opt(REAL_NODE).await.expect("get the real node");
        let ready = node
            .and_then(|node| node.status?.conditions)
            .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        assert!(
            ready,
            "this test runs pods for real and the plane has no real node Ready ({REAL_NODE}): start the plane \
             with `NODES=kwok,real hack/control-plane.sh up` (hack/test.sh does)"
        );
        Self::create_on(client, prefix, "type=real").await
    }

    async fn create_on(client: &Client, prefix: &str, node_selector: &str) -> Self {
        let name = format!("e2e-{prefix}-{:08x}", rand::random::<u32>());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                annotations: Some([(NODE_SELECTOR.to_string(), node_selector.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces.create(&PostParams::default(), &namespace).await.expect("create the test namespace");
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        wait_until("the namespace's default ServiceAccount", Duration::from_secs(30), || async {
            accounts.get_opt("default").await.ok().flatten()
        })
        .await;
        Self { name, _places: None }
    }
}

impl TestNamespace {
    /// A namespace like [`TestNamespace::create`]'s (or, on the real node,
    /// [`TestNamespace::create_on_real_node`]'s) that enforces, warns and audits the
    /// "restricted" Pod Security level.
    pub(crate) async fn create_restricted(client: &Client, prefix: &str, nodes: Nodes) -> Self {
        let ns = match nodes {
            Nodes::Kwok => Self::create(client, prefix).await,
            Nodes::Real(places) => {
                assert!(places <= REAL_NODE_PLACES, "the real node has {REAL_NODE_PLACES} places");
                let places = PLACES_LEFT.acquire_many(places).await.expect("the semaphore is never closed");
                let mut ns = Self::create_on_real_node(client, prefix).await;
                ns._places = Some(places);
                ns
            }
        };
        let restricted = serde_json::json!({"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
        }}});
        Api::<Namespace>::all(client.clone())
            .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&restricted))
            .await
            .expect("label the namespace restricted");
        ns
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // The namespace controller removes what is inside, without the test waiting for it.
        delete_when_dropped(&[&format!("namespace/{}", self.name)]);
    }
}

/// Deletes `objects` (`kind/name`, cluster-scoped or fully named) from a `Drop`: with kubectl,
/// synchronously. A task spawned on the test's runtime would never run, since the runtime
/// ends with the test, and the objects would pile up on the plane (a plane's kwok nodes hold
/// 330 pods: leftovers of earlier runs leave new pods pending).
pub(crate) fn delete_when_dropped(objects: &[&str]) {
    let _ = std::process::Command::new("kubectl")
        .arg("delete")
        .args(objects)
        .args(["--ignore-not-found", "--wait=false"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Applies the CRDs (Database, DatabaseBackup; server-side) and waits until the apiserver
/// serves them.
pub(crate) async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [database_operator::api::crd(), database_operator::api::backup_crd()] {
        let name = crd.metadata.name.clone().expect("a CRD has a name");
        crds.patch(&name, &PatchParams::apply("e2e-tests").force(), &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|err| panic!("apply the CRD {name}: {err}"));
        wait_until(&format!("the CRD {name} to be Established"), Duration::from_secs(30), || async {
            let crd = crds.get(&name).await.ok()?;
            let established = crd.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(())
        })
        .await;
    }
}

/// A GET over a plain TCP connection: status code and body.
pub(crate) async fn http_get(address: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default();
    Some((status, body))
}

/// A free address on loopback for a server the test starts later, from hack/free-port.py: below
/// the kernel's ephemeral range (a port from `bind(0)` can be taken by any outgoing connection
/// before the server binds it) and reserved against the other pickers running at once.
pub(crate) fn free_address() -> std::net::SocketAddr {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/free-port.py");
    let output = std::process::Command::new(script).output().expect("running hack/free-port.py");
    assert!(output.status.success(), "hack/free-port.py: {}", String::from_utf8_lossy(&output.stderr));
    let port: u16 = String::from_utf8_lossy(&output.stdout).trim().parse().expect("a port from hack/free-port.py");
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

/// A GET over HTTPS, skipping certificate verification (the operator's metrics certificate is
/// self-signed), with `token` as a bearer token: status code and body. Uses curl; the token
/// goes through its standard input, never its command line.
pub(crate) async fn https_get(address: std::net::SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    use tokio::io::AsyncWriteExt;
    let mut curl = tokio::process::Command::new("curl")
        .args(["--silent", "--show-error", "--insecure", "--max-time", "20", "--header", "@-"])
        .args(["--write-out", "\n%{http_code}"])
        .arg(format!("https://{address}{path}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run curl");
    let mut stdin = curl.stdin.take().unwrap();
    if let Some(token) = token {
        stdin.write_all(format!("Authorization: Bearer {token}\n").as_bytes()).await.unwrap();
    }
    drop(stdin);
    let output = curl.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    let code = code
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("curl https://{address}{path}: {}", String::from_utf8_lossy(&output.stderr)));
    (code, body.to_string())
}

/// An operator in this process for one namespace (2 workers), stopped when dropped.
pub(crate) struct Operator(CancellationToken);

impl Operator {
    pub(crate) fn start(client: &Client, namespace: &str) -> Self {
        let cancel = CancellationToken::new();
        let mut options = database_operator::operator::Options::new(Some(namespace.to_string()), 2);
        // The operator's image (hack/test.sh's IMAGE, in the real node's containerd) uploads
        // dumps to buckets.
        options.backup_image = std::env::var("IMAGE").ok();
        tokio::spawn(database_operator::operator::run(client.clone(), options, cancel.clone()));
        Self(cancel)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.0.cancel();
    }
}
