//! Backups in an S3-compatible bucket, on the real node, against a real object store: SeaweedFS
//! (hack/object-store.sh), started by each test on the host's end of the real node's link
//! (NODE_HOST_ADDRESS, from `hack/control-plane.sh env`), where the node's pods reach it. A dump is uploaded by the Job, read back here (its checksum recomputed from the
//! bytes in the bucket) and restored into a Database of another namespace once its own
//! namespace is gone, where an older major version's Database is refused it in the fetch's
//! words; a wrong key, a missing bucket and a server that goes away half-way through
//! the upload each fail the backup with the server's (or the connection's) reason, and leave
//! nothing listed in the bucket.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use database_operator::api::{self as backup, BackupPhase, Bucket, Database, DatabaseBackup, DatabaseSpec};
use database_operator::api::{EngineKind, RestoreFrom, Size};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{ClientOptions, ObjectStore as _, ObjectStoreExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backups::finished;
use crate::common::{Nodes, Operator, TestNamespace, client, images, install_crd, psql, wait_until};
use crate::data::{CONVERGE, ready};

/// An object store of the test's own (hack/object-store.sh: SeaweedFS with a bucket `backups`),
/// on the host's end of the real node's link; stopped when dropped.
struct ObjectStore {
    name: String,
    endpoint: String,
    dir: PathBuf,
}

impl ObjectStore {
    /// Starts one, serving https with a certificate of a CA of its own when `tls`.
    async fn start(name: &str, tls: bool) -> Self {
        let host = std::env::var("NODE_HOST_ADDRESS").expect(
            "NODE_HOST_ADDRESS (hack/control-plane.sh env, on a plane with a real node): where pods reach the host",
        );
        let name = format!("{name}-{}", std::process::id());
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/object-store.sh");
        let run = |verb: &str| {
            let output = Command::new(script)
                .arg(verb)
                .env("STORE", &name)
                .env("ADDRESS", &host)
                .env("TLS", if tls { "1" } else { "0" })
                .output()
                .expect("running hack/object-store.sh");
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(
                output.status.success(),
                "hack/object-store.sh {verb}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            stdout
        };
        run("up");
        let env = run("env");
        let value = |key: &str| {
            let prefix = format!("export {key}=");
            env.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("{key} in {env}"))
                .to_string()
        };
        Self { name, endpoint: value("OBJECT_STORE_ENDPOINT"), dir: value("OBJECT_STORE_DIR").into() }
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap().trim().to_string()
    }

    /// The CA's certificate (PEM), when it serves https.
    fn ca(&self) -> Option<String> {
        self.endpoint.starts_with("https://").then(|| self.file("ca.crt"))
    }

    /// Where its S3 gateway listens.
    fn address(&self) -> SocketAddr {
        self.endpoint.rsplit_once("://").unwrap().1.parse().unwrap()
    }

    /// A client of `bucket`, to read back what the backups wrote.
    fn bucket(&self, bucket: &str) -> AmazonS3 {
        let _ = rustls::crypto::CryptoProvider::install_default(rustls::crypto::ring::default_provider());
        let mut options = ClientOptions::new().with_allow_http(true);
        for certificate in
            self.ca().iter().flat_map(|ca| object_store::Certificate::from_pem_bundle(ca.as_bytes()).unwrap())
        {
            options = options.with_root_certificate(certificate);
        }
        AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id(self.file("access-key-id"))
            .with_secret_access_key(self.file("secret-access-key"))
            .with_client_options(options)
            .build()
            .unwrap()
    }

    /// The Bucket of the API for `bucket` here, with the keys of Secret `keys`.
    fn spec(&self, bucket: &str, keys: &str) -> Bucket {
        Bucket {
            endpoint: self.endpoint.clone(),
            name: bucket.into(),
            credentials_secret: keys.into(),
            ca_secret: self.ca().map(|_| "bucket-ca".into()),
            ..Default::default()
        }
    }

    /// Every object under `prefix` in `bucket`, with its size.
    async fn list(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        let listed: Vec<_> =
            self.bucket(bucket).list(Some(&prefix.into())).try_collect().await.expect("listing the bucket");
        listed.into_iter().map(|meta| (meta.location.to_string(), meta.size)).collect()
    }
}

impl Drop for ObjectStore {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/object-store.sh");
        let _ = Command::new(script).arg("down").env("STORE", &self.name).output();
    }
}

