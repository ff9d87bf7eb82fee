//! Decoding lists and watch events one object at a time, so one bad object never blocks its kind.
//!
//! An object the apiserver stored may not decode as the informer's type: a custom resource
//! written before a CRD change narrowed its schema (a `size` no longer in the enum), a field
//! that schema preserves but the type rejects, a bug in a webhook. Decoding a whole list as one
//! value would then fail the list, and the informer would never sync again; decoding a watch
//! event would end the watch, and every watch from that resourceVersion would replay it.
//!
//! So the fast path decodes as before (a whole list, an event line) and, only when that fails,
//! decodes again item by item: what decodes is kept, what does not becomes an
//! [`Undecodable`]: its namespace, name and resourceVersion (read from its metadata alone) and
//! the decoder's message. The reflector logs it, counts it in
//! `informer_undecodable_objects_total` and treats the object as absent: it leaves the cache
//! (handlers get `on_delete` if it was cached) and comes back when a later version decodes.
//! What is not an object at all (a body that is not JSON, a malformed `ERROR` event) is still an
//! error of the request.

use kube_core::{ObjectList, Status, WatchEvent};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::error::{Error, Undecodable};

/// Just enough of any object to name it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Named {
    metadata: NamedMeta,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct NamedMeta {
    namespace: Option<String>,
    name: Option<String>,
    resource_version: Option<String>,
}

/// `error` without the string serde quotes: `invalid type: string "hunter2", expected u16`
/// would put a value into a log line, and a value may be a secret.
fn describe(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let Some(start) = text.find("string \"") else { return text };
    let value_start = start + "string \"".len();
    match text[value_start..].find("\", expected") {
        Some(len) => format!("{}string <omitted>{}", &text[..start], &text[value_start + len + 1..]),
        None => text,
    }
}

fn undecodable(raw: &str, error: &serde_json::Error) -> Undecodable {
    let meta = serde_json::from_str::<Named>(raw).unwrap_or_default().metadata;
    Undecodable {
        namespace: meta.namespace,
        name: meta.name,
        resource_version: meta.resource_version,
        error: describe(error),
    }
}

/// A list body whose items are kept as text until each is decoded on its own.
#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: kube_core::ListMeta,
    #[serde(borrow, default)]
    items: Vec<&'a RawValue>,
}

/// One page of a list.
#[derive(Clone, Debug)]
pub struct ListPage<K> {
    /// The objects of this page.
    pub items: Vec<K>,
    /// The resourceVersion the list was read at (`metadata.resourceVersion`).
    pub resource_version: Option<String>,
    /// The token for the next page (`metadata.continue`); `None` or empty on the last page.
    pub continue_token: Option<String>,
    /// The items of this page that did not decode as `K`, named by their metadata.
    pub undecodable: Vec<Undecodable>,
}

impl<K: Clone> From<ObjectList<K>> for ListPage<K> {
    fn from(list: ObjectList<K>) -> Self {
        ListPage {
            items: list.items,
            resource_version: list.metadata.resource_version,
            continue_token: list.metadata.continue_,
            undecodable: Vec::new(),
        }
    }
}

/// Decodes one page of a list: whole when it can, item by item when one item is bad.
pub(crate) fn list<K: Clone + DeserializeOwned>(body: &str) -> Result<ListPage<K>, serde_json::Error> {
    let whole = match serde_json::from_str::<ObjectList<K>>(body) {
        Ok(list) => return Ok(list.into()),
        Err(error) => error,
    };
    let Ok(raw) = serde_json::from_str::<RawList<'_>>(body) else { return Err(whole) };
    let mut page = ListPage {
        items: Vec::with_capacity(raw.items.len()),
        resource_version: raw.metadata.resource_version,
        continue_token: raw.metadata.continue_,
        undecodable: Vec::new(),
    };
    for item in raw.items {
        match serde_json::from_str::<K>(item.get()) {
            Ok(obj) => page.items.push(obj),
            Err(error) => page.undecodable.push(undecodable(item.get(), &error)),
        }
    }
    Ok(page)
}

