//! The chart's monitoring against a running operator, on the real node: a scheduled Database
//! and a verified backup of it (a real dump, a real restore), then a scrape of `/metrics`. The Database's series say
//! what its status and its backup's say, and every metric the alerting rules and the Grafana
//! dashboard query is served, now that the queues and the controllers have series too
//! (`tests/monitoring.rs` checks the same against the registry, without a cluster).

use std::collections::BTreeMap;
use std::time::Duration;

use database_operator::api::{self as api, BackupPhase, BackupSchedule, Database, DatabaseBackup, DatabaseSpec};
use database_operator::api::{EngineKind, Size};
use database_operator::operator::{Options, run};
use kube_client::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use crate::backups::finished;
use crate::common::{Nodes, TestNamespace, client, free_address, http_get, images, install_crd, wait_until};

#[path = "../monitoring/queries.rs"]
#[allow(dead_code, reason = "shared with tests/monitoring.rs, which uses all of it")]
mod queries;

/// The value of the series `name{namespace="<namespace>",database="<database>"}` in a scrape.
fn value(text: &str, name: &str, namespace: &str, database: &str) -> Option<f64> {
    let prefix = format!("{name}{{namespace=\"{namespace}\",database=\"{database}\"}} ");
    text.lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
}

#[tokio::test]
async fn the_operator_serves_every_metric_the_rules_and_the_dashboard_query() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::create_restricted(&client, "monitoring", Nodes::Real(2)).await;
    let metrics = free_address();
    let mut options = Options::new(Some(ns.name.clone()), 2);
    options.metrics_address = Some(metrics);
    // With leader election, as deployed: the rules tell the leader by its Lease's gauge.
    options.leader_election = Some(operator_runtime::ops::leader::Config::new(
        "database-operator-monitoring",
        &ns.name,
        &format!("monitoring-{}", std::process::id()),
    ));
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    tokio::spawn(run(client.clone(), options, cancel.clone()));

    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let mut db =
        Database::new("orders", DatabaseSpec::new(Size::Small, images::POSTGRES).with_engine(EngineKind::Postgres));
    // Monthly: no scheduled backup runs during the test; the period is what is checked.
    db.spec.backup =
        Some(Box::new(BackupSchedule { schedule: "0 0 1 * *".into(), keep: None, bucket: None, verify: None }));
    databases.create(&PostParams::default(), &db).await.unwrap();
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), &ns.name);
    let mut verified = api::backup("orders-1", "orders");
    verified.spec.verify = Some(true);
    backups.create(&PostParams::default(), &verified).await.unwrap();
    let done = finished(&backups, "orders-1").await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Completed), "{:?}", status.message);
    let completed = status.completion_time.unwrap().0.as_second() as f64;
    let verification = crate::verify::verified(&backups, "orders-1").await;
    let verified_at = verification.time.unwrap().0.as_second() as f64;

    // The cache shows the backup's status soon after the apiserver does.
    let text = wait_until("/metrics to show the verified backup", Duration::from_secs(30), || async {
        let (code, text) = http_get(metrics, "/metrics").await?;
        assert_eq!(code, 200, "{text}");
        let shown = |name: &str| value(&text, name, &ns.name, "orders");
        let completion = shown("database_backup_last_completion_timestamp_seconds");
        let verification = shown("database_backup_last_verification_timestamp_seconds");
        (completion == Some(completed) && verification == Some(verified_at)).then_some(text)
    })
    .await;
    let of = |name: &str| value(&text, name, &ns.name, "orders");
    assert_eq!(of("database_ready"), Some(1.0), "{text}");
    assert!(of("database_backup_last_duration_seconds").is_some_and(|d| d >= 0.0), "{text}");
    // From the 1st of a month to the next: 28 to 31 days.
    let period = of("database_backup_schedule_period_seconds").expect("a period");
    assert!((28.0 * 86_400.0..=31.0 * 86_400.0).contains(&period), "{period}");
    assert_eq!(of("database_backup_verification_failed"), Some(0.0), "{text}");
    let restore = of("database_restore_last_duration_seconds");
    assert_eq!(restore, verification.restore_seconds.map(|s| s as f64), "the verification's restore: {text}");
    assert_eq!(of("database_backup_last_count"), Some(0.0), "an empty database's dump counts no rows: {text}");
    assert!(of("database_created_timestamp_seconds").is_some(), "{text}");

    // Every name the queries select is served; the operator's own with a series now.
    let mut problems = BTreeMap::new();
    for (place, expr) in queries::all() {
        for (name, labels) in queries::selectors(&expr) {
            if queries::PROMETHEUS_OWN.contains(&name.as_str()) {
                continue;
            }
            // Bucket-less: no size.
            let optional = ["database_backup_last_size_bytes"];
            let series = queries::series_labels(&text, &name);
            if series.is_empty() && !optional.contains(&name.as_str()) && !text.contains(&format!("# TYPE {name} ")) {
                problems.insert(format!("{place}: {name}"), "not served".to_string());
            }
            for label in labels.iter().filter(|label| !queries::TARGET_LABELS.contains(&label.as_str())) {
                if series.iter().any(|s| !s.contains(label)) {
                    problems.insert(format!("{place}: {name}"), format!("has no label {label}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "the queries and the running operator's /metrics disagree: {problems:#?}\n{text}");
}
