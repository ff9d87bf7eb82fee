//! The Helm chart in `charts/database-operator/` must install what `kubectl apply -k manifests/`
//! installs, so that the two ways of deploying the operator never drift apart.
//!
//! A release named `database-operator` in `database-operator-system`, with the default values,
//! renders the objects of `kubectl kustomize manifests/` (except its Namespace: Helm installs into
//! a namespace that exists), with the same content once Helm's own labels and the CRD's keep
//! annotation are taken off. The values that change the render (`watchNamespaces`, `crds.install`,
//! `image.digest`, ...) are checked against the manifests they stand for.
//!
//! These tests run the helm CLI named by `HELM` (`hack/helm.sh` builds it; `hack/test.sh` sets it)
//! and `kubectl kustomize` (`KUBECTL`, default `kubectl` on PATH); neither needs a cluster.

// In a directory of its own: a file directly in tests/ would be a test target of its own.
#[path = "chart/support.rs"]
mod support;

use std::collections::BTreeSet;

use serde_json::Value;
use support::{
    differences, find, key, kustomize, manager_args, manifest, read, render, render_error, without_helm_metadata,
};

/// Each CRD's copy in the chart, and the generated file in manifests/.
const CRDS: [(&str, &str); 2] = [
    ("charts/database-operator/files/crd.yaml", "manifests/crd/example.com_databases.yaml"),
    ("charts/database-operator/files/crd-databasebackups.yaml", "manifests/crd/example.com_databasebackups.yaml"),
];

/// Asserts that `chart` is `manifests` once Helm's labels are taken off both, printing where they
/// differ when they do not.
fn assert_same_object(what: &str, manifests: &Value, chart: &Value) {
    let (manifests, chart) = (without_helm_metadata(manifests), without_helm_metadata(chart));
    let found = differences(&manifests, &chart);
    assert!(
        found.is_empty(),
        "{what} differs between manifests/ and the chart (Helm's labels left out):\n{}",
        found.join("\n")
    );
}

#[test]
fn helm_lint_strict_passes_on_the_chart() {
    let output = support::helm(&["lint", "--strict", support::CHART]);
    assert!(output.status.success(), "helm lint --strict failed:\n{}{}", output.stdout, output.stderr);
}

#[test]
fn the_default_render_installs_exactly_the_objects_of_manifests() {
    let manifests: Vec<Value> =
        kustomize("manifests/").into_iter().filter(|object| object["kind"] != "Namespace").collect();
    let chart = render(&[]);

    let keys = |objects: &[Value]| objects.iter().map(key).collect::<BTreeSet<_>>();
    let (in_manifests, in_chart) = (keys(&manifests), keys(&chart));
    let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| a.difference(b).cloned().collect::<Vec<_>>().join("\n  ");
    assert!(
        in_manifests == in_chart,
        "the chart and manifests/ install different objects.\nonly in manifests/:\n  {}\nonly in the chart:\n  {}",
        only(&in_manifests, &in_chart),
        only(&in_chart, &in_manifests),
    );

    for object in &manifests {
        let rendered = chart.iter().find(|rendered| key(rendered) == key(object)).expect("the keys are the same");
        assert_same_object(&key(object), object, rendered);
    }
}

#[test]
fn every_rendered_object_carries_helms_labels() {
    for object in render(&[]) {
        let labels = &object["metadata"]["labels"];
        for label in support::HELM_LABELS {
            assert!(labels.get(label).is_some(), "{} has no label {label}: {labels}", key(&object));
        }
    }
}

#[test]
fn the_chart_crds_are_byte_for_byte_copies_of_the_generated_crds() {
    for (chart, manifest) in CRDS {
        assert!(
            read(chart) == read(manifest),
            "{chart} differs from {manifest}; regenerate both with hack/generate-crds.sh"
        );
    }
}

#[test]
fn the_chart_version_and_app_version_are_the_crate_version() {
    let chart: Value = serde_saphyr::from_str(&read("charts/database-operator/Chart.yaml"))
        .unwrap_or_else(|err| panic!("charts/database-operator/Chart.yaml is not valid YAML: {err}"));
    let crate_version = env!("CARGO_PKG_VERSION");
    for field in ["version", "appVersion"] {
        assert_eq!(
            chart[field].as_str(),
            Some(crate_version),
            "{field} in charts/database-operator/Chart.yaml must be the crate's version, {crate_version:?} \
             (a string: quote it)"
        );
    }
}

