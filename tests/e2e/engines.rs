//! Databases with an engine on the real plane, in namespaces that enforce the "restricted" Pod
//! Security level: the credentials Secret, the bound claim, the Deployment (port, env from the
//! Secret, probes, security context, Recreate) and the Service; storage that grows and never
//! shrinks, a retained claim taken back by a new Database (and never restored into), a Secret of one's own, and what the
//! CRD refuses. Where the meaning depends on the database running (each engine Ready, storage,
//! a Secret of one's own, no password in any log), the pods run on the plane's real node with
//! the engines' images of hack/engine-images.sh, and Ready is the engine's own probe; the rest
//! run on kwok.

use std::collections::BTreeMap;
use std::time::Duration;

use database_operator::api::{BackupPhase, Credentials, Database, DatabaseBackup, DatabaseSpec, EngineKind, Phase};
use database_operator::api::{ReclaimPolicy, RestoreFrom, Size, Storage};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use kube_client::Client;
use kube_client::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_core::{ApiResource, DynamicObject, ObjectMeta};
use serde_json::json;

use crate::common::{Nodes, Operator, TestNamespace, client, client_pod, images, install_crd, psql, wait_until};

/// Long enough for a real database's first start (initialising its data directory) on a busy
/// two-core machine.
const CONVERGE: Duration = Duration::from_secs(180);

struct Fixture {
    client: Client,
    ns: TestNamespace,
    databases: Api<Database>,
    _operator: Operator,
}

async fn fixture(prefix: &str, nodes: Nodes) -> Fixture {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, prefix, nodes).await;
    Fixture {
        databases: Api::namespaced(client.clone(), &ns.name),
        _operator: Operator::start(&client, &ns.name),
        client,
        ns,
    }
}

impl Fixture {
    fn api<K>(&self) -> Api<K>
    where
        K: kube_core::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.ns.name)
    }

    async fn ready(&self, name: &str) -> Database {
        wait_until(&format!("Database {name} to be Ready"), CONVERGE, || async {
            let db = self.databases.get(name).await.ok()?;
            (db.status.as_ref()?.phase == Some(Phase::Ready)).then_some(db)
        })
        .await
    }

    async fn bound_claim(&self, name: &str) -> PersistentVolumeClaim {
        let claims: Api<PersistentVolumeClaim> = self.api();
        wait_until(&format!("claim {name} to be Bound"), CONVERGE, || async {
            let claim = claims.get(name).await.ok()?;
            (claim.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(claim)
        })
        .await
    }
}

fn engine_database(name: &str, engine: EngineKind, image: &str) -> Database {
    Database::new(name, DatabaseSpec::new(Size::Small, image).with_engine(engine))
}

/// The literal values of a Secret's data.
fn decoded(secret: &Secret) -> BTreeMap<String, String> {
    secret.data.iter().flatten().map(|(k, v)| (k.clone(), String::from_utf8(v.0.clone()).unwrap())).collect()
}

