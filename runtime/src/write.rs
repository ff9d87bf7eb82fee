//! The writes every controller makes, in one place: controller-runtime's `CreateOrUpdate`,
//! done with server-side apply and a cache of views.
//!
//! - [`Writer::create`]: a POST as the field manager, once; an object that holds the name
//!   already is an outcome ([`Created::Existed`], with its metadata), not an error. For what
//!   must never be overwritten (a Secret with a generated password, a Job).
//! - [`Writer::ensure`]: brings an object to what the controller wants, writing only when its
//!   cached view lacks a wanted field ([`crate::drift`]). An object missing from the cache
//!   (which may be filtered by a label selector, so a foreign object is invisible) is written
//!   create-only: a server-side apply carrying `resourceVersion: "1"`, a precondition no stored
//!   object meets (etcd's first write is revision 2). The apiserver creates the object when the
//!   name is free and answers 409 Conflict when anything holds it; the writer then reads that
//!   object and asks the caller whether it is its own ([`Ensured::Foreign`] otherwise). A
//!   create-only apply keeps server-side apply's ownership, so a field the controller stops
//!   setting later is removed; a plain create would leave it owned by an `Update` entry.
//! - [`Writer::apply_status`]: the status subresource by server-side apply, forced: the
//!   controller owns its status.
//! - [`Statuses`]: the statuses this process wrote that the cache has not shown yet, so a
//!   reconcile that runs before the write's watch event reads what was written, not what was
//!   there before, and does not write it again; and the write's own watch event (its echo)
//!   queues no reconcile ([`Statuses::echo`], wired by the controller's
//!   [`Builder::own_statuses`](crate::controller::Builder::own_statuses)).
//! - [`refusal`]: an answer that says the object itself cannot be written (invalid, or refused
//!   by a quota): retrying the same object cannot help, so a controller reports it instead.
//!
//! Every apply is forced: a controller's own objects are its own, and a `kubectl edit` of a
//! field it sets is drift to undo, not a conflict to report.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use kube_core::{ObjectMeta, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::drift;
use crate::informer::key_of;

/// The resourceVersion of a create-only apply: no stored object has it.
const NO_STORED_OBJECT: &str = "1";

/// A namespaced object a [`Writer`] can write.
pub trait Object:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope> + Clone + Debug + Serialize + DeserializeOwned
{
}

impl<T> Object for T where
    T: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
{
}

/// What [`Writer::create`] found.
#[derive(Debug)]
pub enum Created {
    /// The object was created.
    New,
    /// An object held the name already; its metadata (its owner tells whose it is).
    Existed(Box<ObjectMeta>),
}

/// What the write of one object did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wrote {
    /// Nothing differed; nothing was written.
    Nothing,
    /// The object was created.
    Created,
    /// The object was brought back to what the controller wants; the first field that
    /// differed, as [`drift::difference`] names it.
    Updated(String),
}

/// What [`Writer::ensure`] did.
#[derive(Debug)]
pub enum Ensured<V> {
    /// The object as written (or as it was, when nothing differed), read as a view.
    Written(Arc<V>, Wrote),
    /// The name is held by an object that is not the caller's: nothing was written.
    Foreign,
}

/// Why the apiserver refuses an object for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A ResourceQuota of the namespace refuses it (403, "exceeded quota"): the quota's
    /// own words.
    Quota(String),
    /// It is invalid (400 or 422: it passed the caller's checks but not the apiserver's):
    /// the apiserver's words.
    Invalid(String),
}

/// The refusal in `error`, if the apiserver refused the object itself.
pub fn refusal(error: &kube_client::Error) -> Option<Refusal> {
    let kube_client::Error::Api(status) = error else { return None };
    if status.code == 403 && status.message.contains("exceeded quota") {
        Some(Refusal::Quota(status.message.clone()))
    } else if status.code == 400 || status.code == 422 {
        Some(Refusal::Invalid(status.message.clone()))
    } else {
        None
    }
}

/// Writes objects as one field manager.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    manager: &'static str,
}

