//! Verified backups on the real node: a DatabaseBackup with `verify: true` is restored into a
//! throwaway Database, which the real node runs; its rows are counted with the engine's own
//! client and compared with the count the dump recorded; the throwaway is deleted and the
//! outcome recorded. A dump that is whole (Completed, its archive readable) and yet does not
//! restore fails its verification: a Warning event, and the condition `BackupVerified=False`
//! on its Database. (Every engine's verification passing is in `data.rs`; a bucket backup's in
//! `buckets.rs`.)

use std::time::Duration;

use database_operator::api::{self as backup, BackupPhase, Database, DatabaseBackup, DatabaseSpec};
use database_operator::api::{EngineKind, Size, Verification, VerificationResult};
use k8s_openapi::api::events::v1::Event;
use kube_client::api::{Api, PostParams};

use crate::common::{Nodes, Operator, TestNamespace, client, images, install_crd, psql, wait_until};
use crate::data::ready;

/// Long enough for a real dump, a real restore into a new server and a count, on a busy
/// two-core machine.
const VERIFIED: Duration = Duration::from_secs(300);

/// The verification of backup `name`, once it has a result.
pub(crate) async fn verified(backups: &Api<DatabaseBackup>, name: &str) -> Verification {
    wait_until(&format!("DatabaseBackup {name} to be verified"), VERIFIED, || async {
        let verified = backups.get(name).await.ok()?.status?.verified?;
        verified.result.is_some().then_some(verified)
    })
    .await
}

/// Verification `backup` of Database `orders`.
fn verifying(name: &str) -> DatabaseBackup {
    let mut made = backup::backup(name, "orders");
    made.spec.verify = Some(true);
    made
}

/// A Ready postgres Database `orders` in `ns`, its tables made by `sql`.
async fn orders(databases: &Api<Database>, ns: &str, sql: &str) {
    let db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    databases.create(&PostParams::default(), &db).await.unwrap();
    ready(databases, "orders").await;
    psql(ns, "orders", sql);
}

/// Whether Database `orders` says `BackupVerified` is `status`, and its message.
async fn condition(databases: &Api<Database>, status: &str) -> String {
    wait_until(&format!("BackupVerified={status} on Database orders"), VERIFIED, || async {
        let db = databases.get("orders").await.ok()?;
        let condition = db.status?.conditions.into_iter().find(|c| c.type_ == "BackupVerified")?;
        (condition.status == status).then_some(condition.message)
    })
    .await
}

/// Whether an event of `type_` and `reason` is about `name`, saying `words`.
async fn event(client: &kube_client::Client, ns: &str, name: &str, type_: &str, reason: &str, words: &str) {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    wait_until(&format!("a {type_} {reason} event on {name}"), VERIFIED, || async {
        let said = events.list(&Default::default()).await.ok()?.items.into_iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.type_.as_deref() == Some(type_)
                && e.reason.as_deref() == Some(reason)
                && e.note.as_deref().is_some_and(|note| note.contains(words))
        });
        said.then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_verified_backup_is_restored_into_a_throwaway_counted_as_the_dump_counted_and_the_throwaway_deleted() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "verify", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    // Two schemas, a partitioned table (its rows counted once, in its partitions).
    orders(
        &databases,
        &ns.name,
        "CREATE TABLE lines (id int PRIMARY KEY, note text); \
         INSERT INTO lines SELECT i, md5(i::text) FROM generate_series(1, 20000) i; \
         CREATE SCHEMA audit; CREATE TABLE audit.log (at int, note text) PARTITION BY RANGE (at); \
         CREATE TABLE audit.log_low PARTITION OF audit.log FOR VALUES FROM (0) TO (50); \
         CREATE TABLE audit.log_high PARTITION OF audit.log FOR VALUES FROM (50) TO (100); \
         INSERT INTO audit.log SELECT i, 'line ' || i FROM generate_series(0, 99) i",
    )
    .await;

    backups.create(&PostParams::default(), &verifying("nightly")).await.unwrap();
    let verification = verified(&backups, "nightly").await;
    println!("[figure] verification: {verification:?}");
    let status = backups.get("nightly").await.unwrap().status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Completed));
    assert_eq!(status.count, Some(20_100), "the dump's rows: 20,000 lines and 100 audit lines");
    assert_eq!(verification.result, Some(VerificationResult::Passed), "{:?}", verification.message);
    assert_eq!(verification.count, Some(20_100));
    let seconds = verification.restore_seconds.expect("the restore's duration");
    assert!(seconds > 0, "a real server started and loaded the dump: {seconds} s");
    assert!(verification.start_time.is_some() && verification.time > verification.start_time);

    // Nothing of it is left: the throwaway Database (and with it its pod and volume) is gone.
    wait_until("the throwaway Database to be gone", VERIFIED, || async {
        databases.get_opt("nightly-verify").await.unwrap().is_none().then_some(())
    })
    .await;
    let message = condition(&databases, "True").await;
    assert!(message.starts_with("DatabaseBackup nightly: restored, and holds the 20100 rows"), "{message}");
    event(&client, &ns.name, "nightly", "Normal", "Verified", "20100 rows").await;
}

/// A CHECK constraint that calls a function reading another table: PostgreSQL's documentation
/// warns that such a constraint is not restored reliably, and pg_dump dumps it as it is. The
/// dump completes and reads back; its restore stops at the table the constraint is on.
#[tokio::test]
async fn a_backup_that_completes_and_does_not_restore_fails_its_verification_and_says_why() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "verify-fails", Nodes::Real(2)).await;
    let _operator = Operator::start(&client, &ns.name);
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    orders(
        &databases,
        &ns.name,
        "CREATE TABLE customers (id int PRIMARY KEY); INSERT INTO customers SELECT generate_series(1, 100); \
         CREATE FUNCTION known_customer(int) RETURNS boolean LANGUAGE sql \
         AS 'SELECT EXISTS (SELECT 1 FROM customers WHERE id = $1)'; \
         CREATE TABLE accounts (id int PRIMARY KEY, customer int CHECK (known_customer(customer))); \
         INSERT INTO accounts SELECT i, i FROM generate_series(1, 100) i",
    )
    .await;

    backups.create(&PostParams::default(), &verifying("nightly")).await.unwrap();
    let verification = verified(&backups, "nightly").await;
    let status = backups.get("nightly").await.unwrap().status.unwrap();
    println!("[figure] the dump: {:?}, {:?} rows; its verification: {verification:?}", status.phase, status.count);
    assert_eq!(status.phase, Some(BackupPhase::Completed), "the dump is whole: a plain backup says Completed");
    assert_eq!(status.count, Some(200));
    assert_eq!(verification.result, Some(VerificationResult::Failed));
    let message = verification.message.unwrap_or_default();
    assert!(
        message.contains("did not become Ready") || message.contains("where the dump recorded 200"),
        "the failed restore, in its own words: {message}"
    );
    let said = condition(&databases, "False").await;
    assert!(said.starts_with("DatabaseBackup nightly: "), "{said}");
    event(&client, &ns.name, "nightly", "Warning", "VerificationFailed", "").await;
    event(&client, &ns.name, "orders", "Warning", "BackupVerificationFailed", "DatabaseBackup nightly").await;
    wait_until("the throwaway Database to be gone", VERIFIED, || async {
        databases.get_opt("nightly-verify").await.unwrap().is_none().then_some(())
    })
    .await;
}
