//! Rendering the chart and the manifests into JSON values, and comparing them.
//!
//! Every failure to run a tool or to parse its output panics with what to do about it: these are
//! tests, and a missing tool must fail them, never skip them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value};

/// The chart, relative to the repository.
pub(crate) const CHART: &str = "charts/database-operator";
/// The release name that gives the chart's objects the names of manifests/.
const RELEASE: &str = "database-operator";
/// The namespace of manifests/kustomization.yaml.
const NAMESPACE: &str = "database-operator-system";

/// The labels Helm charts put on every object to say which release and chart made it;
/// manifests/ has none of them. Also in the selectors, where the instance label keeps two releases
/// in one namespace from selecting each other's Pods.
pub(crate) const HELM_LABELS: [&str; 4] =
    ["helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"];

/// The annotation that keeps the CRD on `helm uninstall` (crds.keep).
const KEEP_ANNOTATION: &str = "helm.sh/resource-policy";

const NO_HELM: &str = "HELM is not set: these tests run the helm CLI. Build it with `hack/helm.sh` and set \
                       HELM to the path it prints on its last line (HELM=$(hack/helm.sh | tail -n1) cargo test \
                       --test chart), or run the whole suite with hack/test.sh, which does both";

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The text of a file of the repository.
pub(crate) fn read(relative: &str) -> String {
    let path = repository().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// What a command printed, and whether it succeeded.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: std::process::ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

fn run(program: &Path, args: &[&str], hint: &str) -> Output {
    let output = Command::new(program)
        .args(args)
        .current_dir(repository())
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}; {hint}", program.display()));
    Output {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs helm (the binary in `HELM`) in the repository.
pub(crate) fn helm(args: &[&str]) -> Output {
    let program = std::env::var_os("HELM").filter(|path| !path.is_empty()).unwrap_or_else(|| panic!("{NO_HELM}"));
    run(&PathBuf::from(program), args, "is HELM the path hack/helm.sh printed?")
}

fn template(values: &[&str]) -> Output {
    let mut args = vec!["template", RELEASE, CHART, "--namespace", NAMESPACE];
    args.extend_from_slice(values);
    helm(&args)
}

/// The objects the chart renders for a release named database-operator in
/// database-operator-system, with `values` (`--set` arguments) on top of the defaults.
pub(crate) fn render(values: &[&str]) -> Vec<Value> {
    let output = template(values);
    assert!(output.status.success(), "helm template {values:?} failed:\n{}", output.stderr);
    parse(&output.stdout, &format!("the output of helm template {values:?}"))
}

/// Why helm refuses to render the chart with `values`; panics if it renders.
pub(crate) fn render_error(values: &[&str]) -> String {
    let output = template(values);
    assert!(!output.status.success(), "helm template {values:?} rendered, but should have been refused");
    output.stderr
}

/// The objects `kubectl kustomize` renders from a directory of the repository.
pub(crate) fn kustomize(directory: &str) -> Vec<Value> {
    let kubectl = std::env::var_os("KUBECTL").unwrap_or_else(|| "kubectl".into());
    let output = run(Path::new(&kubectl), &["kustomize", directory], "install kubectl, or set KUBECTL to its path");
    assert!(output.status.success(), "kubectl kustomize {directory} failed:\n{}", output.stderr);
    parse(&output.stdout, &format!("the output of kubectl kustomize {directory}"))
}

/// The one object in a YAML file of the repository.
pub(crate) fn manifest(relative: &str) -> Value {
    let mut objects = parse(&read(relative), relative);
    assert_eq!(objects.len(), 1, "{relative} should hold one object");
    objects.remove(0)
}

fn parse(yaml: &str, what: &str) -> Vec<Value> {
    serde_saphyr::from_multiple(yaml).unwrap_or_else(|err| panic!("{what} is not valid YAML: {err}\n{yaml}"))
}

/// What identifies an object in a cluster: "apiVersion kind namespace/name" (no namespace for
/// a cluster-scoped object).
pub(crate) fn key(object: &Value) -> String {
    let field = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let namespace = field("/metadata/namespace");
    let name = field("/metadata/name");
    let scoped = if namespace.is_empty() { name.to_owned() } else { format!("{namespace}/{name}") };
    format!("{} {} {scoped}", field("/apiVersion"), field("/kind"))
}

/// The object of this kind and name, in whatever namespace.
pub(crate) fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects.iter().find(|object| object["kind"] == kind && object["metadata"]["name"] == name)
}

/// The arguments of the operator's container.
pub(crate) fn manager_args(objects: &[Value]) -> Vec<String> {
    let deployment = find(objects, "Deployment", "database-operator-controller-manager")
        .expect("the chart renders the Deployment database-operator-controller-manager");
    let args = deployment
        .pointer("/spec/template/spec/containers/0/args")
        .and_then(Value::as_array)
        .expect("the manager container has args");
    args.iter().map(|arg| arg.as_str().expect("an argument is a string").to_owned()).collect()
}

/// The object without Helm's labels (wherever labels are: the object's, the Pod template's, the
/// selectors) and without the CRD's keep annotation; a label or annotation map left empty goes too,
/// since manifests/ has none where Helm's labels are the only ones.
pub(crate) fn without_helm_metadata(object: &Value) -> Value {
    let mut object = object.clone();
    let label_maps =
        ["/metadata/labels", "/spec/template/metadata/labels", "/spec/selector/matchLabels", "/spec/selector"];
    for pointer in label_maps {
        if let Some(Value::Object(labels)) = object.pointer_mut(pointer) {
            for label in HELM_LABELS {
                labels.remove(label);
            }
        }
    }
    if let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations") {
        annotations.remove(KEEP_ANNOTATION);
    }
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        remove_if_empty(metadata, "labels");
        remove_if_empty(metadata, "annotations");
    }
    object
}

