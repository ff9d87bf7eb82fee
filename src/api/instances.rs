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

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Database, EngineKind};

/// The most instances a Database may have.
pub const MAX_INSTANCES: i32 = 9;

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
}

/// Whether `db`'s primary waits for a replica at each commit (`spec.replication.synchronous`).
pub fn synchronous(db: &Database) -> bool {
    replicated(db) && db.spec.replication.as_ref().and_then(|r| r.synchronous).unwrap_or(false)
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
}