#[test]
fn the_crd_is_kept_on_uninstall_unless_crds_keep_is_false() {
    let keep = |objects: &[Value]| {
        find(objects, "CustomResourceDefinition", "databases.example.com")
            .expect("the chart renders the CRD")
            .pointer("/metadata/annotations/helm.sh~1resource-policy")
            .cloned()
    };
    assert_eq!(keep(&render(&[])), Some(Value::from("keep")));
    assert_eq!(keep(&render(&["--set", "crds.keep=false"])), None);
}

#[test]
fn crds_install_false_renders_no_crd() {
    let chart = render(&["--set", "crds.install=false"]);
    let kinds: Vec<_> = chart.iter().map(key).collect();
    assert!(chart.iter().all(|object| object["kind"] != "CustomResourceDefinition"), "{kinds:#?}");
}

#[test]
fn each_admission_policy_is_left_out_when_its_value_is_false() {
    let names = |chart: &[Value]| {
        chart
            .iter()
            .filter(|o| o["kind"].as_str().unwrap().starts_with("ValidatingAdmission"))
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let both = names(&render(&[]));
    assert_eq!(both.len(), 4, "two policies and their bindings, by default: {both:?}");
    let limits = names(&render(&["--set", "deletionProtection.policy=false"]));
    assert_eq!(limits, ["database-operator-limits"; 2], "{limits:?}");
    let protection = names(&render(&["--set", "operatorLimits.policy=false"]));
    assert_eq!(protection, ["database-operator-deletion-protection"; 2], "{protection:?}");
}

#[test]
fn watch_namespaces_turn_the_operators_cluster_role_into_a_role_in_each() {
    let chart = render(&["--set", "watchNamespaces={team-a,team-b}"]);
    for namespace in ["team-a", "team-b"] {
        for (kind, file) in [("Role", "role.yaml"), ("RoleBinding", "role_binding.yaml")] {
            let rendered = chart
                .iter()
                .find(|o| {
                    o["kind"] == kind
                        && o["metadata"]["name"] == "database-operator"
                        && o["metadata"]["namespace"] == namespace
                })
                .unwrap_or_else(|| panic!("watchNamespaces renders no {kind} database-operator in {namespace}"));
            // The files of manifests/rbac/namespaced/ have no namespace: `kubectl apply -n` sets it.
            let mut expected = manifest(&format!("manifests/rbac/namespaced/{file}"));
            expected["metadata"]["namespace"] = Value::from(namespace);
            assert_same_object(&format!("{kind} database-operator in {namespace}"), &expected, rendered);
        }
    }
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(find(&chart, kind, "database-operator").is_none(), "watchNamespaces still renders a {kind}");
    }
    let args = manager_args(&chart);
    assert!(args.iter().any(|arg| arg == "--namespace=team-a,team-b"), "{args:?}");
    // Leader election keeps its Lease in the operator's own namespace, whatever it watches.
    let lease_role = find(&chart, "Role", "database-operator-leader-election").expect("the Lease Role");
    assert_eq!(lease_role["metadata"]["namespace"], "database-operator-system");
    // A namespace that is not a DNS label is refused by the values' schema.
    let refused = render_error(&["--set", "watchNamespaces={Team_A}"]);
    assert!(refused.contains("watchNamespaces"), "{refused}");
}

#[test]
fn an_image_digest_replaces_the_tag() {
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    let chart = render(&["--set", &format!("image.digest={digest}"), "--set", "image.tag=ignored"]);
    let deployment = find(&chart, "Deployment", "database-operator-controller-manager").expect("the Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("localhost/database-operator@{digest}")
    );
}

#[test]
fn disabled_leader_election_renders_no_lease_role_and_no_flag() {
    let chart = render(&["--set", "leaderElection.enabled=false"]);
    for kind in ["Role", "RoleBinding"] {
        assert!(find(&chart, kind, "database-operator-leader-election").is_none(), "a leader-election {kind}");
    }
    let args = manager_args(&chart);
    assert!(!args.iter().any(|arg| arg.starts_with("--leader-elect")), "{args:?}");
}