fn remove_if_empty(map: &mut Map<String, Value>, key: &str) {
    if map.get(key).and_then(Value::as_object).is_some_and(Map::is_empty) {
        map.remove(key);
    }
}

/// Where `chart` differs from `manifests`, one line per JSON pointer; empty when they are equal.
pub(crate) fn differences(manifests: &Value, chart: &Value) -> Vec<String> {
    let mut found = Vec::new();
    collect_differences("", manifests, chart, &mut found);
    found
}

fn collect_differences(pointer: &str, manifests: &Value, chart: &Value, found: &mut Vec<String>) {
    let only = |pointer: &str, side: &str, value: &Value| format!("  {pointer}: only in {side}: {value}");
    match (manifests, chart) {
        (Value::Object(left), Value::Object(right)) => {
            let keys = left.keys().chain(right.keys().filter(|key| !left.contains_key(*key)));
            for key in keys {
                let child = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (left.get(key), right.get(key)) {
                    (Some(left), Some(right)) => collect_differences(&child, left, right, found),
                    (Some(left), None) => found.push(only(&child, "manifests/", left)),
                    (None, Some(right)) => found.push(only(&child, "the chart", right)),
                    (None, None) => unreachable!("the key comes from one of the maps"),
                }
            }
        }
        (Value::Array(left), Value::Array(right)) => {
            for index in 0..left.len().max(right.len()) {
                let child = format!("{pointer}/{index}");
                match (left.get(index), right.get(index)) {
                    (Some(left), Some(right)) => collect_differences(&child, left, right, found),
                    (Some(left), None) => found.push(only(&child, "manifests/", left)),
                    (None, Some(right)) => found.push(only(&child, "the chart", right)),
                    (None, None) => unreachable!("the index is below one of the lengths"),
                }
            }
        }
        (left, right) if left == right => {}
        (left, right) => found.push(format!("  {pointer}: manifests/ has {left}, the chart has {right}")),
    }
}