/// `count` free ports from hack/free-port.py.
fn free_ports(count: usize) -> Vec<u16> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/free-port.py");
    let output = Command::new(script).arg(count.to_string()).output().expect("running hack/free-port.py");
    String::from_utf8_lossy(&output.stdout).lines().map(|l| l.trim().parse().unwrap()).collect()
}

/// The Secrets of a namespace's bucket: the keys (`keys`; the secret key `secret_key` in place
/// of the store's when given), and the CA when the store has one.
async fn bucket_secrets(client: &Client, ns: &str, store: &ObjectStore, keys: &str, secret_key: Option<&str>) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut data = std::collections::BTreeMap::new();
    data.insert("access-key-id".to_string(), store.file("access-key-id"));
    data.insert(
        "secret-access-key".to_string(),
        secret_key.map_or_else(|| store.file("secret-access-key"), String::from),
    );
    let mut secret = Secret { string_data: Some(data), ..Default::default() };
    secret.metadata.name = Some(keys.into());
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    if let Some(ca) = store.ca() {
        let mut secret =
            Secret { string_data: Some([("ca.crt".to_string(), ca)].into_iter().collect()), ..Default::default() };
        secret.metadata.name = Some("bucket-ca".into());
        let _ = secrets.create(&PostParams::default(), &secret).await;
    }
}

/// A Ready postgres Database `orders` in `ns` holding `rows` rows of 64 random characters.
async fn orders(client: &Client, ns: &str, rows: u32) -> Api<Database> {
    let databases: Api<Database> = Api::namespaced(client.clone(), ns);
    let db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    ready(&databases, "orders").await;
    psql(
        ns,
        "orders",
        &format!(
            "CREATE TABLE lines (id int PRIMARY KEY, note text); INSERT INTO lines SELECT i, md5(random()::text) || \
             md5(random()::text) FROM generate_series(1, {rows}) i"
        ),
    );
    databases
}

fn to_bucket(name: &str, bucket: Bucket) -> DatabaseBackup {
    let mut made = backup::backup(name, "orders");
    made.spec.bucket = Some(bucket);
    made
}

