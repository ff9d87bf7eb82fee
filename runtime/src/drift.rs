//! Does a live object differ from what the operator wants? Decides whether to write at all.
//!
//! The desired object sets only the fields the operator owns; the apiserver and other
//! controllers add defaults and fields of their own (`protocol`, `strategy`, status,
//! annotations). So the question is not equality but inclusion: every field the desired
//! object sets must be present in the live one with the same value.
//!
//! Lists are compared as server-side apply merges them. A list with merge keys (containers
//! and env by name, ports by port and protocol, owner references by uid, volumes by name,
//! volume mounts by path) matches when each element the operator sets is in the live list
//! under its key and contains what the operator set: an element another party added (a
//! sidecar from an injector, a port from a service mesh, an owner reference from another
//! controller) is not a difference, so it costs no re-apply and no "Updated" event at every
//! reconcile. Other lists (`args`, `command`) are atomic: the same length, element by element.
//! An empty list the operator sets means "none", keyed or not.
//!
//! The price of inclusion: an element the operator stops setting (after an upgrade of the
//! operator) stays until the child is written for another reason, which server-side apply
//! then removes, since this field manager owned it. Where the operator does remove something
//! (a restore's init container), it says so with an empty list, which a live list with
//! elements differs from; an absent list is empty, as the API drops empty lists.
//!
//! Server-side apply would accept an unchanged object without bumping its resourceVersion,
//! but it still costs a request per reconcile; comparing against the cache costs none.

use serde::Serialize;
use serde_json::Value;

/// Whether `live` lacks, or has another value for, any field that `desired` sets. `live` may
/// be another type than `desired` (a cached view of it, say): they are compared as JSON.
pub fn differs<D: Serialize, L: Serialize>(desired: &D, live: &L) -> bool {
    difference(desired, live).is_some()
}

/// The first field that `desired` sets and `live` lacks or has another value for, as a path
/// such as `spec.template.spec.containers[database].image` (keyed list elements by their key,
/// atomic ones by position); `None` when `live` has them all. Logged and put in the "Updated"
/// event, so a repair says what it repaired.
pub fn difference<D: Serialize, L: Serialize>(desired: &D, live: &L) -> Option<String> {
    match (serde_json::to_value(desired), serde_json::to_value(live)) {
        (Ok(mut desired), Ok(live)) => {
            // The type, not a field: a cached view of a Deployment is a Deployment without
            // spelling it out.
            if let Value::Object(fields) = &mut desired {
                fields.remove("apiVersion");
                fields.remove("kind");
            }
            missing(None, &live, &desired)
        }
        // Serialising a k8s-openapi type cannot fail; if it ever did, writing is the safe side.
        _ => Some(String::new()),
    }
}

/// Where `live` does not contain `desired` ("" for `live` itself), knowing the name of the
/// field that holds the values (for a list's merge key).
fn missing(field: Option<&str>, live: &Value, desired: &Value) -> Option<String> {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired.iter().find_map(|(key, want)| match live.get(key) {
            Some(have) => missing(Some(key), have, want).map(|rest| join(key, &rest)),
            // The API drops empty lists (`omitempty`): one that is absent is empty.
            None => (!(want.is_null() || want.as_array().is_some_and(Vec::is_empty))).then(|| key.clone()),
        }),
        // An empty list the operator sets says "none": others' elements included.
        (Value::Array(live), Value::Array(desired)) if desired.is_empty() => (!live.is_empty()).then(String::new),
        (Value::Array(live), Value::Array(desired)) => match field.and_then(merge_key) {
            Some(key) => desired.iter().find_map(|want| {
                let Some(wanted) = key(want) else { return Some(String::new()) };
                // Contained by any live element of its key; else where the first one differs.
                let mut first_difference = None;
                for have in live.iter().filter(|have| key(have).as_ref() == Some(&wanted)) {
                    match missing(None, have, want) {
                        None => return None,
                        Some(rest) => {
                            first_difference.get_or_insert(rest);
                        }
                    }
                }
                let element = format!("[{}]", wanted.trim_matches('"'));
                Some(match first_difference {
                    None => element,
                    Some(rest) => join(&element, &rest),
                })
            }),
            None if live.len() != desired.len() => Some(String::new()),
            None => live
                .iter()
                .zip(desired)
                .enumerate()
                .find_map(|(i, (have, want))| missing(None, have, want).map(|rest| join(&format!("[{i}]"), &rest))),
        },
        (live, desired) => (live != desired).then(String::new),
    }
}

/// `head` followed by the path `rest` below it.
fn join(head: &str, rest: &str) -> String {
    match rest {
        "" => head.to_string(),
        _ if rest.starts_with('[') => format!("{head}{rest}"),
        _ => format!("{head}.{rest}"),
    }
}

