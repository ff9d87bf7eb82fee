//! Views: a kind decoded to the fields a controller reads, cached in place of the full type.
//!
//! An informer caches every object of its kind in scope, and decodes each one again at every
//! watch event. For kinds a controller only compares and reads (the children it writes, say),
//! a *view* (a struct with just those fields, `Deserialize` and `Serialize`) costs a fraction
//! of k8s-openapi's full type: serde skips the rest of the JSON without allocating it. What
//! this module gives a view:
//!
//! - [`view_of!`](crate::view_of): makes the view the same resource as the full type (group,
//!   version, kind, plural, scope), so informers, stores and `kube_client::Api` take it;
//! - [`read_metadata`]: `metadata` without `annotations` and `managedFields` (the latter are
//!   most of the metadata of an object two managers write);
//! - [`SmallMap`]: a small string map (labels, a selector, quantities) as a vector of pairs;
//! - [`Text`]: a string that is shared, not allocated, when it is one of the words most
//!   objects of the fleet hold alike (a condition's type, status and reason, a protocol, a
//!   label's key, a quantity): Kubernetes' own, and those an application adds once with
//!   [`share_words`]. Any other value is owned, as a `String` would be;
//! - [`unless_empty`]: an optional structure kept only when it is not empty;
//! - [`exact`] and [`exact_optional`]: a list that holds exactly its elements. serde fills a
//!   vector by pushing, and a vector's first growth makes room for four elements (of up to
//!   1 KiB each), so a Deployment's one container would keep room for three more as long as
//!   it is cached.
//!
//! A view must keep every field the controller compares: a field it drops cannot be seen to
//! change. A crate defining views pins that with a test (the operator's do).

use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Words that Kubernetes writes into most objects of a kind alike: conditions, protocols,
/// strategies, phases, the recommended labels' keys.
const KUBERNETES_WORDS: &[&str] = &[
    "True",
    "False",
    "Unknown",
    "TCP",
    "UDP",
    "SCTP",
    "File",
    "FallbackToLogsOnError",
    "RollingUpdate",
    "Recreate",
    "Available",
    "Progressing",
    "ReplicaFailure",
    "MinimumReplicasAvailable",
    "NewReplicaSetAvailable",
    "ReplicaSetUpdated",
    "NewReplicaSetCreated",
    "FoundNewReplicaSet",
    "ProgressDeadlineExceeded",
    "Deployment has minimum availability.",
    "Deployment does not have minimum availability.",
    "Pending",
    "Bound",
    "Lost",
    "ReadWriteOnce",
    "ReadWriteMany",
    "ReadOnlyMany",
    "ReadWriteOncePod",
    "storage",
    "cpu",
    "memory",
    "app",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
];

/// The application's own words ([`share_words`]).
static APPLICATION_WORDS: OnceLock<&'static [&'static str]> = OnceLock::new();

/// Adds an application's own words to those a [`Text`] shares: the values its objects hold
/// alike (its name as a manager, its labels' values, its container and port names, the
/// quantities it sets). Once per process, before the informers start; a later call changes
/// nothing and returns false. Only strings the application itself writes belong here: a word
/// is compared with every decoded [`Text`], so keep the list to a few dozen.
pub fn share_words(words: &'static [&'static str]) -> bool {
    APPLICATION_WORDS.set(words).is_ok()
}

/// The shared copy of `value`, if it is a word.
fn shared(value: &str) -> Option<&'static str> {
    let application = APPLICATION_WORDS.get().copied().unwrap_or_default();
    KUBERNETES_WORDS.iter().chain(application).find(|word| **word == value).copied()
}

/// A string a view keeps: a shared `&'static str` when it is one of the words (see the
/// module's documentation), else an owned one. It reads, compares, prints and serialises as
/// the string it holds, however it is held.
///
/// ## Memory usage
///
/// A word costs no allocation; any other value one, of exactly its length (a `String` that
/// serde fills keeps no spare room either). Most fields of the views this crate's users cache
/// hold words; with glibc's smallest chunk of 32 bytes, each one saves that.
#[derive(Clone)]
pub struct Text(Held);

#[derive(Clone)]
enum Held {
    Shared(&'static str),
    Owned(Box<str>),
}

impl Text {
    /// The string.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Held::Shared(word) => word,
            Held::Owned(value) => value,
        }
    }

    /// Whether the string is a shared word (no allocation of its own).
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Held::Shared(_))
    }
}

impl From<&str> for Text {
    fn from(value: &str) -> Self {
        Text(shared(value).map_or_else(|| Held::Owned(value.into()), Held::Shared))
    }
}

impl From<String> for Text {
    fn from(value: String) -> Self {
        Text(shared(&value).map_or_else(|| Held::Owned(value.into_boxed_str()), Held::Shared))
    }
}

