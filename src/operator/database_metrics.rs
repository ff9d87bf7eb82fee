//! The Databases' health on `/metrics`: per Database, whether it is Ready, its schedule's period,
//! and what its newest backups and verifications say (when the last one completed, how long it
//! took, how big it is, whether it restored), for alerts and dashboards.
//!
//! - **Computed at scrape time** from the informers' caches the controllers already keep (the
//!   Databases and the DatabaseBackups, [`Stores`]): a scrape makes no API request, and no
//!   event does any bookkeeping for it, so an unscraped operator pays nothing. A scrape reads
//!   each store as one snapshot, but not both as one: a backup written between the two reads
//!   shows at the next scrape. A scrape costs, per Database, a lookup of its backups in the
//!   cache's index and eight times of its schedule (`crate::database::schedule::period`).
//! - **Bounded labels**: `namespace` and `database`, nothing else, so the series are at most
//!   a dozen per Database that exists; a Database deleted from the cache loses its series at the
//!   next scrape. A backup's name is never a label (scheduled backups come and go).
//! - **A fact unknown is a series absent**: a Database that never completed a backup has no
//!   `database_backup_last_completion_timestamp_seconds`, one without a schedule no period.
//!   `database_created_timestamp_seconds` lets a rule judge a never-completed backup from the
//!   Database's age instead.
//! - **Whose backups**: those whose `spec.database` names the Database, in its namespace,
//!   created no earlier than it: a backup of an earlier Database of the same name is not this
//!   one's, and must not hide that this one has none.
//! - Before the stores are attached ([`Collector::observe`], once the informers are built) the
//!   families are described and have no series.
//!
//! Every family is a gauge, described in README.md's metrics table (which `tests/docs.rs`
//! checks against the registry).

