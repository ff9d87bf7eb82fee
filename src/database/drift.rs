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
    match (serde_json::to_value(desired), serde_json::to_value(live)) {
        (Ok(mut desired), Ok(live)) => {
            // The type, not a field: a cached view of a Deployment is a Deployment without
            // spelling it out.
            if let Value::Object(fields) = &mut desired {
                fields.remove("apiVersion");
                fields.remove("kind");
            }
            !contains(&live, &desired)
        }
        // Serialising a k8s-openapi type cannot fail; if it ever did, writing is the safe side.
        _ => true,
    }
}

/// Whether `live` contains everything `desired` sets.
fn contains(live: &Value, desired: &Value) -> bool {
    contains_in(None, live, desired)
}

/// [`contains`], knowing the name of the field that holds the values (for a list's merge key).
fn contains_in(field: Option<&str>, live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired.iter().all(|(key, want)| match live.get(key) {
            Some(have) => contains_in(Some(key), have, want),
            // The API drops empty lists (`omitempty`): one that is absent is empty.
            None => want.is_null() || want.as_array().is_some_and(Vec::is_empty),
        }),
        // An empty list the operator sets says "none": others' elements included.
        (Value::Array(live), Value::Array(desired)) if desired.is_empty() => live.is_empty(),
        (Value::Array(live), Value::Array(desired)) => match field.and_then(merge_key) {
            Some(key) => desired.iter().all(|want| {
                let wanted = key(want);
                wanted.is_some() && live.iter().any(|have| key(have) == wanted && contains_in(None, have, want))
            }),
            None => {
                live.len() == desired.len()
                    && live.iter().zip(desired).all(|(have, want)| contains_in(None, have, want))
            }
        },
        (live, desired) => live == desired,
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
    fn atomic_lists_compare_whole() {
        let desired = json!({"args": ["run", "--workers=2"]});
        assert!(differs(&desired, &json!({"args": ["run", "--workers=2", "--extra"]})));
        assert!(!differs(&desired, &json!({"args": ["run", "--workers=2"]})));
    }
}