impl Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("manager", &self.manager).finish_non_exhaustive()
    }
}

impl Writer {
    /// A writer through `client`, as the field manager `manager`.
    pub fn new(client: Client, manager: &'static str) -> Self {
        Self { client, manager }
    }

    /// The client it writes with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn api<T: Object>(&self, namespace: Option<&str>) -> Api<T> {
        Api::namespaced(self.client.clone(), namespace.unwrap_or_default())
    }

    fn apply(&self) -> PatchParams {
        PatchParams::apply(self.manager).force()
    }

    /// Creates `object`, or finds the object that holds its name.
    ///
    /// # Errors
    ///
    /// The client's error, when the create fails otherwise (or the read of the existing one).
    pub async fn create<T: Object>(&self, object: &T) -> Result<Created, kube_client::Error> {
        let api: Api<T> = self.api(object.meta().namespace.as_deref());
        let params = PostParams { field_manager: Some(self.manager.into()), ..Default::default() };
        match api.create(&params, object).await {
            Ok(_) => Ok(Created::New),
            Err(kube_client::Error::Api(status)) if status.is_already_exists() => {
                let name = object.meta().name.as_deref().unwrap_or_default();
                let existing = api.get_metadata(name).await?;
                Ok(Created::Existed(Box::new(existing.metadata)))
            }
            Err(error) => Err(error),
        }
    }

    /// Brings one object to `desired`, writing only when its cached view `live` lacks a wanted
    /// field; an object missing from the cache is written create-only, and one that holds the
    /// name already is written only if `ours` says it is the caller's.
    ///
    /// # Errors
    ///
    /// The client's error; [`refusal`] tells the ones that retrying cannot fix.
    pub async fn ensure<T, V>(
        &self,
        mut desired: T,
        live: Option<Arc<V>>,
        ours: impl Fn(&V) -> bool,
    ) -> Result<Ensured<V>, kube_client::Error>
    where
        T: Resource<DynamicType = ()> + Debug + Serialize,
        V: Object,
    {
        let kind = T::kind(&());
        let key = key_of(&desired);
        let api: Api<V> = self.api(desired.meta().namespace.as_deref());
        let name = desired.meta().name.clone().unwrap_or_default();
        let live = match live {
            Some(live) => live,
            None => {
                desired.meta_mut().resource_version = Some(NO_STORED_OBJECT.into());
                let created = api.patch(&name, &self.apply(), &Patch::Apply(&desired)).await;
                desired.meta_mut().resource_version = None;
                match created {
                    Ok(written) => {
                        tracing::info!(child = %key, reason = "Created", differed = "", "wrote {kind}");
                        return Ok(Ensured::Written(Arc::new(written), Wrote::Created));
                    }
                    Err(kube_client::Error::Api(status)) if status.is_conflict() => {
                        let existing = api.get(&name).await?;
                        if !ours(&existing) {
                            return Ok(Ensured::Foreign);
                        }
                        Arc::new(existing)
                    }
                    Err(error) => return Err(error),
                }
            }
        };
        // The field that differs: what the write repairs.
        let Some(field) = drift::difference(&desired, live.as_ref()) else {
            return Ok(Ensured::Written(live, Wrote::Nothing));
        };
        let written = api.patch(&name, &self.apply(), &Patch::Apply(&desired)).await?;
        tracing::info!(child = %key, reason = "Updated", differed = %field, "wrote {kind}");
        Ok(Ensured::Written(Arc::new(written), Wrote::Updated(field)))
    }

    /// Writes `status` as the status of `object`, by server-side apply; returns the object as
    /// the apiserver stored it.
    ///
    /// # Errors
    ///
    /// The client's error.
    pub async fn apply_status<K, S>(&self, object: &K, status: &S) -> Result<K, kube_client::Error>
    where
        K: Object,
        S: Serialize,
    {
        let api: Api<K> = self.api(object.meta().namespace.as_deref());
        let body = serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "status": status,
        });
        api.patch_status(object.meta().name.as_deref().unwrap_or_default(), &self.apply(), &Patch::Apply(&body)).await
    }
}