#[test]
fn a_leader_election_id_is_passed_and_names_the_lease_in_the_role() {
    let chart = render(&["--set", "leaderElection.id=orders.example.com"]);
    let args = manager_args(&chart);
    assert!(args.iter().any(|arg| arg == "--leader-election-id=orders.example.com"), "{args:?}");
    let role = find(&chart, "Role", "database-operator-leader-election").expect("the Lease Role");
    assert_eq!(role["rules"][1]["resourceNames"], serde_json::json!(["orders.example.com"]));
}

#[test]
fn tuning_values_become_flags_and_extra_args_come_last() {
    let chart = render(&["--set", "workers=5", "--set", "kubeApiQps=7.5", "--set", "extraArgs[0]=--workers=9"]);
    let args = manager_args(&chart);
    // After the four arguments of manifests/manager/manager.yaml.
    let tail: Vec<&str> = args.iter().skip(4).map(String::as_str).collect();
    // extraArgs come last, so that they override (the operator takes a repeated flag's last value).
    assert_eq!(tail, ["--workers=5", "--kube-api-qps=7.5", "--workers=9"]);
}

#[test]
fn service_monitor_enabled_renders_the_monitor_of_manifests_prometheus() {
    let chart = render(&["--set", "serviceMonitor.enabled=true"]);
    let expected = kustomize("manifests/prometheus/").remove(0);
    let name = expected["metadata"]["name"].as_str().expect("the ServiceMonitor has a name");
    let rendered = find(&chart, "ServiceMonitor", name)
        .unwrap_or_else(|| panic!("serviceMonitor.enabled=true renders no ServiceMonitor {name}"));
    assert_same_object(&format!("ServiceMonitor {name}"), &expected, rendered);
    assert!(find(&render(&[]), "ServiceMonitor", name).is_none(), "a ServiceMonitor by default");
}

#[test]
fn a_non_numeric_workers_value_is_refused_by_the_schema() {
    let error = render_error(&["--set", "workers=abc"]);
    assert!(error.contains("/workers") && error.contains("integer"), "not the schema's refusal: {error}");
}

#[test]
fn prometheus_rule_enabled_renders_the_rule_file_with_the_release_s_metrics_job() {
    let name = "database-operator-alerts";
    assert!(find(&render(&[]), "PrometheusRule", name).is_none(), "a PrometheusRule by default");
    let chart = render(&["--set", "prometheusRule.enabled=true", "--set", "fullnameOverride=shop"]);
    let rule = find(&chart, "PrometheusRule", "shop-alerts").expect("prometheusRule.enabled=true renders shop-alerts");
    // The file promtool tests, with this release's job in place of the default one.
    let file = read("charts/database-operator/files/prometheus-rules.yaml").replace(
        "job=\"database-operator-controller-manager-metrics-service\"",
        "job=\"shop-controller-manager-metrics-service\"",
    );
    let expected: Value = serde_saphyr::from_str(&file).unwrap();
    assert_eq!(rule["spec"], expected, "the PrometheusRule's spec is not files/prometheus-rules.yaml");
    assert_eq!(rule["metadata"]["namespace"], "database-operator-system");
    let error = render_error(&["--set", "prometheusRule.enabled=true", "--set", "metrics.enabled=false"]);
    assert!(error.contains("prometheusRule.enabled needs metrics.enabled"), "{error}");
}

#[test]
fn grafana_dashboard_enabled_renders_the_dashboard_in_a_config_map_grafana_s_sidecar_loads() {
    let name = "database-operator-dashboard";
    assert!(find(&render(&[]), "ConfigMap", name).is_none(), "a dashboard by default");
    let chart = render(&["--set", "grafanaDashboard.enabled=true", "--set", "grafanaDashboard.namespace=grafana"]);
    let map = find(&chart, "ConfigMap", name).expect("grafanaDashboard.enabled=true renders the ConfigMap");
    assert_eq!(
        (&map["metadata"]["namespace"], &map["metadata"]["labels"]["grafana_dashboard"]),
        (&"grafana".into(), &"1".into())
    );
    let dashboard: Value = serde_json::from_str(map["data"]["database-operator.json"].as_str().unwrap()).unwrap();
    let file: Value = serde_json::from_str(&read("charts/database-operator/files/grafana-dashboard.json")).unwrap();
    assert_eq!(dashboard, file, "the ConfigMap's dashboard is not files/grafana-dashboard.json");
}