#[tokio::test]
async fn a_backup_in_a_bucket_is_whole_there_and_restores_in_another_namespace_once_its_own_is_gone() {
    let client = client().await;
    install_crd(&client).await;
    let store = ObjectStore::start("bucket-dr", true).await;
    let ns = TestNamespace::create_restricted(&client, "bucket-dr", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    bucket_secrets(&client, &ns.name, &store, "bucket-keys", None).await;
    orders(&client, &ns.name, 20_000).await;
    let written = psql(&ns.name, "orders", "SELECT count(*), md5(string_agg(note, ',' ORDER BY id)) FROM lines");

    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let mut nightly = to_bucket("nightly", store.spec("backups", "bucket-keys"));
    nightly.spec.verify = Some(true);
    backups.create(&PostParams::default(), &nightly).await.unwrap();
    let status = finished(&backups, "nightly").await.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Completed), "{:?}", status.message);
    // Verified from the bucket: fetched, restored into a throwaway and counted.
    let verification = crate::verify::verified(&backups, "nightly").await;
    println!("[figure] verified from the bucket: {verification:?}");
    assert_eq!(verification.result, Some(database_operator::api::VerificationResult::Passed), "{verification:?}");
    assert_eq!((status.count, verification.count), (Some(20_000), Some(20_000)), "the dump's count, the restore's");
    let folder = format!("{}/nightly", ns.name);
    assert_eq!(status.location.as_deref(), Some(format!("s3://backups/{folder}/").as_str()));
    assert_eq!(status.claim_name, None, "no claim: the dump is in the bucket");

    // What the bucket holds is what the status says: the size, and the SHA-256 of its bytes.
    let listed = store.list("backups", &folder).await;
    let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, [format!("{folder}/backup.json"), format!("{folder}/dump.gz")], "{listed:?}");
    let dump = store.bucket("backups").get(&format!("{folder}/dump.gz").into()).await.unwrap().bytes().await.unwrap();
    assert_eq!(Some(dump.len() as i64), status.size);
    let digest = ring::digest::digest(&ring::digest::SHA256, &dump);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(Some(hex), status.sha256);
    assert_eq!(&dump[..2], [0x1f, 0x8b], "gzip");

    // The namespace goes, with its Database, its backup and its Secrets; the bucket keeps it.
    let source_namespace = ns.name.clone();
    drop(ns);
    let target = TestNamespace::create_restricted(&client, "bucket-dr-target", Nodes::Real(2)).await;
    let _target_operator = Operator::start(&client, &target.name);
    bucket_secrets(&client, &target.name, &store, "bucket-keys", None).await;
    let databases: Api<Database> = Api::namespaced(client.clone(), &target.name);
    let mut restored =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    let bucket = Bucket { prefix: Some(source_namespace), ..store.spec("backups", "bucket-keys") };
    restored.spec.restore_from = Some(Box::new(RestoreFrom { backup: "nightly".into(), bucket: Some(bucket.clone()) }));
    databases.create(&PostParams::default(), &restored).await.unwrap();
    // Beside it, an older server: the fetch refuses it the newer dump, in its own words, before
    // the server ever starts.
    let mut older =
        Database::new("older", DatabaseSpec::new(Size::Small, images::POSTGRES_15).with_engine(EngineKind::Postgres));
    older.spec.restore_from = Some(Box::new(RestoreFrom { backup: "nightly".into(), bucket: Some(bucket) }));
    databases.create(&PostParams::default(), &older).await.unwrap();
    let refusal = wait_until("postgres 15 to be refused postgres 17's dump from the bucket", CONVERGE, || async {
        let status = databases.get("older").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Degraded" && c.status == "True")
    });
    let (db, refused) = futures::join!(ready(&databases, "orders"), refusal);
    assert_eq!(db.status.unwrap().restored_from.as_deref(), Some("nightly"));
    let read = psql(&target.name, "orders", "SELECT count(*), md5(string_agg(note, ',' ORDER BY id)) FROM lines");
    assert_eq!(read, written, "the rows read back are the rows written");
    println!("[figure] postgres 15 restoring from the bucket: {}: {}", refused.reason, refused.message);
    assert_eq!(refused.reason, "RestoreRefused", "{}", refused.message);
    assert!(refused.message.contains("(major version 17)"), "{}", refused.message);
    assert!(refused.message.contains("runs major version 15"), "{}", refused.message);
    assert_eq!(databases.get("older").await.unwrap().status.unwrap().restored_from, None, "nothing restored");
}

