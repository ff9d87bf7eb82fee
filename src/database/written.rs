//! The status this process wrote that the Database cache has not shown yet.
//!
//! A reconcile writes a Database's status, and the write comes back through the watch a few
//! milliseconds later. A second reconcile of the same Database in between (a Database a user
//! created: its new Deployment's Added event queues it at normal priority, and with nothing
//! else waiting it runs at once) would read the old status from the cache, see it differ from the wanted one, and write the same status again: one
//! request per Database that the apiserver finds unchanged (docs/benchmarks.md, round 12).
//!
//! The record keeps, per Database key, the status written, the resourceVersion the write
//! produced, and the resourceVersions the cache may still show from before it (the one the
//! write was computed from, and those of earlier writes of ours). While the cache shows one of
//! those, the reconcile reads the Database with the status it wrote ([`Written::catch_up`]).
//! When the cache shows the written resourceVersion it has caught up; when it shows any other
//! (somebody else's change, say) it knows something this process does not: either way the entry
//! is dropped and the cache is the truth again. Only equality is compared, as a
//! resourceVersion is opaque. A wrong guess costs at most one write the apiserver finds
//! unchanged; the watch event still to come queues the Database again.
//!
//! An entry lives from a status write until the reconcile that finds the cache caught up (the
//! write's own watch event queues it), or until the Database is gone. Clones share the record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Database, DatabaseStatus};

/// Statuses written and not yet seen in the cache, by Database key.
#[derive(Clone, Debug, Default)]
pub(super) struct Written(Arc<Mutex<HashMap<String, Entry>>>);

#[derive(Debug)]
struct Entry {
    /// resourceVersions of the Database from before the last write.
    before: Vec<String>,
    /// The resourceVersion the last write produced.
    written: Option<String>,
    status: DatabaseStatus,
}

impl Written {
    /// `db` as the reconcile should read it: with the status this process wrote while the cache
    /// shows the Database from before that write; `db` itself otherwise (and the entry is gone).
    pub(super) fn catch_up(&self, key: &str, db: Arc<Database>) -> Arc<Database> {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = written.get(key) else { return db };
        let cached = db.metadata.resource_version.as_ref();
        if cached.is_some_and(|version| entry.before.contains(version)) {
            return Arc::new(Database { status: Some(entry.status.clone()), ..Database::clone(&db) });
        }
        written.remove(key);
        db
    }

    /// The reconcile of `read` (as [`Written::catch_up`] returned it) wrote `status`, which
    /// the apiserver stored as `stored` (the object it answered with).
    pub(super) fn wrote(&self, key: &str, read: &Database, status: &DatabaseStatus, stored: &Database) {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut before: Vec<String> =
            written.remove(key).map(|e| e.before.into_iter().chain(e.written).collect()).unwrap_or_default();
        if let Some(version) = &read.metadata.resource_version
            && !before.contains(version)
        {
            before.push(version.clone());
        }
        let entry = Entry { before, written: stored.metadata.resource_version.clone(), status: status.clone() };
        written.insert(key.to_string(), entry);
    }

    /// The Database `key` is gone.
    pub(super) fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }

    #[cfg(test)]
    /// How many Databases have a write the cache has not shown yet (as far as this record
    /// knows: an entry leaves at the Database's next reconcile).
    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    #[cfg(test)]
    /// Whether no write is waiting for the cache.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::{DatabaseSpec, Size};
    use kube_core::ObjectMeta;

    fn database(resource_version: &str, image: Option<&str>) -> Arc<Database> {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
        db.metadata =
            ObjectMeta { namespace: Some("ns".into()), resource_version: Some(resource_version.into()), ..db.metadata };
        db.status = image.map(|image| DatabaseStatus { current_image: Some(image.into()), ..Default::default() });
        Arc::new(db)
    }

    fn image(db: &Database) -> Option<&str> {
        db.status.as_ref().and_then(|s| s.current_image.as_deref())
    }

    fn status(image: &str) -> DatabaseStatus {
        DatabaseStatus { current_image: Some(image.into()), ..Default::default() }
    }

    #[test]
    fn a_cache_that_has_not_seen_the_write_is_read_with_the_status_written() {
        let written = Written::default();
        written.wrote("ns/orders", &database("10", None), &status("written"), &database("11", Some("written")));
        let seen = written.catch_up("ns/orders", database("10", None));
        assert_eq!(image(&seen), Some("written"));
        assert_eq!(seen.metadata.resource_version.as_deref(), Some("10"), "only the status is replaced");
        assert_eq!(written.len(), 1, "kept until the cache moves");
        assert_eq!(image(&written.catch_up("ns/other", database("10", None))), None, "other keys untouched");
    }

    #[test]
    fn the_cache_is_the_truth_once_it_shows_the_write_or_any_other_change() {
        let written = Written::default();
        written.wrote("ns/orders", &database("10", None), &status("written"), &database("11", Some("written")));
        assert_eq!(image(&written.catch_up("ns/orders", database("11", Some("written")))), Some("written"));
        assert!(written.is_empty(), "caught up");
        written.wrote("ns/orders", &database("11", None), &status("again"), &database("13", Some("again")));
        let seen = written.catch_up("ns/orders", database("12", Some("someone else's")));
        assert_eq!(image(&seen), Some("someone else's"), "a change this process did not make");
        assert!(written.is_empty());
        assert_eq!(image(&written.catch_up("ns/orders", database("11", None))), None, "the entry is gone");
    }

    #[test]
    fn a_second_write_before_the_cache_caught_up_keeps_the_first_writes_version_stale() {
        let written = Written::default();
        written.wrote("ns/orders", &database("10", None), &status("first"), &database("11", Some("first")));
        let read = written.catch_up("ns/orders", database("10", None));
        written.wrote("ns/orders", &read, &status("second"), &database("12", Some("second")));
        // The cache now shows our first write: still behind the second.
        assert_eq!(image(&written.catch_up("ns/orders", database("11", Some("first")))), Some("second"));
        assert_eq!(image(&written.catch_up("ns/orders", database("10", None))), Some("second"));
        assert_eq!(image(&written.catch_up("ns/orders", database("12", Some("second")))), Some("second"));
        assert!(written.is_empty());
    }

    #[test]
    fn a_gone_database_leaves_no_entry() {
        let written = Written::default();
        written.wrote("ns/orders", &database("10", None), &DatabaseStatus::default(), &database("11", None));
        written.forget("ns/orders");
        assert!(written.is_empty());
    }
}