impl Default for Text {
    fn default() -> Self {
        Text(Held::Shared(""))
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Read;
        impl Visitor<'_> for Read {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Text, E> {
                Ok(Text::from(value))
            }
            fn visit_string<E: serde::de::Error>(self, value: String) -> Result<Text, E> {
                Ok(Text::from(value))
            }
        }
        deserializer.deserialize_str(Read)
    }
}

/// A small string-to-string map (labels, a selector, resource quantities), as pairs in the
/// order the apiserver sent them: two short vectors instead of a 544-byte B-tree node, each
/// string a [`Text`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SmallMap(pub Vec<(Text, Text)>);

impl SmallMap {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v.as_str())
    }
}

impl Serialize for SmallMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for SmallMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = SmallMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<SmallMap, A::Error> {
                let mut pairs = Vec::with_capacity(access.size_hint().unwrap_or(0));
                while let Some(pair) = access.next_entry()? {
                    pairs.push(pair);
                }
                Ok(SmallMap(shrunk(pairs)))
            }
        }
        deserializer.deserialize_map(Pairs)
    }
}

/// `Some` only when the value is not its type's default (`{}`): what the operator sets is never
/// empty, and an empty structure would cost a whole boxed value per cached object.
pub fn unless_empty<'de, D, T>(deserializer: D) -> Result<Option<Box<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default + PartialEq,
{
    Ok(Option::<Box<T>>::deserialize(deserializer)?.filter(|value| **value != T::default()))
}

/// A list decoded to exactly its length (see the module's documentation).
pub fn exact<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(shrunk(Vec::deserialize(deserializer)?))
}

/// [`exact`], for an optional list.
pub fn exact_optional<'de, D, T>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.map(shrunk))
}

fn shrunk<T>(mut list: Vec<T>) -> Vec<T> {
    list.shrink_to_fit();
    list
}

/// `metadata` as a view reads it: every field but `annotations` and `managedFields`, which
/// the operator never reads on a child and serde then skips without building them. The
/// managedFields of a Deployment that two managers write (this operator's apply, the
/// Deployment controller's status) are most of its metadata, and decoding their `fieldsV1`
/// trees was the largest single item of the operator's JSON decoding in a profile. Its lists
/// (owner references, finalizers) are [`exact`].
pub fn read_metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use std::collections::BTreeMap;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Read {
        creation_timestamp: Option<Time>,
        deletion_grace_period_seconds: Option<i64>,
        deletion_timestamp: Option<Time>,
        finalizers: Option<Vec<String>>,
        generate_name: Option<String>,
        generation: Option<i64>,
        labels: Option<BTreeMap<String, String>>,
        name: Option<String>,
        namespace: Option<String>,
        owner_references: Option<Vec<OwnerReference>>,
        resource_version: Option<String>,
        uid: Option<String>,
    }
    let read = Read::deserialize(deserializer)?;
    Ok(ObjectMeta {
        creation_timestamp: read.creation_timestamp,
        deletion_grace_period_seconds: read.deletion_grace_period_seconds,
        deletion_timestamp: read.deletion_timestamp,
        finalizers: read.finalizers.map(shrunk),
        generate_name: read.generate_name,
        generation: read.generation,
        labels: read.labels,
        name: read.name,
        namespace: read.namespace,
        owner_references: read.owner_references.map(shrunk),
        resource_version: read.resource_version,
        uid: read.uid,
        annotations: None,
        managed_fields: None,
        self_link: None,
    })
}

