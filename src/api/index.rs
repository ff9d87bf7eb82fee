//! The indices the controllers look objects up by in the shared caches, as client-go's
//! `cache.Indexers` do: each maps an object to the keys it is found under.

use super::{Database, DatabaseBackup};

/// The index of DatabaseBackups by the `namespace/name` of their Database.
pub const BY_DATABASE: &str = "database";

/// The [`BY_DATABASE`] index function.
pub fn by_database(backup: &DatabaseBackup) -> Vec<String> {
    vec![format!("{}/{}", backup.metadata.namespace.as_deref().unwrap_or_default(), backup.spec.database)]
}

/// The index of Databases by the `namespace/name` of the backup they are restored from.
pub const BY_RESTORE_SOURCE: &str = "restore-from";

/// The [`BY_RESTORE_SOURCE`] index function.
pub fn by_restore_source(db: &Database) -> Vec<String> {
    db.spec
        .restore_from
        .iter()
        .map(|from| format!("{}/{}", db.metadata.namespace.as_deref().unwrap_or_default(), from.backup))
        .collect()
}
