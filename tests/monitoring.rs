//! The monitoring the chart ships must watch what the operator serves:
//!
//! - the alerting rules (`charts/database-operator/files/prometheus-rules.yaml`, the chart's
//!   PrometheusRule) pass `promtool check rules`, and their unit tests (`tests/prometheus/*.yaml`,
//!   each alert firing and not firing) pass `promtool test rules`. promtool is the binary named
//!   by `PROMTOOL` (`hack/promtool.sh` builds it; `hack/test.sh` sets it): without it these
//!   tests fail, they do not skip;
//! - every metric the rules' and the Grafana dashboard's PromQL names is a family the operator
//!   serves: the text `/metrics` serves, encoded from the registry the operator builds, with a
//!   Database and its backups in the caches so that the per-Database families have series (a
//!   per-Database family must have them, and a label a query matches on must be one of its
//!   labels). The runtime's families (work queues, reconciles) have series only once the
//!   operator runs; for them the registry's descriptors are the proof.
//!
//! None needs a cluster. `tests/e2e/monitoring.rs` checks the same names against a running
//! operator's `/metrics`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use database_operator::api::{
    self, BackupPhase, BackupSchedule, BackupStatus, Database, DatabaseSpec, DatabaseStatus, EngineKind, Size,
    Verification, VerificationResult, index,
};
use database_operator::operator::database_metrics::Stores;
use database_operator::operator::{Metrics, Options};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use operator_runtime::informer::Store;
use regex::Regex;

// In a directory of its own: a file directly in tests/ would be a test target of its own.
#[path = "monitoring/queries.rs"]
mod queries;
use queries::{PROMETHEUS_OWN, RULES, TARGET_LABELS, alert_names, read, selectors, series_labels};

const RULE_TESTS: &str = "tests/prometheus";

const NO_PROMTOOL: &str = "PROMTOOL is not set: these tests run promtool. Build it with `hack/promtool.sh` and set \
                           PROMTOOL to the path it prints on its last line (PROMTOOL=$(hack/promtool.sh | tail -n1) \
                           cargo test --test monitoring), or run the whole suite with hack/test.sh, which does both";

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs promtool with `args` in the repository; panics with its output when it fails.
fn promtool(args: &[&str]) -> String {
    let program =
        std::env::var_os("PROMTOOL").filter(|path| !path.is_empty()).unwrap_or_else(|| panic!("{NO_PROMTOOL}"));
    let output = Command::new(&program).args(args).current_dir(repository()).output().unwrap_or_else(|err| {
        panic!("cannot run {}: {err}; is PROMTOOL the path hack/promtool.sh printed?", program.display())
    });
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "promtool {} failed:\n{text}", args.join(" "));
    text
}

#[test]
fn the_alerting_rules_pass_promtool_check_rules() {
    let output = promtool(&["check", "rules", RULES]);
    assert!(output.contains("SUCCESS: 5 rules found"), "promtool found other rules than the five alerts:\n{output}");
}

#[test]
fn every_alert_fires_and_stays_quiet_as_its_promtool_unit_tests_say() {
    let mut tests: Vec<String> = std::fs::read_dir(repository().join(RULE_TESTS))
        .expect("tests/prometheus/ exists")
        .map(|entry| format!("{RULE_TESTS}/{}", entry.unwrap().file_name().to_string_lossy()))
        .filter(|path| path.ends_with(".yaml"))
        .collect();
    tests.sort();
    assert!(!tests.is_empty(), "no rule tests in {RULE_TESTS}");
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    promtool(&args);
    // Every alert is tested, firing (an exp_alerts with an alert) and not (an empty one).
    let alerts = alert_names();
    let tested = tests.iter().map(|path| read(path)).collect::<String>();
    for alert in &alerts {
        let firing = Regex::new(&format!(r"alertname: {alert}\n\s+exp_alerts:\n\s+- exp_labels")).unwrap();
        let quiet = Regex::new(&format!(r"alertname: {alert}\n\s+exp_alerts: \[\]")).unwrap();
        assert!(firing.is_match(&tested), "no promtool test has {alert} firing");
        assert!(quiet.is_match(&tested), "no promtool test has {alert} not firing");
    }
}

// ---------------------------------------------------------------------------------------------
// The names the queries use, against what the operator serves.

#[test]
fn the_selector_parser_finds_metric_names_and_their_matchers_and_nothing_else() {
    let expr = r#"histogram_quantile(0.99, sum by (controller, le) (rate(a_seconds_bucket{x="1", y=~"b|c"}[5m])))
        unless on (job) label_replace(b_total, "name", "$1", "controller", "(.+)") > 1e3 * max without (z) (c) or vector(0)
        and label_values(d{namespace=~"$namespace", pod!="a,b"}, database)"#;
    let found = selectors(expr);
    let names: Vec<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["a_seconds_bucket", "b_total", "c", "d"]);
    assert_eq!(found[0].1, BTreeSet::from(["x".to_string(), "y".to_string()]));
    assert_eq!(found[3].1, BTreeSet::from(["namespace".to_string(), "pod".to_string()]));
}