#[tokio::test]
async fn each_engine_gets_its_secret_claim_port_probes_and_a_restricted_pod_and_becomes_ready() {
    let f = fixture("engines", Nodes::Real(4)).await;
    let engines = [
        (
            EngineKind::Postgres,
            images::POSTGRES,
            "postgres",
            5432,
            "/var/lib/postgresql/data",
            "pg_isready",
            "postgresql://",
        ),
        (EngineKind::Mysql, images::MYSQL, "mysql", 3306, "/var/lib/mysql", "mysqladmin", "mysql://"),
        (EngineKind::Mariadb, images::MARIADB, "mariadb", 3306, "/var/lib/mysql", "healthcheck.sh", "mariadb://"),
        (EngineKind::Redis, images::REDIS, "redis", 6379, "/data", "sh", "redis://"),
    ];
    for (engine, image, name, ..) in engines {
        f.databases.create(&PostParams::default(), &engine_database(name, engine, image)).await.unwrap();
    }
    for (_, image, name, port, data_dir, probe, scheme) in engines {
        let db = f.ready(name).await;
        let status = db.status.unwrap();
        let host = format!("{name}.{}.svc", f.ns.name);
        assert_eq!(status.secret_name.as_deref(), Some(format!("{name}-credentials").as_str()));
        assert_eq!(status.endpoint, Some(format!("{host}:{port}")));

        let secret = f.api::<Secret>().get(&format!("{name}-credentials")).await.unwrap();
        let data = decoded(&secret);
        let password = &data["password"];
        assert_eq!(password.len(), 32, "{name}");
        assert_eq!(data["host"], host);
        assert_eq!(data["port"], port.to_string());
        assert!(data["uri"].starts_with(scheme) && data["uri"].contains(password.as_str()), "{name}");
        assert_eq!(secret.metadata.owner_references.unwrap()[0].name, name, "owned by its Database");

        let claim = f.bound_claim(&format!("{name}-data")).await;
        assert_eq!(claim.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0, "1Gi");
        assert_eq!(claim.metadata.owner_references.unwrap()[0].name, name);

        let deployment = f.api::<Deployment>().get(name).await.unwrap();
        let spec = deployment.spec.unwrap();
        assert_eq!(spec.strategy.unwrap().type_.as_deref(), Some("Recreate"), "{name}");
        let pod = spec.template.spec.unwrap();
        let context = pod.security_context.unwrap();
        assert_eq!(
            (context.run_as_user, context.fs_group, context.run_as_non_root),
            (Some(999), Some(999), Some(true))
        );
        let container = &pod.containers[0];
        assert_eq!((container.name.as_str(), container.image.as_deref()), ("database", Some(image)));
        let container_port = &container.ports.as_ref().unwrap()[0];
        assert_eq!((container_port.name.as_deref(), container_port.container_port), (Some(name), port));
        assert_eq!(container.volume_mounts.as_ref().unwrap()[0].mount_path, data_dir);
        let probe_command = container.readiness_probe.as_ref().unwrap().exec.as_ref().unwrap().command.clone().unwrap();
        assert_eq!(probe_command[0], probe, "{name}");
        assert!(container.liveness_probe.is_some());
        let secret_refs: Vec<&str> = container
            .env
            .iter()
            .flatten()
            .filter_map(|e| Some(e.value_from.as_ref()?.secret_key_ref.as_ref()?.name.as_str()))
            .collect();
        assert!(!secret_refs.is_empty() && secret_refs.iter().all(|s| *s == format!("{name}-credentials")), "{name}");
        assert!(container.env.iter().flatten().all(|e| e.value.as_deref() != Some(password.as_str())));

        let service = f.api::<Service>().get(name).await.unwrap().spec.unwrap().ports.unwrap().remove(0);
        assert_eq!((service.name.as_deref(), service.port), (Some(name), port));
    }
}