/// The statuses this process wrote that the cache has not shown yet, by object key.
///
/// A reconcile writes an object's status, and the write comes back through the watch a few
/// milliseconds later. A second reconcile in between would read the old status from the
/// cache, see it differ from the wanted one, and write the same status again: one request
/// that the apiserver finds unchanged.
///
/// The record keeps, per key, the status written, the resourceVersion the write produced, and
/// the resourceVersions the cache may still show from before it (the one the write was
/// computed from, and those of earlier writes of ours). While the cache shows one of those,
/// [`Statuses::catch_up`] returns the status written. When the cache shows the written
/// resourceVersion it has caught up; when it shows any other (somebody else's change) it knows
/// something this process does not: either way the entry is dropped and the cache is the
/// truth again. Only equality is compared, as a resourceVersion is opaque. A wrong guess costs
/// at most one write the apiserver finds unchanged; the watch event still to come queues the
/// object again.
///
/// An entry lives from a status write until the reconcile that finds the cache caught up, or
/// until the object is gone. Clones share the record.
#[derive(Debug)]
pub struct Statuses<S>(Arc<Mutex<HashMap<String, Entry<S>>>>);

impl<S> Clone for Statuses<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S> Default for Statuses<S> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

#[derive(Debug)]
struct Entry<S> {
    /// resourceVersions of the object from before the last write.
    before: Vec<String>,
    /// The resourceVersion the last write produced.
    written: Option<String>,
    status: S,
}

impl<S: Clone> Statuses<S> {
    /// The status a reconcile should read for the object `key` whose cached resourceVersion
    /// is `cached`: the one this process wrote, while the cache shows the object from before
    /// that write; `None` otherwise (the cache is the truth, and the entry is gone).
    pub fn catch_up(&self, key: &str, cached: Option<&str>) -> Option<S> {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = written.get(key)?;
        if cached.is_some_and(|version| entry.before.iter().any(|b| b == version)) {
            return Some(entry.status.clone());
        }
        written.remove(key);
        None
    }

    /// A reconcile that read the object `key` at resourceVersion `read` wrote `status`, which
    /// the apiserver stored at resourceVersion `stored`.
    pub fn wrote(&self, key: &str, read: Option<&str>, status: &S, stored: Option<&str>) {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut before: Vec<String> =
            written.remove(key).map(|e| e.before.into_iter().chain(e.written).collect()).unwrap_or_default();
        if let Some(version) = read
            && !before.iter().any(|b| b == version)
        {
            before.push(version.to_string());
        }
        let entry = Entry { before, written: stored.map(str::to_string), status: status.clone() };
        written.insert(key.to_string(), entry);
    }

    /// Whether the cache's update of the object `key` from resourceVersion `old` to `new` is
    /// the watch showing this process's last status write: `new` is the version that write
    /// produced, and `old` one the write was computed from (or one of our earlier writes). The
    /// reconcile that wrote the status acted on everything the new version shows but the
    /// status itself, so that update needs no reconcile of its own (the caller checks that the
    /// rest of the object did not change, for a relist may skip versions). The entry is
    /// dropped then: the cache has caught up.
    pub fn echo(&self, key: &str, old: Option<&str>, new: Option<&str>) -> bool {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let echo = written.get(key).is_some_and(|entry| {
            new.is_some()
                && entry.written.as_deref() == new
                && old.is_some_and(|old| entry.before.iter().any(|b| b == old))
        });
        if echo {
            written.remove(key);
        }
        echo
    }

