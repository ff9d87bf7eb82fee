//! Several instances of one Database (`spec.instances`): a primary and streaming replicas,
//! and what the status says of each.
//!
//! Instance 1 is the Database's own Deployment and claim (`<name>`, `<name>-data`), as a
//! Database of one instance always had them; instance `i` of 2 and more is
//! `<name>-instance-<i>` with claim `<name>-instance-<i>-data`. Only postgres replicates, and
//! the number is fixed between one and several when the Database is created (the CRD's rules
//! say so at `kubectl apply`).
//!
//! Replication is asynchronous unless `spec.replication.synchronous` says otherwise: then
//! the primary acknowledges a commit only once a replica has flushed it ([`Replication`]).
//!
//! **Which instance is the primary** is recorded in one place, the Database's annotation
//! [`PRIMARY_ANNOTATION`] (instance 1 while it is absent). The operator writes it on a
//! failover, `kubectl database switchover` on a switchover, and nothing else does; every
//! instance's Deployment follows it. It is an annotation, not a status field, because every
//! pass writes the status from what it saw, and a pass that saw an older Database would write
//! the older primary back; no pass writes the annotation but the one that decides a change.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Database, EngineKind};

/// The most instances a Database may have.
pub const MAX_INSTANCES: i32 = 9;

/// The annotation of a Database of several instances that names the instance that is to be
/// its primary.
pub const PRIMARY_ANNOTATION: &str = "example.com/primary";

/// How long a primary stays not ready before a replica is promoted, unless
/// `spec.replication.failoverDelaySeconds` says otherwise.
pub const DEFAULT_FAILOVER_DELAY_SECONDS: i32 = 30;

/// The number of instances `db` wants: `spec.instances`, or one.
pub fn instances(db: &Database) -> i32 {
    db.spec.instances.unwrap_or(1)
}

/// Whether `db` runs a primary and replicas (postgres with `spec.instances` above one).
pub fn replicated(db: &Database) -> bool {
    instances(db) > 1 && db.spec.engine == Some(EngineKind::Postgres)
}

/// How the replicas of a Database of several instances follow its primary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct Replication {
    /// Whether a commit waits for a replica: true, the primary acknowledges a commit only once
    /// at least one replica has flushed it (postgres's synchronous_standby_names "ANY 1 (*)"),
    /// so an acknowledged write survives the loss of the primary, and writes wait while no
    /// replica follows; false (the default), replicas follow as fast as they can and a write
    /// acknowledged just before the primary is lost may be missing from them. Changing it
    /// restarts the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronous: Option<bool>,

    /// How many seconds the primary may stay not ready (its pod failing, or its node no longer
    /// reporting) before the replica furthest ahead is promoted in its place: 30 unless set.
    /// A primary that takes longer than this to start is failed over too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 3600))]
    pub failover_delay_seconds: Option<i32>,
}

/// Whether `db`'s primary waits for a replica at each commit (`spec.replication.synchronous`).
pub fn synchronous(db: &Database) -> bool {
    replicated(db) && db.spec.replication.as_ref().and_then(|r| r.synchronous).unwrap_or(false)
}

/// How long `db`'s primary may stay not ready before a replica is promoted.
pub fn failover_delay(db: &Database) -> std::time::Duration {
    let seconds = db.spec.replication.as_ref().and_then(|r| r.failover_delay_seconds);
    std::time::Duration::from_secs(seconds.unwrap_or(DEFAULT_FAILOVER_DELAY_SECONDS).max(0).unsigned_abs().into())
}

/// The ordinal of the instance that is to be `db`'s primary: the one its
/// [`PRIMARY_ANNOTATION`] names, instance 1 without it.
///
/// # Errors
///
/// The annotation's value, when it names no instance of `db`.
pub fn primary_ordinal(db: &Database) -> Result<i32, String> {
    let Some(named) = db.metadata.annotations.as_ref().and_then(|a| a.get(PRIMARY_ANNOTATION)) else { return Ok(1) };
    (1..=instances(db)).find(|&ordinal| instance_name(db, ordinal) == *named).ok_or_else(|| named.clone())
}

/// The name of instance `ordinal` (from 1) of `db`: the Database's own name for the first,
/// `<name>-instance-<ordinal>` for the others. Its claim is `<instance>-data`.
pub fn instance_name(db: &Database, ordinal: i32) -> String {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    if ordinal == 1 { name.to_string() } else { format!("{name}-instance-{ordinal}") }
}

/// What an instance is to the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Role {
    /// It accepts writes: the -rw Service's and the Database's Service's.
    Primary,
    /// It streams the primary's WAL and serves reads: the -ro Service's.
    Replica,
}

impl Role {
    /// The role as its pods' label says it: `primary` or `replica`.
    pub fn label(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        }
    }
}

/// One instance of a Database, as the operator last saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct InstanceStatus {
    /// The instance's name: its Deployment's; its claim is "<name>-data".
    #[schemars(length(max = 253))]
    pub name: String,

    /// Primary (accepts writes) or Replica (streams the primary's WAL, serves reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,

    /// Whether the instance's server is ready (its Deployment's pod passes its readiness
    /// probe; a replica is ready once it serves reads).
    pub ready: bool,

    /// The timeline the instance is on, as it last told the operator (1 until a replica is
    /// first promoted); absent while it cannot be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<i64>,

    /// A replica's lag: the bytes of WAL its primary has flushed and it has not received
    /// (0: caught up), as both last told the operator; absent while either cannot be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_bytes: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DatabaseSpec, Size};

    #[test]
    fn the_first_instance_is_the_database_itself_and_the_others_are_numbered() {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
        assert_eq!((instances(&db), replicated(&db)), (1, false));
        db.spec.instances = Some(3);
        assert!(!replicated(&db), "a generic Database does not replicate");
        db.spec.engine = Some(EngineKind::Postgres);
        assert!(replicated(&db));
        assert_eq!(instance_name(&db, 1), "orders");
        assert_eq!(instance_name(&db, 3), "orders-instance-3");
    }

    #[test]
    fn the_primary_is_the_instance_the_annotation_names_and_instance_1_without_it() {
        let mut spec = DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres);
        spec.instances = Some(3);
        let mut db = Database::new("orders", spec);
        assert_eq!(primary_ordinal(&db), Ok(1));
        let annotate = |db: &mut Database, name: &str| {
            db.metadata.annotations = Some([(PRIMARY_ANNOTATION.to_string(), name.to_string())].into());
        };
        annotate(&mut db, "orders-instance-3");
        assert_eq!(primary_ordinal(&db), Ok(3));
        annotate(&mut db, "orders");
        assert_eq!(primary_ordinal(&db), Ok(1));
        annotate(&mut db, "orders-instance-4");
        assert_eq!(primary_ordinal(&db), Err("orders-instance-4".to_string()));
        assert_eq!(failover_delay(&db).as_secs(), 30);
    }
}