#[tokio::test]
async fn storage_grows_never_shrinks_and_a_retained_claim_is_taken_back_by_a_new_database() {
    let f = fixture("storage", Nodes::Real(1)).await;
    let mut db = engine_database("orders", EngineKind::Postgres, images::POSTGRES);
    db.spec.storage = Some(Box::new(Storage { reclaim_policy: Some(ReclaimPolicy::Retain), ..Default::default() }));
    f.databases.create(&PostParams::default(), &db).await.unwrap();
    f.ready("orders").await;
    let claim = f.bound_claim("orders-data").await;
    assert_eq!(claim.metadata.owner_references.unwrap_or_default(), [], "a retained claim has no owner");

    // Growing: the claim follows.
    let grow = json!({"spec": {"storage": {"size": "3Gi"}}});
    f.databases.patch("orders", &PatchParams::default(), &Patch::Merge(&grow)).await.unwrap();
    let claims: Api<PersistentVolumeClaim> = f.api();
    wait_until("the claim to request 3Gi", CONVERGE, || async {
        let claim = claims.get("orders-data").await.ok()?;
        (claim.spec?.resources?.requests?["storage"].0 == "3Gi").then_some(())
    })
    .await;
    // ... and the volume grows (the plane's provisioner resizes as a storage driver would).
    wait_until("the claim's capacity to be 3Gi", CONVERGE, || async {
        let claim = claims.get("orders-data").await.ok()?;
        (claim.status?.capacity?["storage"].0 == "3Gi").then_some(())
    })
    .await;
    // Shrinking: refused at admission, naming the rule.
    let shrink = json!({"spec": {"storage": {"size": "2Gi"}}});
    let err = f.databases.patch("orders", &PatchParams::default(), &Patch::Merge(&shrink)).await.unwrap_err();
    assert!(err.to_string().contains("spec.storage.size cannot shrink"), "{err}");

    // Rows the server keeps on the claim, read over the network with the Secret's password.
    let secrets: Api<Secret> = f.api();
    let secret = secrets.get("orders-credentials").await.unwrap();
    assert_eq!(secret.metadata.owner_references.unwrap_or_default(), [], "a retained Database's Secret has no owner");
    psql(&f.ns.name, "orders", "create table items (id int primary key, name text)");
    psql(&f.ns.name, "orders", "insert into items select i, 'item ' || i from generate_series(1, 100) i");
    // Waits for the Service to route (a new Service's rules may lag its endpoints), then reads.
    let read = &crate::data::reaching(crate::data::PG_READ);
    let written = client_pod(&f.client, &f.ns.name, "read", images::POSTGRES, "orders-credentials", read).await;
    assert!(written.starts_with("100|"), "{written}");

    // A backup of it, for the restore below.
    let backups: Api<DatabaseBackup> = f.api();
    backups.create(&PostParams::default(), &database_operator::api::backup("orders-1", "orders")).await.unwrap();
    let done = crate::backups::finished(&backups, "orders-1").await.status.unwrap();
    assert_eq!(done.phase, Some(BackupPhase::Completed), "{:?}", done.message);

    // Deleted, the Database leaves its retained claim and Secret.
    // Gone with its Deployment: the garbage collector deletes the Deployment after the
    // Database, and a new Database of the name created before that finds a Deployment that is
    // not its own (ResourceExists, until the collector catches up): a race of this test's, not
    // what it is about.
    let gone = || async {
        f.databases.delete("orders", &DeleteParams::default()).await.unwrap();
        wait_until("the Database and its Deployment to be gone", CONVERGE, || async {
            let database = f.databases.get_opt("orders").await.ok()?;
            let deployment = f.api::<Deployment>().get_opt("orders").await.ok()?;
            (database.is_none() && deployment.is_none()).then_some(())
        })
        .await;
    };
    gone().await;
    let kept = claims.get("orders-data").await.expect("the retained claim outlives its Database");

    // A new Database of the name restored from a backup would load into the old data (the
    // server finds a database and skips the load): refused, before it writes anything.
    let mut restoring = db.clone();
    restoring.spec.restore_from = Some(Box::new(RestoreFrom { backup: "orders-1".into(), bucket: None }));
    f.databases.create(&PostParams::default(), &restoring).await.unwrap();
    let refused = wait_until("the restore onto the retained claim to be refused", CONVERGE, || async {
        let status = f.databases.get("orders").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    })
    .await;
    assert_eq!(refused.reason, "RestoreTargetNotEmpty", "{}", refused.message);
    assert!(refused.message.contains("orders-data"), "{}", refused.message);
    assert!(f.api::<Deployment>().get_opt("orders").await.unwrap().is_none(), "no server started on the claim");
    let status = f.databases.get("orders").await.unwrap().status.unwrap();
    assert_eq!(status.restored_from, None, "never recorded as restored");
    gone().await;

    // A new one of the same name without a restore takes them back, and its clients log in
    // to the old data with the Secret they find.
    f.databases.create(&PostParams::default(), &db).await.unwrap();
    f.ready("orders").await;
    let again = claims.get("orders-data").await.unwrap();
    assert_eq!(again.metadata.uid, kept.metadata.uid, "the same claim, with its data");
    assert_eq!(secrets.get("orders-credentials").await.unwrap().metadata.uid, secret.metadata.uid, "the same Secret");
    let read_again =
        client_pod(&f.client, &f.ns.name, "read-again", images::POSTGRES, "orders-credentials", read).await;
    assert_eq!(read_again, written, "the old rows, with the password the Secret holds");

    // A deleted Secret is not made again with a new password the data does not know: the
    // Database says what was lost.
    secrets.delete("orders-credentials", &DeleteParams::default()).await.unwrap();
    let lost = wait_until("the Database to say its credentials are lost", CONVERGE, || async {
        let status = f.databases.get("orders").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    })
    .await;
    assert_eq!(lost.reason, "CredentialsLost", "{}", lost.message);
    assert!(lost.message.contains("orders-credentials") && lost.message.contains("orders-data"), "{}", lost.message);
    assert!(secrets.get_opt("orders-credentials").await.unwrap().is_none(), "no new password");
}