/// The merge key of a list field, as the Kubernetes API declares it
/// (`x-kubernetes-list-map-keys` / `patchMergeKey`); `None` for an atomic list.
fn merge_key(field: &str) -> Option<fn(&Value) -> Option<String>> {
    fn by(name: &'static str) -> impl Fn(&Value) -> Option<String> {
        move |element| element.get(name).map(Value::to_string)
    }
    match field {
        "containers" | "initContainers" | "env" | "volumes" => Some(|e| by("name")(e)),
        "ownerReferences" => Some(|e| by("uid")(e)),
        "volumeMounts" => Some(|e| by("mountPath")(e)),
        // Container ports by containerPort, Service ports by port; both with their protocol,
        // which the apiserver defaults to TCP when it is not set.
        "ports" => Some(|element| {
            let port = element.get("containerPort").or_else(|| element.get("port"))?;
            let protocol = element.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            Some(format!("{port}/{protocol}"))
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_added_by_the_server_are_not_a_difference() {
        let desired = json!({"spec": {"replicas": 1, "ports": [{"port": 8080}]}});
        let live = json!({"spec": {"replicas": 1, "strategy": {}, "ports": [{"port": 8080, "protocol": "TCP"}]}, "status": {}});
        assert!(!differs(&desired, &live));
    }

    #[test]
    fn a_changed_value_is_a_difference() {
        let desired = json!({"spec": {"replicas": 1}});
        assert!(differs(&desired, &json!({"spec": {"replicas": 3}})));
    }

    #[test]
    fn a_missing_field_is_a_difference() {
        let desired = json!({"metadata": {"labels": {"app": "orders"}}});
        assert!(differs(&desired, &json!({"metadata": {"labels": {}}})));
    }

    /// The regression test of lists compared by position and length: a sidecar injector, a
    /// service mesh or another controller adding an element made every reconcile re-apply
    /// the child and record an "Updated" event.
    #[test]
    fn elements_added_by_others_to_keyed_lists_are_not_a_difference() {
        let desired = json!({
            "metadata": {"ownerReferences": [{"uid": "db-uid", "kind": "Database"}]},
            "spec": {"containers": [{"name": "database", "image": "postgres:17", "ports": [{"containerPort": 8080}]}]},
        });
        let live = json!({
            "metadata": {"ownerReferences": [{"uid": "other-uid", "kind": "Thing"}, {"uid": "db-uid", "kind": "Database"}]},
            "spec": {"containers": [
                {"name": "istio-proxy", "image": "proxy"},
                {"name": "database", "image": "postgres:17",
                 "ports": [{"containerPort": 15090, "protocol": "TCP"}, {"containerPort": 8080, "protocol": "TCP"}]},
            ]},
        });
        assert!(!differs(&desired, &live));
    }

    #[test]
    fn a_keyed_element_that_is_missing_or_changed_is_a_difference() {
        let desired = json!({"containers": [{"name": "database", "image": "postgres:17"}]});
        assert!(differs(&desired, &json!({"containers": [{"name": "sidecar", "image": "postgres:17"}]})));
        assert!(differs(&desired, &json!({"containers": [{"name": "database", "image": "postgres:16"}]})));
        let ports = json!({"ports": [{"containerPort": 8080, "protocol": "UDP"}]});
        assert!(differs(&ports, &json!({"ports": [{"containerPort": 8080, "protocol": "TCP"}]})));
        let owner = json!({"ownerReferences": [{"uid": "db-uid"}]});
        assert!(differs(&owner, &json!({"ownerReferences": [{"uid": "other-uid"}]})));
    }

    #[test]
    fn an_empty_list_is_satisfied_by_an_absent_one_and_not_by_elements() {
        let desired = json!({"spec": {"initContainers": []}});
        assert!(!differs(&desired, &json!({"spec": {}})));
        assert!(differs(&desired, &json!({"spec": {"initContainers": [{"name": "restore"}]}})));
    }

    #[test]
    fn the_difference_names_the_first_field_that_differs() {
        let desired = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "database", "image": "postgres:17", "args": ["-c", "a"], "ports": [{"containerPort": 5432}]}]}}}});
        let live = |image: &str, args: Value, ports: Value| {
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "sidecar"}, {"name": "database", "image": image, "args": args, "ports": ports}]}}}})
        };
        let ports = json!([{"containerPort": 5432, "protocol": "TCP"}]);
        assert_eq!(difference(&desired, &live("postgres:17", json!(["-c", "a"]), ports.clone())), None);
        assert_eq!(
            difference(&desired, &live("postgres:16", json!(["-c", "a"]), ports.clone())).as_deref(),
            Some("spec.template.spec.containers[database].image")
        );
        assert_eq!(
            difference(&desired, &live("postgres:17", json!(["-c", "b"]), ports.clone())).as_deref(),
            Some("spec.template.spec.containers[database].args[1]")
        );
        assert_eq!(
            difference(&desired, &live("postgres:17", json!(["-c"]), ports)).as_deref(),
            Some("spec.template.spec.containers[database].args")
        );
        assert_eq!(
            difference(&desired, &live("postgres:17", json!(["-c", "a"]), json!([{"containerPort": 80}]))).as_deref(),
            Some("spec.template.spec.containers[database].ports[5432/TCP]")
        );
        assert_eq!(difference(&json!({"metadata": {"labels": {"app": "x"}}}), &json!({})).as_deref(), Some("metadata"));
        assert_eq!(
            difference(&json!({"spec": {"replicas": 1}}), &json!({"spec": {"replicas": 2}})).as_deref(),
            Some("spec.replicas")
        );
    }

    #[test]
    fn atomic_lists_compare_whole() {
        let desired = json!({"args": ["run", "--workers=2"]});
        assert!(differs(&desired, &json!({"args": ["run", "--workers=2", "--extra"]})));
        assert!(!differs(&desired, &json!({"args": ["run", "--workers=2"]})));
    }
}