/// Makes a view a Kubernetes resource of the same type as `$full` (same group, version, kind,
/// path), so informers, stores and `Api` work with it as with the full type.
#[macro_export]
macro_rules! view_of {
    ($view:ty, $full:ty) => {
        impl k8s_openapi::Resource for $view {
            const API_VERSION: &'static str = <$full as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$full as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$full as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$full as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str = <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$full as k8s_openapi::Resource>::Scope;
        }

        impl k8s_openapi::Metadata for $view {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Deserialize, Serialize)]
    struct ConfigMapView {
        #[serde(default, deserialize_with = "read_metadata")]
        metadata: ObjectMeta,
        #[serde(default)]
        data: Option<SmallMap>,
    }
    crate::view_of!(ConfigMapView, k8s_openapi::api::core::v1::ConfigMap);

    #[derive(Debug, Default, PartialEq, Deserialize)]
    struct Inner {
        #[serde(default)]
        value: Option<u32>,
    }

    #[derive(Debug, Deserialize)]
    struct Outer {
        #[serde(default, deserialize_with = "unless_empty")]
        inner: Option<Box<Inner>>,
    }

    #[test]
    fn a_view_reads_the_metadata_but_annotations_and_managed_fields() {
        let json = serde_json::json!({
            "metadata": {"name": "orders", "namespace": "shop", "uid": "u", "resourceVersion": "9", "generation": 2,
                         "labels": {"app": "orders"}, "creationTimestamp": "2026-11-29T00:00:00Z",
                         "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Database", "name": "orders",
                                              "uid": "db-uid", "controller": true}],
                         "annotations": {"deployment.kubernetes.io/revision": "1"},
                         "managedFields": [{"manager": "database-operator", "operation": "Apply",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]}
        });
        // From text, as the informer decodes: a JSON value would tell serde each list's length.
        let view: ConfigMapView = serde_json::from_str(&json.to_string()).unwrap();
        let meta = &view.metadata;
        assert_eq!((meta.name.as_deref(), meta.namespace.as_deref()), (Some("orders"), Some("shop")));
        assert_eq!(
            (meta.uid.as_deref(), meta.resource_version.as_deref(), meta.generation),
            (Some("u"), Some("9"), Some(2))
        );
        assert_eq!(meta.labels.as_ref().unwrap()["app"], "orders");
        assert_eq!(meta.owner_references.as_ref().unwrap()[0].uid, "db-uid");
        assert!(meta.creation_timestamp.is_some());
        assert_eq!((meta.annotations.as_ref(), meta.managed_fields.as_ref()), (None, None));
        assert_eq!(meta.owner_references.as_ref().unwrap().capacity(), 1, "no room kept for more owners");
    }

    #[derive(Debug, Deserialize)]
    struct Lists {
        #[serde(default, deserialize_with = "exact")]
        required: Vec<String>,
        #[serde(default, deserialize_with = "exact_optional")]
        optional: Option<Vec<String>>,
    }

    #[test]
    fn an_exact_list_holds_its_elements_and_no_room_for_more() {
        let lists: Lists =
            serde_json::from_str(r#"{"required": ["a"], "optional": ["b", "c", "d", "e", "f"]}"#).unwrap();
        assert_eq!(lists.required, ["a"]);
        assert_eq!(lists.required.capacity(), 1);
        let optional = lists.optional.unwrap();
        assert_eq!(optional, ["b", "c", "d", "e", "f"]);
        assert_eq!(optional.capacity(), 5);
        // What plain serde keeps, and why the helpers exist.
        assert_eq!(serde_json::from_str::<Vec<String>>(r#"["a"]"#).unwrap().capacity(), 4);
        let (absent, null): (Lists, Lists) =
            (serde_json::from_str("{}").unwrap(), serde_json::from_str(r#"{"optional": null}"#).unwrap());
        assert_eq!((absent.required.len(), absent.optional, null.optional), (0, None, None));
    }

    #[test]
    fn a_view_is_the_same_resource_as_the_full_type() {
        use kube_core::Resource;
        assert_eq!(ConfigMapView::kind(&()), "ConfigMap");
        assert_eq!(ConfigMapView::api_version(&()), "v1");
        assert_eq!(ConfigMapView::plural(&()), "configmaps");
    }

    #[test]
    fn a_small_map_keeps_the_pairs_in_order_and_serialises_as_a_map() {
        let map: SmallMap = serde_json::from_str(r#"{"b": "2", "a": "1"}"#).unwrap();
        assert_eq!(map.0, [(Text::from("b"), Text::from("2")), (Text::from("a"), Text::from("1"))]);
        assert_eq!((map.get("a"), map.get("c")), (Some("1"), None));
        assert_eq!(serde_json::to_value(&map).unwrap(), serde_json::json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn a_word_is_shared_and_any_other_string_owned() {
        let texts: Vec<Text> =
            serde_json::from_str(r#"["True", "orders", "app.kubernetes.io/instance", "Tru"]"#).unwrap();
        let shared: Vec<bool> = texts.iter().map(Text::is_shared).collect();
        assert_eq!(shared, [true, false, true, false]);
        assert_eq!(texts[0], "True");
        assert_eq!(texts[1].as_str(), "orders");
        assert_eq!(format!("{} {:?}", texts[1], texts[0]), r#"orders "True""#);
        assert_eq!(serde_json::to_string(&texts).unwrap(), r#"["True","orders","app.kubernetes.io/instance","Tru"]"#);
        // Held either way, the same string is the same Text.
        assert_eq!(Text::from("True"), Text(Held::Owned("True".into())));
        assert!(!Text::from(String::from("x")).is_shared());
        assert_eq!(Text::default().as_str(), "");
    }

    #[test]
    fn the_applications_words_are_shared_once_added() {
        // The process's only call in this crate's tests: the set is once per process.
        assert!(share_words(&["example-operator"]));
        assert!(!share_words(&["other"]), "a second set changes nothing");
        assert!(Text::from("example-operator").is_shared());
        assert!(!Text::from("other").is_shared());
    }

    #[test]
    fn an_empty_structure_is_none_and_a_set_one_is_kept() {
        let empty: Outer = serde_json::from_str(r#"{"inner": {}}"#).unwrap();
        let absent: Outer = serde_json::from_str("{}").unwrap();
        let set: Outer = serde_json::from_str(r#"{"inner": {"value": 3}}"#).unwrap();
        assert_eq!((empty.inner, absent.inner), (None, None));
        assert_eq!(set.inner, Some(Box::new(Inner { value: Some(3) })));
    }
}