#[tokio::test]
async fn a_secret_of_ones_own_is_used_and_none_is_generated() {
    let f = fixture("own-secret", Nodes::Real(1)).await;
    let secret = Secret {
        metadata: ObjectMeta { name: Some("mine".into()), ..Default::default() },
        string_data: Some(BTreeMap::from([
            ("username".to_string(), "app".to_string()),
            ("password".to_string(), "chosen-by-the-user".to_string()),
            ("root-password".to_string(), "root-chosen-by-the-user".to_string()),
        ])),
        ..Default::default()
    };
    f.api::<Secret>().create(&PostParams::default(), &secret).await.unwrap();
    let mut db = engine_database("orders", EngineKind::Mysql, images::MYSQL);
    db.spec.credentials = Some(Box::new(Credentials { secret_name: Some("mine".into()) }));
    f.databases.create(&PostParams::default(), &db).await.unwrap();
    let db = f.ready("orders").await;
    assert_eq!(db.status.unwrap().secret_name.as_deref(), Some("mine"));
    assert!(f.api::<Secret>().get_opt("orders-credentials").await.unwrap().is_none(), "nothing generated");
    let deployment = f.api::<Deployment>().get("orders").await.unwrap();
    let env = deployment.spec.unwrap().template.spec.unwrap().containers.remove(0).env.unwrap();
    let password = env.iter().find(|e| e.name == "MYSQL_PASSWORD").unwrap();
    assert_eq!(password.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap().name, "mine");
}

#[tokio::test]
async fn a_lost_claim_is_neither_made_again_empty_nor_replaced_until_the_status_lets_it_go() {
    let f = fixture("claim-uid", Nodes::Kwok).await;
    f.databases
        .create(&PostParams::default(), &engine_database("orders", EngineKind::Postgres, "postgres:17"))
        .await
        .unwrap();
    let db = f.ready("orders").await;
    let claims: Api<PersistentVolumeClaim> = f.api();
    let first = claims.get("orders-data").await.unwrap().metadata.uid.unwrap();
    assert_eq!(db.status.unwrap().claim_uid.as_deref(), Some(first.as_str()), "the claim's uid is recorded");

    // The claim deleted (its protection finalizer taken off, as once no pod uses it): the
    // Database says what was lost and makes no new, empty claim a server would start fresh on.
    claims.delete("orders-data", &DeleteParams::default()).await.unwrap();
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl").args(args).args(["-n", &f.ns.name]).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    kubectl(&[
        "patch",
        "pvc",
        "orders-data",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let degraded = |reason: &'static str| {
        let databases = f.databases.clone();
        async move {
            wait_until(&format!("the Database to be Degraded, {reason}"), CONVERGE, || async {
                let status = databases.get("orders").await.ok()?.status?;
                status
                    .conditions
                    .into_iter()
                    .find(|c| c.type_ == "Degraded" && c.status == "True" && c.reason == reason)
            })
            .await
        }
    };
    let lost = degraded("ClaimLost").await;
    assert!(lost.message.contains("orders-data") && lost.message.contains(&first), "{}", lost.message);
    assert!(lost.message.contains("kubectl patch database orders --subresource=status"), "{}", lost.message);
    assert!(claims.get_opt("orders-data").await.unwrap().is_none(), "no new, empty claim");

    // A claim with the name and the labels of the Database's, made by someone: not adopted.
    let impostor = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "orders-data", "labels": {"app.kubernetes.io/instance": "orders",
                                                        "app.kubernetes.io/managed-by": "database-operator"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let impostor = claims.create(&PostParams::default(), &serde_json::from_value(impostor).unwrap()).await.unwrap();
    let second = impostor.metadata.uid.unwrap();
    let replaced = degraded("ClaimReplaced").await;
    assert!(replaced.message.contains(&first) && replaced.message.contains(&second), "{}", replaced.message);
    assert!(claims.get("orders-data").await.unwrap().metadata.owner_references.is_none(), "not adopted");

    // The user accepts it with the message's command: the Database takes it and records it.
    let command = replaced.message.split("kubectl ").nth(1).expect("the message gives a command");
    assert_eq!(
        command,
        r#"patch database orders --subresource=status --type=json -p '[{"op":"remove","path":"/status/claimUID"}]'"#
    );
    let (accepted, said) = kubectl(&[
        "patch",
        "database",
        "orders",
        "--subresource=status",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/status/claimUID"}]"#,
    ]);
    assert!(accepted, "{said}");
    wait_until("the new claim to be recorded", CONVERGE, || async {
        let status = f.databases.get("orders").await.ok()?.status?;
        (status.claim_uid.as_deref() == Some(second.as_str()) && status.phase == Some(Phase::Ready)).then_some(())
    })
    .await;
    assert!(claims.get("orders-data").await.unwrap().metadata.owner_references.is_some(), "adopted, owned");
}