use std::sync::{Arc, OnceLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operator_runtime::informer::{Store, key_of};
use prometheus_client::collector::Collector as PrometheusCollector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::api::{BackupPhase, Database, DatabaseBackup, VerificationResult, index};
use crate::database::schedule;

/// The caches the collector reads: the ones the controllers share.
#[derive(Clone, Debug)]
pub struct Stores {
    /// The Databases.
    pub databases: Store<Database>,
    /// The DatabaseBackups, indexed by [`index::BY_DATABASE`].
    pub backups: Store<DatabaseBackup>,
}

/// The per-Database families, registered once and fed the stores later (the registry is made
/// before the informers, which report into it).
#[derive(Debug, Default)]
pub struct Collector {
    stores: OnceLock<Stores>,
}

/// Each family: its name, its help, and how one Database's value is read from its [`Facts`].
type Family = (&'static str, &'static str, fn(&Facts) -> Option<i64>);

/// The families, in the order they are served.
const FAMILIES: [Family; 10] = [
    ("database_created_timestamp_seconds", "When the Database was created (Unix seconds)", |f| f.created),
    ("database_ready", "1 while the Database's Ready condition is True, else 0", |f| Some(f.ready)),
    (
        "database_backup_schedule_period_seconds",
        "The longest gap between the next times of spec.backup.schedule (seconds)",
        |f| f.period,
    ),
    (
        "database_backup_last_completion_timestamp_seconds",
        "When the Database's newest Completed backup completed (Unix seconds)",
        |f| f.completed.as_ref().map(|c| c.time),
    ),
    (
        "database_backup_last_duration_seconds",
        "How long the newest Completed backup took, start to completion (seconds)",
        |f| f.completed.as_ref().and_then(|c| c.duration),
    ),
    (
        "database_backup_last_size_bytes",
        "The size of the newest Completed backup in its bucket, compressed (bytes)",
        |f| f.completed.as_ref().and_then(|c| c.size),
    ),
    ("database_backup_last_count", "The rows or keys the newest Completed backup's dump holds", |f| {
        f.completed.as_ref().and_then(|c| c.count)
    }),
    (
        "database_backup_last_verification_timestamp_seconds",
        "When the newest verification that Passed ended (Unix seconds)",
        |f| f.verified,
    ),
    (
        "database_backup_verification_failed",
        "1 when the newest finished verification of the Database's backups Failed, else 0",
        |f| Some(f.verification_failed),
    ),
    (
        "database_restore_last_duration_seconds",
        "How long the newest verification's restore took, creation to Ready (seconds)",
        |f| f.restore_seconds,
    ),
];

impl Collector {
    /// Serves the Databases of `stores` from now on.
    ///
    /// # Panics
    ///
    /// When called twice: one registry serves one operator's caches.
    pub fn observe(&self, stores: Stores) {
        assert!(self.stores.set(stores).is_ok(), "the per-Database metrics observe one pair of stores");
    }

    /// What each Database's series say now, sorted by namespace and name.
    fn facts(&self, now: &Time) -> Vec<Facts> {
        let Some(stores) = self.stores.get() else { return Vec::new() };
        let mut databases = stores.databases.list();
        databases
            .sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        databases.iter().map(|db| Facts::of(db, &stores.backups, now)).collect()
    }
}

impl PrometheusCollector for Collector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let facts = self.facts(&Time(k8s_openapi::jiff::Timestamp::now()));
        for (name, help, value) in FAMILIES {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for database in &facts {
                if let Some(value) = value(database) {
                    let labels = [("namespace", database.namespace.as_str()), ("database", database.name.as_str())];
                    ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

/// One Database's values.
#[derive(Debug, Default, PartialEq, Eq)]
struct Facts {
    namespace: String,
    name: String,
    created: Option<i64>,
    ready: i64,
    period: Option<i64>,
    completed: Option<Completed>,
    verified: Option<i64>,
    verification_failed: i64,
    restore_seconds: Option<i64>,
}

/// The newest Completed backup.
#[derive(Debug, PartialEq, Eq)]
struct Completed {
    time: i64,
    duration: Option<i64>,
    size: Option<i64>,
    count: Option<i64>,
}

impl Facts {
    fn of(db: &Database, backups: &Store<DatabaseBackup>, now: &Time) -> Self {
        let created = db.metadata.creation_timestamp.as_ref();
        let seconds = |t: &Time| t.0.as_second();
        // Its own: not a backup of an earlier Database of the same name.
        let own: Vec<_> = backups
            .by_index(index::BY_DATABASE, &key_of(db))
            .into_iter()
            .filter(|b| match (created, &b.metadata.creation_timestamp) {
                (Some(db), Some(backup)) => backup.0 >= db.0,
                _ => true,
            })
            .collect();
        let status = |b: &DatabaseBackup| b.status.clone().unwrap_or_default();
        let completed = own
            .iter()
            .map(|b| status(b))
            .filter(|s| s.phase == Some(BackupPhase::Completed))
            .filter_map(|s| Some((s.completion_time.clone()?, s)))
            .max_by_key(|(time, _)| time.0)
            .map(|(time, s)| Completed {
                time: seconds(&time),
                duration: s.start_time.as_ref().map(|start| seconds(&time) - seconds(start)),
                size: s.size,
                count: s.count,
            });
        // Finished verifications, newest last.
        let mut verifications: Vec<_> = own
            .iter()
            .filter_map(|b| b.status.as_ref()?.verified.clone())
            .filter_map(|v| Some((v.time.clone()?.0, v.result?, v.restore_seconds)))
            .collect();
        verifications.sort_by_key(|(time, ..)| *time);
        let ready =
            db.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        Self {
            namespace: db.metadata.namespace.clone().unwrap_or_default(),
            name: db.metadata.name.clone().unwrap_or_default(),
            created: created.map(seconds),
            ready: ready.into(),
            period: schedule::period(db, now).map(|p| i64::try_from(p.as_secs()).unwrap_or(i64::MAX)),
            completed,
            verified: verifications
                .iter()
                .rev()
                .find(|(_, result, _)| *result == VerificationResult::Passed)
                .map(|(time, ..)| time.as_second()),
            verification_failed: verifications.last().is_some_and(|(_, r, _)| *r == VerificationResult::Failed).into(),
            restore_seconds: verifications.iter().rev().find_map(|(.., restore)| *restore),
        }
    }
}

/// A collector to register: shared, so that the operator attaches the stores after the
/// registry took it.
pub(super) fn register(registry: &mut prometheus_client::registry::Registry) -> Arc<Collector> {
    let collector = Arc::new(Collector::default());
    registry.register_collector(Box::new(collector.clone()));
    collector
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BackupSchedule, BackupStatus, DatabaseSpec, DatabaseStatus, EngineKind, Size, Verification};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use prometheus_client::registry::Registry;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::UNIX_EPOCH + SignedDuration::from_secs(seconds))
    }

    fn database(namespace: &str, name: &str, created: i64, ready: bool) -> Database {
        let mut db =
            Database::new(name, DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
        db.metadata.namespace = Some(namespace.into());
        db.metadata.creation_timestamp = Some(at(created));
        let status = if ready { "True" } else { "False" };
        let condition = Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: "Test".into(),
            message: String::new(),
            last_transition_time: at(created),
            observed_generation: None,
        };
        db.status = Some(DatabaseStatus { conditions: vec![condition], ..Default::default() });
        db
    }

    fn backup(name: &str, of: &Database, created: i64, status: BackupStatus) -> DatabaseBackup {
        let mut backup = crate::api::backup(name, of.metadata.name.as_deref().unwrap());
        backup.metadata.namespace = of.metadata.namespace.clone();
        backup.metadata.creation_timestamp = Some(at(created));
        backup.status = Some(status);
        backup
    }

    fn completed(start: i64, end: i64) -> BackupStatus {
        BackupStatus {
            phase: Some(BackupPhase::Completed),
            start_time: Some(at(start)),
            completion_time: Some(at(end)),
            ..Default::default()
        }
    }

    fn verified(status: BackupStatus, result: VerificationResult, time: i64, restore: Option<i64>) -> BackupStatus {
        let verification =
            Verification { result: Some(result), time: Some(at(time)), restore_seconds: restore, ..Default::default() };
        BackupStatus { verified: Some(verification), ..status }
    }

    /// The collector over these objects, observed.
    fn collector(databases: Vec<Database>, backups: Vec<DatabaseBackup>) -> Arc<Collector> {
        let mut registry = Registry::default();
        let collector = register(&mut registry);
        collector.observe(Stores {
            databases: Store::from_objects(databases),
            backups: Store::from_objects(backups).with_index(index::BY_DATABASE, Arc::new(index::by_database)),
        });
        collector
    }

    /// The text `/metrics` serves for `collector`.
    fn scrape(collector: &Arc<Collector>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    /// The samples of `family` in `text`, as (labels, value).
    fn samples<'a>(text: &'a str, family: &str) -> Vec<(&'a str, &'a str)> {
        text.lines()
            .filter_map(|line| line.strip_prefix(family)?.strip_prefix('{'))
            .map(|rest| rest.split_once("} ").unwrap())
            .collect()
    }

    #[test]
    fn a_database_s_series_come_from_its_newest_completed_backup_and_its_newest_verification() {
        let mut db = database("shop", "orders", 100, true);
        db.spec.backup =
            Some(Box::new(BackupSchedule { schedule: "0 * * * *".into(), keep: None, bucket: None, verify: None }));
        let older = verified(completed(1_000, 1_060), VerificationResult::Passed, 1_200, Some(30));
        let mut newer = verified(completed(4_600, 4_690), VerificationResult::Failed, 4_800, Some(45));
        newer.size = Some(2_048);
        newer.count = Some(17);
        let running =
            BackupStatus { phase: Some(BackupPhase::Running), start_time: Some(at(8_200)), ..Default::default() };
        let failed = BackupStatus { phase: Some(BackupPhase::Failed), ..Default::default() };
        let backups = vec![
            backup("orders-1", &db, 1_000, older),
            backup("orders-2", &db, 4_600, newer),
            backup("orders-3", &db, 8_200, running),
            backup("orders-4", &db, 7_000, failed),
        ];
        let facts = collector(vec![db], backups).facts(&at(9_000));
        let expected = Facts {
            namespace: "shop".into(),
            name: "orders".into(),
            created: Some(100),
            ready: 1,
            period: Some(3_600),
            completed: Some(Completed { time: 4_690, duration: Some(90), size: Some(2_048), count: Some(17) }),
            verified: Some(1_200),
            verification_failed: 1,
            restore_seconds: Some(45),
        };
        assert_eq!(facts, [expected]);
    }

    #[test]
    fn a_database_with_no_backup_has_its_age_and_readiness_and_no_backup_series() {
        let text = scrape(&collector(vec![database("shop", "orders", 100, false)], Vec::new()));
        let labels = r#"namespace="shop",database="orders""#;
        assert_eq!(samples(&text, "database_created_timestamp_seconds"), [(labels, "100")]);
        assert_eq!(samples(&text, "database_ready"), [(labels, "0")]);
        assert_eq!(samples(&text, "database_backup_verification_failed"), [(labels, "0")]);
        for (family, ..) in FAMILIES.iter().skip(3).filter(|(name, ..)| *name != "database_backup_verification_failed")
        {
            assert_eq!(samples(&text, family), [], "{family}: no backup, no series");
        }
        assert_eq!(samples(&text, "database_backup_schedule_period_seconds"), [], "no schedule, no period");
    }

    #[test]
    fn a_backup_of_an_earlier_database_of_the_same_name_is_not_this_one_s() {
        let earlier = database("shop", "orders", 100, true);
        let old = backup("orders-old", &earlier, 1_000, completed(1_000, 1_010));
        let now = database("shop", "orders", 5_000, true);
        let facts = collector(vec![now], vec![old]).facts(&at(9_000));
        assert_eq!(facts[0].completed, None, "the earlier Database's backup counted");
    }

    #[test]
    fn only_existing_databases_have_series_labelled_by_namespace_and_name_alone() {
        let orders = database("shop", "orders", 100, true);
        let gone = database("shop", "gone", 100, true);
        let other = database("billing", "orders", 100, true);
        let backups = vec![
            backup("orders-1", &orders, 1_000, completed(1_000, 1_010)),
            backup("gone-1", &gone, 1_000, completed(1_000, 1_010)),
            backup("orders-1", &other, 1_000, completed(1_000, 1_020)),
        ];
        // `gone` was deleted: its backups are still cached (their deletion follows), it is not.
        let text = scrape(&collector(vec![orders, other], backups));
        let completion = samples(&text, "database_backup_last_completion_timestamp_seconds");
        let expected =
            [(r#"namespace="billing",database="orders""#, "1020"), (r#"namespace="shop",database="orders""#, "1010")];
        assert_eq!(completion, expected);
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            let labels = line.split_once('{').and_then(|(_, rest)| rest.split_once('}')).map(|(labels, _)| labels);
            let names: Vec<&str> = labels.unwrap().split(',').map(|label| label.split('=').next().unwrap()).collect();
            assert_eq!(names, ["namespace", "database"], "{line}");
        }
    }

    #[test]
    fn before_the_stores_are_observed_every_family_is_described_and_has_no_series() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for (family, ..) in FAMILIES {
            assert!(text.contains(&format!("# TYPE {family} gauge\n")), "{family} not described:\n{text}");
            assert_eq!(samples(&text, family), [], "{family}");
        }
    }
}