    /// The object `key` is gone.
    pub fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }

    /// How many objects have a write the cache has not shown yet (as far as this record
    /// knows: an entry leaves at the object's next reconcile).
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no write is waiting for the cache.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_that_has_not_seen_the_write_is_read_with_the_status_written() {
        let written = Statuses::default();
        written.wrote("ns/orders", Some("10"), &"written", Some("11"));
        assert_eq!(written.catch_up("ns/orders", Some("10")), Some("written"));
        assert_eq!(written.len(), 1, "kept until the cache moves");
        assert_eq!(written.catch_up("ns/other", Some("10")), None, "other keys untouched");
    }

    #[test]
    fn the_cache_is_the_truth_once_it_shows_the_write_or_any_other_change() {
        let written = Statuses::default();
        written.wrote("ns/orders", Some("10"), &"written", Some("11"));
        assert_eq!(written.catch_up("ns/orders", Some("11")), None, "the cache shows the write");
        assert!(written.is_empty(), "caught up");
        written.wrote("ns/orders", Some("11"), &"again", Some("13"));
        assert_eq!(written.catch_up("ns/orders", Some("12")), None, "a change this process did not make");
        assert!(written.is_empty());
        assert_eq!(written.catch_up("ns/orders", Some("11")), None, "the entry is gone");
    }

    #[test]
    fn a_second_write_before_the_cache_caught_up_keeps_the_first_writes_version_stale() {
        let written = Statuses::default();
        written.wrote("ns/orders", Some("10"), &"first", Some("11"));
        assert_eq!(written.catch_up("ns/orders", Some("10")), Some("first"));
        written.wrote("ns/orders", Some("10"), &"second", Some("12"));
        // The cache now shows our first write: still behind the second.
        assert_eq!(written.catch_up("ns/orders", Some("11")), Some("second"));
        assert_eq!(written.catch_up("ns/orders", Some("10")), Some("second"));
        assert_eq!(written.catch_up("ns/orders", Some("12")), None);
        assert!(written.is_empty());
    }

    #[test]
    fn the_watch_showing_our_own_write_is_an_echo_and_catches_the_cache_up() {
        let written = Statuses::default();
        written.wrote("ns/orders", Some("10"), &"written", Some("11"));
        assert!(!written.echo("ns/orders", Some("10"), Some("12")), "another version than the write's");
        assert!(!written.echo("ns/orders", Some("9"), Some("11")), "from a version the write did not read");
        assert!(!written.echo("ns/other", Some("10"), Some("11")), "another object");
        assert!(written.echo("ns/orders", Some("10"), Some("11")));
        assert!(written.is_empty(), "caught up");
        assert!(!written.echo("ns/orders", Some("10"), Some("11")), "nothing written since");
    }

    #[test]
    fn of_two_writes_before_the_cache_caught_up_only_the_last_ones_echo_is_skipped() {
        let written = Statuses::default();
        written.wrote("ns/orders", Some("10"), &"first", Some("11"));
        written.wrote("ns/orders", Some("10"), &"second", Some("12"));
        assert!(!written.echo("ns/orders", Some("10"), Some("11")), "the first write: the second is still to come");
        assert!(written.echo("ns/orders", Some("11"), Some("12")));
        assert!(written.is_empty());
    }

    #[test]
    fn a_gone_object_leaves_no_entry() {
        let written = Statuses::default();
        written.wrote("ns/orders", Some("10"), &"", Some("11"));
        written.forget("ns/orders");
        assert!(written.is_empty());
    }

    fn api_error(code: u16, message: &str) -> kube_client::Error {
        kube_client::Error::Api(Box::new(kube_core::Status { code, message: message.into(), ..Default::default() }))
    }

    #[test]
    fn quotas_and_invalid_objects_are_refusals_and_the_rest_are_not() {
        assert_eq!(
            refusal(&api_error(403, "exceeded quota: no-claims")),
            Some(Refusal::Quota("exceeded quota: no-claims".into()))
        );
        assert_eq!(refusal(&api_error(422, "bad")), Some(Refusal::Invalid("bad".into())));
        assert_eq!(refusal(&api_error(400, "bad")), Some(Refusal::Invalid("bad".into())));
        assert_eq!(refusal(&api_error(403, "forbidden")), None, "RBAC may change: retried");
        assert_eq!(refusal(&api_error(409, "conflict")), None);
    }
}
