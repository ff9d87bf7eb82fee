//! Does a live object differ from what the operator wants? Decides whether to write at all.
//!
//! The desired object sets only the fields the operator owns; the apiserver and other
//! controllers add defaults and fields of their own (`protocol`, `strategy`, status,
//! annotations). So the question is not equality but inclusion: every field the desired
//! object sets must be present in the live one with the same value. Lists compare element
//! by element and must have the same length (containers, ports and owner references are
//! lists the operator owns whole).
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
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => {
            desired.iter().all(|(key, want)| want.is_null() || live.get(key).is_some_and(|have| contains(have, want)))
        }
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len() && live.iter().zip(desired).all(|(have, want)| contains(have, want))
        }
        (live, desired) => live == desired,
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

    #[test]
    fn an_extra_list_element_is_a_difference() {
        let desired = json!({"containers": [{"name": "database"}]});
        assert!(differs(&desired, &json!({"containers": [{"name": "database"}, {"name": "sidecar"}]})));
    }
}
