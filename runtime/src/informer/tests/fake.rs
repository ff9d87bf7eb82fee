//! Test helpers: a scripted, in-process [`ListWatch`] for fault injection, a recording handler,
//! and object builders. Behaviour against a real apiserver is tested in `tests/informer.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_core::params::{ListParams, WatchParams};
use kube_core::watch::{Bookmark, BookmarkMeta};
use kube_core::{ObjectMeta, Status, TypeMeta, WatchEvent};
use tokio::time::Instant;

use crate::informer::decode::ListPage;
use crate::informer::error::Undecodable;
use crate::informer::list_watch::{ListWatch, WatchStream};
use crate::informer::reflector::INITIAL_EVENTS_END;
use crate::informer::store::key_of;
use crate::informer::{Error, EventHandler};

/// A config map `ns/name` at resourceVersion `rv`.
pub(crate) fn cm(namespace: &str, name: &str, rv: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// `obj` with an ownerReference to uid `uid`.
pub(crate) fn owned_by(mut obj: ConfigMap, uid: &str, controller: bool) -> ConfigMap {
    obj.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Database".into(),
        name: "owner".into(),
        uid: uid.into(),
        controller: Some(controller),
        ..OwnerReference::default()
    }]);
    obj
}

/// An apiserver error status.
pub(crate) fn status(code: u16, reason: &str) -> Box<Status> {
    Status::failure(&format!("injected {code} {reason}"), reason).with_code(code).boxed()
}

/// A request the fake received, and when (tokio time).
#[derive(Debug, Clone)]
pub(crate) enum Call {
    List(ListParams),
    Watch(WatchParams, String, Instant),
}

type Events = mpsc::UnboundedSender<Result<WatchEvent<ConfigMap>, Error>>;

#[derive(Default)]
struct Script {
    lists: VecDeque<Result<ListPage<ConfigMap>, Error>>,
    watches: VecDeque<Result<WatchStream<ConfigMap>, Error>>,
    calls: Vec<Call>,
}

/// A [`ListWatch`] that answers from a script. A call with nothing scripted for it never returns,
/// so an unexpected call shows up in [`FakeListWatch::calls`] and nothing spins.
#[derive(Clone, Default)]
pub(crate) struct FakeListWatch {
    script: Arc<Mutex<Script>>,
}

impl FakeListWatch {
    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }

    /// Scripts a list page; `next` is its continue token.
    pub(crate) fn list_page(&self, items: Vec<ConfigMap>, rv: &str, next: Option<&str>) {
        self.list_page_with_undecodable(items, vec![], rv, next);
    }

    /// Scripts a list page some of whose items did not decode.
    pub(crate) fn list_page_with_undecodable(
        &self,
        items: Vec<ConfigMap>,
        undecodable: Vec<Undecodable>,
        rv: &str,
        next: Option<&str>,
    ) {
        let page =
            ListPage { items, resource_version: Some(rv.into()), continue_token: next.map(Into::into), undecodable };
        self.script().lists.push_back(Ok(page));
    }

    /// Scripts a failing list request.
    pub(crate) fn list_error(&self, error: Error) {
        self.script().lists.push_back(Err(error));
    }

    /// Scripts a watch request that opens; events are fed through the returned handle.
    pub(crate) fn watch(&self) -> WatchHandle {
        let (sender, receiver) = mpsc::unbounded();
        self.script().watches.push_back(Ok(receiver.boxed()));
        WatchHandle { sender }
    }

    /// Scripts a watch request that fails to open.
    pub(crate) fn watch_error(&self, error: Error) {
        self.script().watches.push_back(Err(error));
    }

    /// Every request so far.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.script().calls.clone()
    }

    /// The watch requests so far: params, resourceVersion, when.
    pub(crate) fn watch_calls(&self) -> Vec<(WatchParams, String, Instant)> {
        let calls = self.calls().into_iter();
        calls.filter_map(|call| if let Call::Watch(p, rv, at) = call { Some((p, rv, at)) } else { None }).collect()
    }

    /// The list requests so far.
    pub(crate) fn list_calls(&self) -> Vec<ListParams> {
        self.calls().into_iter().filter_map(|call| if let Call::List(p) = call { Some(p) } else { None }).collect()
    }
}