#[tokio::test]
async fn a_foreign_claim_of_the_same_name_is_left_alone_and_reported() {
    let f = fixture("foreign-claim", Nodes::Kwok).await;
    // Labelled `app: orders` by its own team: a bare `app` does not make it the operator's.
    let foreign = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "orders-data", "labels": {"app": "orders"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}});
    let claims: Api<PersistentVolumeClaim> = f.api();
    claims.create(&PostParams::default(), &serde_json::from_value(foreign).unwrap()).await.unwrap();
    f.databases
        .create(&PostParams::default(), &engine_database("orders", EngineKind::Redis, "redis:7.4"))
        .await
        .unwrap();
    let db = wait_until("the Database to be Degraded", CONVERGE, || async {
        let db = f.databases.get("orders").await.ok()?;
        (db.status.as_ref()?.phase == Some(Phase::Degraded)).then_some(db)
    })
    .await;
    let degraded = db.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Degraded").unwrap();
    assert_eq!(degraded.reason, "ResourceExists");
    assert!(degraded.message.contains("PersistentVolumeClaim \"orders-data\""), "{}", degraded.message);
    let claim = claims.get("orders-data").await.unwrap();
    assert_eq!(claim.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0, "5Gi", "untouched");
    assert!(claim.metadata.owner_references.is_none(), "not adopted");
    assert!(f.api::<Deployment>().get_opt("orders").await.unwrap().is_none(), "no pod uses a claim that is not ours");
}