#[tokio::test]
async fn a_backup_with_a_wrong_key_or_to_a_missing_bucket_fails_with_the_servers_reason_and_lists_nothing() {
    let client = client().await;
    install_crd(&client).await;
    let store = ObjectStore::start("bucket-refused", false).await;
    let ns = TestNamespace::create_restricted(&client, "bucket-refused", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    bucket_secrets(&client, &ns.name, &store, "bucket-keys", None).await;
    bucket_secrets(&client, &ns.name, &store, "wrong-keys", Some("a-wrong-secret")).await;
    orders(&client, &ns.name, 100).await;

    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    backups.create(&PostParams::default(), &to_bucket("wrong-key", store.spec("backups", "wrong-keys"))).await.unwrap();
    backups
        .create(&PostParams::default(), &to_bucket("no-bucket", store.spec("missing", "bucket-keys")))
        .await
        .unwrap();
    for (name, reason) in [("wrong-key", "SignatureDoesNotMatch"), ("no-bucket", "NoSuchBucket")] {
        let status = finished(&backups, name).await.status.unwrap();
        assert_eq!(status.phase, Some(BackupPhase::Failed), "{name}: {:?}", status.message);
        let message = status.message.unwrap_or_default();
        println!("[figure] {name}: {message}");
        assert!(message.contains(reason), "{name}: {message}");
        assert!(
            !message.contains(&store.file("secret-access-key")) && !message.contains("a-wrong-secret"),
            "{message}"
        );
        assert_eq!((status.size, status.sha256), (None, None), "{name}");
    }
    assert_eq!(store.list("backups", &ns.name).await, [], "nothing is listed");
}

#[tokio::test]
async fn a_backup_whose_server_goes_away_during_the_upload_fails_and_leaves_nothing_listed() {
    let client = client().await;
    install_crd(&client).await;
    let store = ObjectStore::start("bucket-cut", false).await;
    // Between the Job and the server: forwards the first 2 MiB of what the Job sends, then cuts
    // every connection and stops listening, as a server that went away mid-upload.
    let proxy = CuttingProxy::start(store.address(), 2 << 20).await;
    let ns = TestNamespace::create_restricted(&client, "bucket-cut", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    bucket_secrets(&client, &ns.name, &store, "bucket-keys", None).await;
    // About 13 MB of rows that do not compress much: the upload outlasts the cut.
    orders(&client, &ns.name, 200_000).await;

    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let bucket = Bucket { endpoint: format!("http://{}", proxy.address), ..store.spec("backups", "bucket-keys") };
    backups.create(&PostParams::default(), &to_bucket("cut", bucket)).await.unwrap();
    let status = finished(&backups, "cut").await.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Failed), "{:?}", status.message);
    assert!(proxy.forwarded() >= 2 << 20, "the upload had begun: {} bytes forwarded", proxy.forwarded());
    let message = status.message.unwrap_or_default();
    println!("[figure] cut after {} bytes: {message}", proxy.forwarded());
    assert!(message.contains("the upload failed") && message.to_lowercase().contains("connect"), "{message}");
    assert_eq!(store.list("backups", &ns.name).await, [], "nothing partial is listed");
}

/// A TCP proxy that forwards to `upstream` until `limit` bytes went upstream in all, then
/// closes every connection and its listener.
struct CuttingProxy {
    address: SocketAddr,
    forwarded: Arc<AtomicU64>,
}