impl ListWatch<ConfigMap> for FakeListWatch {
    fn list<'a>(&'a self, params: &'a ListParams) -> BoxFuture<'a, Result<ListPage<ConfigMap>, Error>> {
        let answer = {
            let mut script = self.script();
            script.calls.push(Call::List(params.clone()));
            script.lists.pop_front()
        };
        async move {
            match answer {
                Some(answer) => answer,
                None => futures::future::pending().await,
            }
        }
        .boxed()
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        rv: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<ConfigMap>, Error>> {
        let answer = {
            let mut script = self.script();
            script.calls.push(Call::Watch(params.clone(), rv.to_string(), Instant::now()));
            script.watches.pop_front()
        };
        async move {
            match answer {
                Some(answer) => answer,
                None => futures::future::pending().await,
            }
        }
        .boxed()
    }
}

/// Feeds one scripted watch. The stream ends when the handle is dropped.
pub(crate) struct WatchHandle {
    sender: Events,
}

impl WatchHandle {
    fn send(&self, event: WatchEvent<ConfigMap>) -> &Self {
        // The reflector may have dropped the stream already; the test asserts on effects.
        let _ = self.sender.unbounded_send(Ok(event));
        self
    }

    pub(crate) fn added(&self, obj: ConfigMap) -> &Self {
        self.send(WatchEvent::Added(obj))
    }

    pub(crate) fn modified(&self, obj: ConfigMap) -> &Self {
        self.send(WatchEvent::Modified(obj))
    }

    pub(crate) fn deleted(&self, obj: ConfigMap) -> &Self {
        self.send(WatchEvent::Deleted(obj))
    }

    pub(crate) fn bookmark(&self, rv: &str) -> &Self {
        self.send(WatchEvent::Bookmark(bookmark(rv, BTreeMap::new())))
    }

    /// The bookmark that ends the initial events of a streaming list.
    pub(crate) fn initial_events_end(&self, rv: &str) -> &Self {
        let annotations = BTreeMap::from([(INITIAL_EVENTS_END.to_string(), "true".to_string())]);
        self.send(WatchEvent::Bookmark(bookmark(rv, annotations)))
    }

    /// An added, modified or deleted object that did not decode.
    pub(crate) fn undecodable(&self, bad: Undecodable) -> &Self {
        let _ = self.sender.unbounded_send(Err(Error::Undecodable(Box::new(bad))));
        self
    }

    /// An `ERROR` event.
    pub(crate) fn error(&self, code: u16, reason: &str) -> &Self {
        self.send(WatchEvent::Error(status(code, reason)))
    }
}

fn bookmark(rv: &str, annotations: BTreeMap<String, String>) -> Bookmark {
    Bookmark {
        types: TypeMeta { api_version: "v1".into(), kind: "ConfigMap".into() },
        metadata: BookmarkMeta { resource_version: rv.into(), annotations },
    }
}

/// `ns/name` at `rv`, as the decoder names an object it could not decode.
pub(crate) fn undecodable(ns: &str, name: &str, rv: &str) -> Undecodable {
    Undecodable {
        namespace: Some(ns.into()),
        name: Some(name.into()),
        resource_version: Some(rv.into()),
        error: "data.k: invalid type: integer `7`, expected a string".into(),
    }
}

/// A handler that writes down what it is told: `add ns/a@1`, `update ns/a@1->2`,
/// `delete ns/a@2`; and, apart, the adds it was told were in the initial list.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    events: Mutex<Vec<String>>,
    initial: Mutex<Vec<String>>,
}

impl Recorder {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Recorder::default())
    }

    pub(crate) fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    /// The objects (`ns/a@1`) added with `in_initial_list`, in order.
    pub(crate) fn initial_adds(&self) -> Vec<String> {
        self.initial.lock().unwrap().clone()
    }

    fn push(&self, event: String) {
        self.events.lock().unwrap().push(event);
    }
}

fn describe(obj: &ConfigMap) -> String {
    format!("{}@{}", key_of(obj), obj.metadata.resource_version.as_deref().unwrap_or_default())
}

impl EventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, in_initial_list: bool) {
        if in_initial_list {
            self.initial.lock().unwrap().push(describe(obj));
        }
        self.push(format!("add {}", describe(obj)));
    }

    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let rv = new.metadata.resource_version.as_deref().unwrap_or_default();
        self.push(format!("update {}->{rv}", describe(old)));
    }

    fn on_delete(&self, obj: &Arc<ConfigMap>) {
        self.push(format!("delete {}", describe(obj)));
    }
}

/// Waits (in tokio time, 10 ms steps) until `condition` holds; panics after `within`.
pub(crate) async fn eventually(what: &str, within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