#[tokio::test]
async fn the_crd_refuses_what_an_engine_database_cannot_be() {
    let f = fixture("engine-rules", Nodes::Kwok).await;
    // Untyped, so that values the Rust types cannot hold reach the apiserver.
    let api: Api<DynamicObject> =
        Api::namespaced_with(f.client.clone(), &f.ns.name, &ApiResource::erase::<Database>(&()));
    let create = |body: serde_json::Value| {
        let api = api.clone();
        async move {
            let body: DynamicObject = serde_json::from_value(body).unwrap();
            api.create(&PostParams::default(), &body).await
        }
    };
    let base = |spec: serde_json::Value| json!({"apiVersion": "example.com/v1", "kind": "Database", "metadata": {"name": "bad"}, "spec": spec});
    for (spec, rule) in [
        (json!({"size": "small", "image": "x", "engine": "oracle"}), "spec.engine"),
        (json!({"size": "small", "image": "x", "storage": {"size": "1Gi"}}), "spec.storage needs spec.engine"),
        (
            json!({"size": "small", "image": "x", "credentials": {"secretName": "s"}}),
            "spec.credentials needs spec.engine",
        ),
        (
            json!({"size": "small", "image": "x", "engine": "redis", "storage": {"size": "lots"}}),
            "must be a positive quantity",
        ),
        (
            json!({"size": "small", "image": "x", "engine": "redis", "storage": {"reclaimPolicy": "Keep"}}),
            "spec.storage.reclaimPolicy",
        ),
    ] {
        let err = create(base(spec.clone())).await.expect_err("refused");
        assert!(err.to_string().contains(rule), "{spec}: {err}");
    }
    create(base(json!({"size": "small", "image": "postgres:17", "engine": "postgres"}))).await.unwrap();
    let change = json!({"spec": {"engine": "mysql"}});
    let err = f.databases.patch("bad", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap_err();
    assert!(err.to_string().contains("spec.engine cannot change"), "{err}");
}

/// No password (MariaDB's root password included) in the operator's log (at its most verbose
/// level, where request traces are), in Events, in a Database's status, in /metrics, in the
/// database pods' own logs (they run for real), or on any command line of the node: plain or
/// base64-encoded.
#[tokio::test]
async fn a_password_never_appears_in_logs_events_status_or_metrics() {
    use base64::Engine as _;
    use std::process::{Command, Stdio};

    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "no-leak", Nodes::Real(3)).await;
    let dir = std::env::temp_dir().join(format!("database-operator-no-leak-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("operator.log");
    let metrics = crate::common::free_address();
    let mut operator = Command::new(env!("CARGO_BIN_EXE_database-operator"))
        .args(["run", "--namespace", &ns.name, "--log-level", "trace", "--log-format", "json"])
        .args(["--metrics-bind-address", &metrics.to_string(), "--metrics-secure=false"])
        .args(["--health-probe-bind-address", "0"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    for (name, engine, image) in [
        ("orders", EngineKind::Postgres, images::POSTGRES),
        ("sessions", EngineKind::Redis, images::REDIS),
        ("accounts", EngineKind::Mariadb, images::MARIADB),
    ] {
        databases.create(&PostParams::default(), &engine_database(name, engine, image)).await.unwrap();
    }
    for name in ["orders", "sessions", "accounts"] {
        wait_until(&format!("{name} to be Ready"), CONVERGE, || async {
            (databases.get(name).await.ok()?.status?.phase? == Phase::Ready).then_some(())
        })
        .await;
    }
    let (_, scrape) = crate::common::http_get(metrics, "/metrics").await.expect("a scrape");
    // Every process's command line on the node (this machine runs the real node's containers),
    // which any user of the node can read.
    let mut command_lines = String::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(line) = std::fs::read(entry.path().join("cmdline")) {
            command_lines.push_str(&String::from_utf8_lossy(&line).replace('\0', " "));
            command_lines.push('\n');
        }
    }
    assert!(command_lines.contains("redis-server") && command_lines.contains("postgres"), "the servers run here");
    let _ = Command::new("kill").args(["-TERM", &operator.id().to_string()]).status();
    let _ = operator.wait();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns.name);
    let events = serde_json::to_string(&events.list(&Default::default()).await.unwrap().items).unwrap();
    let statuses = serde_json::to_string(&databases.list(&Default::default()).await.unwrap().items).unwrap();
    let output = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let mut pod_logs = String::new();
    for name in ["orders", "sessions", "accounts"] {
        let logs = Command::new("kubectl")
            .args(["logs", "-n", &ns.name, &format!("deployment/{name}"), "-c", "database"])
            .output()
            .unwrap();
        assert!(logs.status.success(), "kubectl logs {name}: {}", String::from_utf8_lossy(&logs.stderr));
        pod_logs.push_str(&String::from_utf8_lossy(&logs.stdout));
    }
    assert!(pod_logs.contains("database system is ready"), "postgres's own log: {pod_logs}");
    assert!(output.lines().count() > 50, "trace logging produced little");
    assert!(output.contains("wrote Secret"), "the log covers the Secrets' creation");
    let mut passwords = Vec::new();
    for name in ["orders-credentials", "sessions-credentials", "accounts-credentials"] {
        let data = decoded(&secrets.get(name).await.unwrap());
        passwords.push((format!("{name}'s password"), data["password"].clone()));
        if let Some(root) = data.get("root-password") {
            passwords.push((format!("{name}'s root-password"), root.clone()));
        }
    }
    assert_eq!(passwords.len(), 4, "three passwords and MariaDB's root password");
    for (name, password) in passwords {
        let encoded = base64::engine::general_purpose::STANDARD.encode(&password);
        for (place, text) in [
            ("the log", &output),
            ("the Events", &events),
            ("the statuses", &statuses),
            ("/metrics", &scrape),
            ("the pods' logs", &pod_logs),
            ("a command line on the node", &command_lines),
        ] {
            assert!(!text.contains(&password) && !text.contains(&encoded), "{name} is in {place}");
        }
    }
}

/// What only the cluster can refuse: a StorageClass that does not exist. The Database says
/// so with the real cause, instead of waiting in silence for a claim nothing will provision.
#[tokio::test]
async fn a_storage_class_that_does_not_exist_is_reported_with_its_name() {
    let f = fixture("no-class", Nodes::Kwok).await;
    let mut db = engine_database("orders", EngineKind::Postgres, "postgres:17");
    db.spec.storage =
        Some(Box::new(Storage { storage_class_name: Some("no-such-class".into()), ..Default::default() }));
    f.databases.create(&PostParams::default(), &db).await.unwrap();
    let degraded = wait_until("the Database to report the missing class", CONVERGE, || async {
        let status = f.databases.get("orders").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    })
    .await;
    assert_eq!(degraded.reason, "StorageClassNotFound");
    assert!(degraded.message.contains("no-such-class"), "{}", degraded.message);
    let events: Api<k8s_openapi::api::events::v1::Event> = f.api();
    let warned = wait_until("a Warning event", CONVERGE, || async {
        let list = events.list(&Default::default()).await.ok()?.items;
        list.into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("StorageClassNotFound"))
    })
    .await;
    assert!(warned.note.unwrap_or_default().contains("no-such-class"));

    // Reconciled twice more (a new generation each time, the same cause): no new Warning.
    for size in ["medium", "large"] {
        let patch = Patch::Merge(json!({"spec": {"size": size}}));
        let db = f.databases.patch("orders", &PatchParams::default(), &patch).await.unwrap();
        let generation = db.metadata.generation;
        wait_until("the new generation to be reconciled", CONVERGE, || async {
            let status = f.databases.get("orders").await.ok()?.status?;
            (status.observed_generation == generation).then_some(())
        })
        .await;
    }
    let list = events.list(&Default::default()).await.unwrap().items;
    let warnings: Vec<_> = list.iter().filter(|e| e.reason.as_deref() == Some("StorageClassNotFound")).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].series.is_none(), "the Warning was repeated: {:?}", warnings[0].series);
}

