//! The engine of a Database: `spec.engine`. What the operator knows of each engine's image is
//! `crate::engine`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The database engine of a Database's image. One of:
/// - postgres: the official postgres image (port 5432).
/// - mysql: the official mysql image (port 3306).
/// - mariadb: the official mariadb image (port 3306).
/// - redis: the official redis image (port 6379).
///
/// Without an engine the Database is generic: the image runs as given, on port 8080 (http),
/// without a volume, credentials or probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// The official postgres image.
    Postgres,
    /// The official mysql image.
    Mysql,
    /// The official mariadb image.
    Mariadb,
    /// The official redis image.
    Redis,
}

/// Whether major version `a` is newer than `b`, compared number by number ("17" > "15",
/// "8.4" > "8.0", "11.10" > "11.8").
pub fn newer_major(a: &str, b: &str) -> bool {
    let numbers = |v: &str| v.split('.').map(|n| n.parse::<u64>().unwrap_or(0)).collect::<Vec<_>>();
    numbers(a) > numbers(b)
}

impl EngineKind {
    /// Every engine.
    pub const ALL: [EngineKind; 4] = [EngineKind::Postgres, EngineKind::Mysql, EngineKind::Mariadb, EngineKind::Redis];
}