/// An event line whose object is kept as text.
#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    type_: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// Decodes one line of a watch: `None` for a line cut short by the end of the stream;
/// [`Error::Undecodable`] for an added, modified or deleted object that does not decode (the
/// watch goes on); an `ERROR` line the apiserver sent as a bare Status becomes [`Error::Api`].
pub(crate) fn event<K: DeserializeOwned>(line: &str) -> Option<Result<WatchEvent<K>, Error>> {
    let whole = match serde_json::from_str::<WatchEvent<K>>(line) {
        Ok(event) => return Some(Ok(event)),
        // The last line of a stream cut mid-object: the stream simply ends.
        Err(error) if error.is_eof() => return None,
        Err(error) => error,
    };
    if let Ok(raw) = serde_json::from_str::<RawEvent<'_>>(line)
        && matches!(raw.type_.as_str(), "ADDED" | "MODIFIED" | "DELETED")
    {
        return Some(Err(Error::Undecodable(Box::new(undecodable(raw.object.get(), &whole)))));
    }
    if let Ok(status) = serde_json::from_str::<Status>(line)
        && status.code != 0
    {
        return Some(Err(Error::Api(Box::new(status))));
    }
    Some(Err(Error::Transport(kube_client::Error::SerdeError(whole))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config_map(name: &str, rv: &str, data: &str) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"namespace":"ns","name":"{name}","resourceVersion":"{rv}"}},"data":{data}}}"#
        )
    }

    #[test]
    fn a_good_list_decodes_whole() {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"9","continue":"next"}},"items":[{},{}]}}"#,
            config_map("a", "1", r#"{"k":"v"}"#),
            config_map("b", "2", "{}")
        );
        let page = list::<ConfigMap>(&body).unwrap();
        assert_eq!(page.items.len(), 2);
        assert!(page.undecodable.is_empty());
        assert_eq!(page.resource_version.as_deref(), Some("9"));
        assert_eq!(page.continue_token.as_deref(), Some("next"));
    }

    #[test]
    fn one_bad_item_is_set_aside_and_the_rest_of_the_list_is_kept() {
        // `data` values must be strings: a number does not decode as a ConfigMap.
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"9"}},"items":[{},{},{}]}}"#,
            config_map("a", "1", "{}"),
            config_map("bad", "2", r#"{"k":7}"#),
            config_map("c", "3", "{}")
        );
        let page = list::<ConfigMap>(&body).unwrap();
        let names: Vec<_> = page.items.iter().map(|cm| cm.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(page.resource_version.as_deref(), Some("9"));
        let [bad] = &page.undecodable[..] else { panic!("{:?}", page.undecodable) };
        assert_eq!(bad.key().as_deref(), Some("ns/bad"));
        assert_eq!(bad.resource_version.as_deref(), Some("2"));
        assert!(bad.error.contains("invalid type"), "{}", bad.error);
    }

    #[test]
    fn a_body_that_is_not_a_list_is_still_an_error() {
        assert!(list::<ConfigMap>("<html>proxy error</html>").is_err());
    }

    #[test]
    fn a_bad_event_is_named_and_the_watch_goes_on() {
        let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, config_map("bad", "12", r#"{"k":[1]}"#));
        let Some(Err(Error::Undecodable(bad))) = event::<ConfigMap>(&line) else { panic!("not undecodable") };
        assert_eq!(bad.key().as_deref(), Some("ns/bad"));
        assert_eq!(bad.resource_version.as_deref(), Some("12"));
        assert!(bad.to_string().starts_with("ns/bad does not decode: "), "{bad}");
    }

    #[test]
    fn good_events_bookmarks_and_errors_decode_as_before() {
        let line = format!(r#"{{"type":"ADDED","object":{}}}"#, config_map("a", "1", "{}"));
        assert!(matches!(event::<ConfigMap>(&line), Some(Ok(WatchEvent::Added(_)))));
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}"#;
        assert!(matches!(event::<ConfigMap>(gone), Some(Ok(WatchEvent::Error(status))) if status.code == 410));
        let bare = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"InternalError","code":500}"#;
        assert!(matches!(event::<ConfigMap>(bare), Some(Err(Error::Api(status))) if status.code == 500));
        assert!(event::<ConfigMap>(r#"{"type":"ADDED","obj"#).is_none());
        assert!(matches!(event::<ConfigMap>("not json"), Some(Err(Error::Transport(_)))));
    }

    #[test]
    fn the_message_never_carries_the_value_that_failed() {
        // A Secret-like field whose value is a string where a number is wanted.
        #[derive(Deserialize, Clone, Debug)]
        #[allow(dead_code)]
        struct Strict {
            metadata: kube_core::ObjectMeta,
            port: u16,
        }
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"s"},"port":"hunter2"}}"#;
        let Some(Err(Error::Undecodable(bad))) = event::<Strict>(line) else { panic!("not undecodable") };
        assert!(!bad.error.contains("hunter2"), "{}", bad.error);
        assert!(bad.error.contains("string <omitted>, expected u16"), "{}", bad.error);
    }
}