/// What only the cluster can refuse: a ResourceQuota that allows no claim. The Database says
/// so in the quota's own words.
#[tokio::test]
async fn a_quota_that_refuses_the_claim_is_reported_in_its_own_words() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let f = fixture("quota", Nodes::Kwok).await;
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-claims"},
        "spec": {"hard": {"persistentvolumeclaims": "0"}}});
    let quotas: Api<ResourceQuota> = f.api();
    quotas.create(&PostParams::default(), &serde_json::from_value(quota).unwrap()).await.unwrap();
    wait_until("the quota controller to count the namespace", CONVERGE, || async {
        quotas.get("no-claims").await.ok()?.status?.hard.map(|_| ())
    })
    .await;
    f.databases
        .create(&PostParams::default(), &engine_database("orders", EngineKind::Postgres, "postgres:17"))
        .await
        .unwrap();
    let degraded = wait_until("the Database to report the quota", CONVERGE, || async {
        let status = f.databases.get("orders").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    })
    .await;
    assert_eq!(degraded.reason, "QuotaExceeded");
    assert!(degraded.message.contains("exceeded quota: no-claims"), "{}", degraded.message);
}

/// A Secret of one's own without a key the engine needs (MariaDB's `root-password`): the
/// kubelet cannot make the container, and the Database says so in the kubelet's words once its
/// pod has not run for 20 seconds, not at the Deployment's ten-minute progress deadline; with
/// the key added, it runs.
#[tokio::test]
async fn a_secret_of_ones_own_missing_a_key_is_reported_in_the_kubelets_words() {
    let f = fixture("own-secret", Nodes::Real(1)).await;
    let secrets: Api<Secret> = f.api();
    let secret = Secret {
        metadata: ObjectMeta { name: Some("mine".into()), ..Default::default() },
        string_data: Some(BTreeMap::from([
            ("username".to_string(), "shop".to_string()),
            ("password".to_string(), "a-password-of-my-own".to_string()),
        ])),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    let mut db = engine_database("orders", EngineKind::Mariadb, images::MARIADB);
    db.spec.credentials = Some(Box::new(Credentials { secret_name: Some("mine".into()) }));
    let created = std::time::Instant::now();
    f.databases.create(&PostParams::default(), &db).await.unwrap();
    let degraded = wait_until("the Database to say why its pod does not run", CONVERGE, || async {
        let status = f.databases.get("orders").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    })
    .await;
    assert_eq!(degraded.reason, "CreateContainerConfigError", "{}", degraded.message);
    assert!(degraded.message.contains("root-password") && degraded.message.contains("mine"), "{}", degraded.message);
    eprintln!(
        "[figure] a key missing from the Secret: Degraded {:.0} s after the Database was created",
        created.elapsed().as_secs_f64()
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = f.api();
    wait_until("a Warning event", CONVERGE, || async {
        let list = events.list(&Default::default()).await.ok()?.items;
        list.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("CreateContainerConfigError")
        })
    })
    .await;

    let patch = Patch::Merge(json!({"stringData": {"root-password": "a-root-password-of-my-own"}}));
    secrets.patch("mine", &PatchParams::default(), &patch).await.unwrap();
    f.ready("orders").await;
}