impl CuttingProxy {
    async fn start(upstream: SocketAddr, limit: u64) -> Self {
        let listener = tokio::net::TcpListener::bind((upstream.ip(), free_ports(1)[0])).await.unwrap();
        let address = listener.local_addr().unwrap();
        let forwarded = Arc::new(AtomicU64::new(0));
        let cut = tokio_util::sync::CancellationToken::new();
        let (count, stop) = (forwarded.clone(), cut.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = stop.cancelled() => return,
                };
                let Ok((mut inbound, _)) = accepted else { return };
                let (count, stop) = (count.clone(), stop.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else { return };
                    let (mut in_read, mut in_write) = inbound.split();
                    let (mut out_read, mut out_write) = outbound.split();
                    let up = async {
                        let mut buffer = vec![0u8; 64 << 10];
                        loop {
                            let read = in_read.read(&mut buffer).await.unwrap_or(0);
                            if read == 0 {
                                return;
                            }
                            if count.fetch_add(read as u64, Ordering::SeqCst) + read as u64 > limit {
                                stop.cancel();
                                return;
                            }
                            if out_write.write_all(&buffer[..read]).await.is_err() {
                                return;
                            }
                        }
                    };
                    let down = tokio::io::copy(&mut out_read, &mut in_write);
                    tokio::select! {
                        () = up => {}
                        _ = down => {}
                        () = stop.cancelled() => {}
                    }
                });
            }
        });
        Self { address, forwarded }
    }

    fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn the_crd_refuses_a_bucket_it_cannot_use_naming_the_rule() {
    use kube_client::api::{ApiResource, DynamicObject};
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, "bucket-rules").await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns.name, &ApiResource::erase::<DatabaseBackup>(&()));
    let bucket = |changes: serde_json::Value| {
        let mut bucket =
            serde_json::json!({"endpoint": "https://s3.example.com", "name": "backups", "credentialsSecret": "keys"});
        bucket.as_object_mut().unwrap().extend(changes.as_object().unwrap().clone());
        bucket
    };
    for (spec, rule) in [
        (
            serde_json::json!({"database": "orders", "storage": {"size": "1Gi"}, "bucket": bucket(serde_json::json!({}))}),
            "spec.storage and spec.bucket are two places for the dump: set one",
        ),
        (
            serde_json::json!({"database": "orders", "bucket": bucket(serde_json::json!({"endpoint": "s3.example.com"}))}),
            "endpoint must be an http:// or https:// URL",
        ),
        (
            serde_json::json!({"database": "orders", "bucket": bucket(serde_json::json!({"prefix": "shop/"}))}),
            "prefix is a folder such as team/shop",
        ),
    ] {
        let body = serde_json::json!({"apiVersion": "example.com/v1", "kind": "DatabaseBackup", "metadata": {"name": "bad"}, "spec": spec});
        let err =
            api.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.expect_err("refused");
        assert!(err.to_string().contains(rule), "{spec}: {err}");
    }
}

/// Retention reaches the bucket: a schedule keeping one backup in a bucket deletes, with each
/// DatabaseBackup it lets go, that backup's folder there (manifest and dump); the backup it
/// keeps is whole there.
#[tokio::test]
async fn a_schedule_s_keep_deletes_the_copies_in_the_bucket_of_the_backups_it_lets_go() {
    let client = client().await;
    install_crd(&client).await;
    let store = ObjectStore::start("bucket-keep", false).await;
    let ns = TestNamespace::create_restricted(&client, "bucket-keep", Nodes::Real(1)).await;
    let _operator = Operator::start(&client, &ns.name);
    bucket_secrets(&client, &ns.name, &store, "bucket-keys", None).await;
    let databases = orders(&client, &ns.name, 1000).await;
    let bucket = serde_json::to_value(store.spec("backups", "bucket-keys")).unwrap();
    let schedule = serde_json::json!({"spec": {"backup": {"schedule": "*/15 * * * * *", "keep": 1, "bucket": bucket}}});
    databases.patch("orders", &PatchParams::default(), &Patch::Merge(&schedule)).await.unwrap();

    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let gone = wait_until("two scheduled backups let go", Duration::from_secs(300), || {
        let (backups, seen) = (&backups, &seen);
        async move {
            let now: std::collections::BTreeSet<String> = backups
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|b| b.metadata.name)
                .collect();
            let mut seen = seen.lock().unwrap();
            seen.extend(now.iter().cloned());
            let gone: Vec<String> = seen.difference(&now).cloned().collect();
            (gone.len() >= 2).then_some(gone)
        }
    })
    .await;
    println!("[figure] let go: {gone:?}");
    for name in &gone {
        let left = store.list("backups", &format!("{}/{name}", ns.name)).await;
        assert!(left.is_empty(), "{name} was let go, and its folder still holds {left:?}");
    }
    // What stays is whole: every Completed backup's folder has its manifest and dump.
    for backup in backups.list(&Default::default()).await.unwrap() {
        let (name, status) = (backup.metadata.name.unwrap(), backup.status.unwrap_or_default());
        if status.phase == Some(BackupPhase::Completed) {
            let listed = store.list("backups", &format!("{}/{name}", ns.name)).await;
            assert_eq!(listed.len(), 2, "{name}: {listed:?}");
        }
    }
}