/// What `/metrics` serves: the registry the operator builds with every option on, its caches
/// holding a scheduled, Ready Database with a verified backup in a bucket. Returns the text and
/// the registry's family names (its descriptors as its `Debug` prints them, as tests/docs.rs
/// reads them: families without a series yet have no `# TYPE` line).
async fn scrape() -> (String, BTreeSet<String>) {
    use operator_runtime::client::RequestMetrics;
    use operator_runtime::events::Recorder;
    use operator_runtime::ops::leader;

    // A client that is never called: the recorder's task only writes the events it is given.
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube_client::Client::try_from(config).expect("a client needs no connection to be built");
    let (recorder, _task) = Recorder::new(client, "example.com/database-operator", "monitoring-test");
    let mut options = Options::new(None, 1);
    options.request_metrics = Some(RequestMetrics::default());
    options.leader_election = Some(leader::Config::new("database-operator.example.com", "default", "monitoring-test"));
    let metrics = Metrics::register(&options, &recorder);

    let now = Timestamp::now();
    let ago = |seconds: i64| Time(now - k8s_openapi::jiff::SignedDuration::from_secs(seconds));
    let mut db =
        Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
    db.metadata.namespace = Some("shop".into());
    db.metadata.creation_timestamp = Some(ago(7_200));
    db.spec.backup =
        Some(Box::new(BackupSchedule { schedule: "0 * * * *".into(), keep: None, bucket: None, verify: Some(true) }));
    let ready = Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "DeploymentReady".into(),
        message: String::new(),
        last_transition_time: ago(7_000),
        observed_generation: None,
    };
    db.status = Some(DatabaseStatus { conditions: vec![ready], ..Default::default() });
    let mut backup = api::backup("orders-1", "orders");
    backup.metadata.namespace = Some("shop".into());
    backup.metadata.creation_timestamp = Some(ago(3_600));
    let verified = Verification {
        result: Some(VerificationResult::Passed),
        start_time: Some(ago(3_500)),
        time: Some(ago(3_400)),
        restore_seconds: Some(42),
        count: Some(1_000),
        message: None,
    };
    backup.status = Some(BackupStatus {
        phase: Some(BackupPhase::Completed),
        start_time: Some(ago(3_600)),
        completion_time: Some(ago(3_540)),
        size: Some(1 << 20),
        count: Some(1_000),
        verified: Some(verified),
        ..Default::default()
    });
    metrics.observe(Stores {
        databases: Store::from_objects([db]),
        backups: Store::from_objects([backup]).with_index(index::BY_DATABASE, Arc::new(index::by_database)),
    });

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, metrics.registry()).unwrap();
    let debug = format!("{:?}", metrics.registry());
    let mut families: BTreeSet<String> =
        debug.split("Descriptor { name: \"").skip(1).map(|rest| rest.split('"').next().unwrap().to_string()).collect();
    families
        .extend(text.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.split(' ').next()).map(str::to_string));
    assert!(families.len() > 10, "few families found; is the parsing right?\n{text}\n{debug}");
    (text, families)
}

#[tokio::test]
async fn every_metric_the_rules_and_the_dashboard_query_is_served_by_the_operator() {
    let (text, families) = scrape().await;
    let queries = queries::all();
    assert!(queries.len() > 15, "few queries found: {queries:?}");
    let mut problems = Vec::new();
    let mut used = BTreeMap::<String, usize>::new();
    for (place, expr) in &queries {
        let found = selectors(expr);
        if found.is_empty() {
            problems.push(format!("{place}: no metric in {expr:?}"));
        }
        for (name, labels) in found {
            *used.entry(name.clone()).or_default() += 1;
            if PROMETHEUS_OWN.contains(&name.as_str()) {
                continue;
            }
            let series = series_labels(&text, &name);
            // A counter's `_total`, a histogram's `_bucket`, `_sum` and `_count` are of the
            // family without the suffix.
            let family = ["_total", "_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix).filter(|base| families.contains(*base)))
                .unwrap_or(&name);
            if series.is_empty() && !families.contains(family) {
                problems.push(format!("{place}: {name} is not served by the operator"));
                continue;
            }
            if name.starts_with("database_") && series.is_empty() {
                problems.push(format!("{place}: {name} has no series with a Database and a backup in the caches"));
            }
            for label in &labels {
                if !series.is_empty()
                    && !TARGET_LABELS.contains(&label.as_str())
                    && !series.iter().all(|s| s.contains(label))
                {
                    problems.push(format!("{place}: {name} is matched on {label:?}, a label it does not have"));
                }
            }
        }
    }
    // The per-Database families the dashboard shows: every one of them.
    for (name, ..) in
        text.lines().filter_map(|line| line.strip_prefix("# TYPE database_")).map(|rest| rest.split_once(' ').unwrap())
    {
        if !used.contains_key(&format!("database_{name}")) {
            problems.push(format!("database_{name} is served but neither the rules nor the dashboard use it"));
        }
    }
    assert!(
        problems.is_empty(),
        "the queries and the operator's metrics disagree:\n  {}\n\nserved:\n{text}",
        problems.join("\n  ")
    );
}
