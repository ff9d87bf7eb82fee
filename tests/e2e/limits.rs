//! The operator's limits (`manifests/policy/operator_limits.yaml`, installed with the operator):
//! its ServiceAccount, here bound to `cluster-admin` (the broadest RBAC there is), is refused
//! by the apiserver every write the policy forbids, each with a message naming the rule, while
//! the writes the operator makes pass. Requests are made with `kubectl --as` the account, which
//! is what admission sees of the account's own token (its username); `tests/e2e/rbac.rs` runs
//! the operator itself, with its token, under the same policy. Admission only: no operator
//! runs, and every write but two is a server-side dry run.

use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube_client::api::{Api, PostParams};
use kube_core::ObjectMeta;
use serde_json::{Value, json};

use crate::common::{AdmissionPolicy, TestNamespace, client, delete_when_dropped};

const MANAGED: &str = "app.kubernetes.io/managed-by";

/// `kubectl <args>` as `user` with `object` on stdin: Ok, or Err with what kubectl said.
fn kubectl_as(user: &str, args: &[&str], object: Option<&Value>) -> Result<(), String> {
    kubectl(&[args, &["--as", user]].concat(), object)
}

/// `kubectl <args>` as the test's own (admin) user, `object` on stdin.
fn kubectl(args: &[&str], object: Option<&Value>) -> Result<(), String> {
    let mut child = Command::new("kubectl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    if let Some(object) = object {
        serde_json::to_writer(stdin, object).unwrap();
    } else {
        drop(stdin);
    }
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    if output.status.success() { Ok(()) } else { Err(said) }
}

fn labelled() -> Value {
    json!({MANAGED: "database-operator"})
}

/// A labelled Deployment whose pod spec is `spec` merged over one plain container.
fn deployment(name: &str, pod: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "database", "image": "postgres:17"}]});
    merge(&mut spec, pod);
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labelled()},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    })
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from,
    }
}

#[tokio::test]
async fn the_operators_account_is_refused_what_its_limits_forbid_even_as_cluster_admin() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "limits").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns.name);
    let account = ServiceAccount {
        metadata: ObjectMeta { name: Some("operator".into()), ..Default::default() },
        ..Default::default()
    };
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding_name = format!("{}-cluster-admin", ns.name);
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(binding_name.clone()), ..Default::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "cluster-admin".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "operator".into(),
            namespace: Some(ns.name.clone()),
            ..Default::default()
        }]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    let _binding = scopeguard(format!("clusterrolebinding/{binding_name}"));
    let _limits = AdmissionPolicy::operator_limits(&ns.name, "operator").await;
    let user = format!("system:serviceaccount:{}:operator", ns.name);
    let policy = format!("ValidatingAdmissionPolicy 'database-operator-limits-{}'", ns.name);
    let n = ns.name.as_str();
    let dry_run = |object: &Value| kubectl_as(&user, &["create", "--dry-run=server", "-n", n, "-f", "-"], Some(object));

    // What the operator writes passes: a labelled Opaque Secret, a labelled Deployment with a
    // restricted pod.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": "orders", "labels": labelled()}, "stringData": {"password": "x"}});
    kubectl_as(&user, &["create", "-n", n, "-f", "-"], Some(&secret)).expect("a labelled Opaque Secret");
    let restricted = json!({"automountServiceAccountToken": false, "securityContext": {"runAsNonRoot": true},
                            "containers": [{"name": "database", "image": "postgres:17",
                                            "ports": [{"containerPort": 5432}],
                                            "securityContext": {"allowPrivilegeEscalation": false,
                                                                "capabilities": {"drop": ["ALL"]}}}]});
    dry_run(&deployment("orders", restricted)).expect("a labelled Deployment with a restricted pod");

    // What it may not, each refused by the policy with its rule's words.
    let foreign_service = json!({"apiVersion": "v1", "kind": "Service",
                                 "metadata": {"name": "theirs"}, "spec": {"ports": [{"port": 80}]}});
    kubectl(&["create", "-n", n, "-f", "-"], Some(&foreign_service)).expect("someone else's Service");
    let cases: Vec<(&str, Result<(), String>, &str)> = vec![
        (
            "an unlabelled Secret",
            dry_run(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain"}})),
            "may write only objects labelled app.kubernetes.io/managed-by=database-operator (secrets plain)",
        ),
        (
            "a service account token Secret",
            dry_run(&json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                            "metadata": {"name": "token", "labels": labelled(),
                                         "annotations": {"kubernetes.io/service-account.name": "default"}}})),
            "may write only Secrets of type Opaque, not kubernetes.io/service-account-token",
        ),
        (
            "a labelled Secret in kube-system",
            kubectl_as(&user, &["create", "--dry-run=server", "-n", "kube-system", "-f", "-"], Some(&secret)),
            "may not write in kube-system",
        ),
        (
            "a ClusterRoleBinding",
            dry_run(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                            "metadata": {"name": format!("{n}-escalate"), "labels": labelled()},
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": n}]})),
            "may not write cluster-scoped objects (clusterrolebindings)",
        ),
        (
            "a pod template with a hostPath volume",
            dry_run(&deployment("hostpath", json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}))),
            "may not mount hostPath volumes (deployments hostpath)",
        ),
        (
            "a pod template that runs as a ServiceAccount",
            dry_run(&deployment("account", json!({"serviceAccountName": "operator"}))),
            "may not run pods as a ServiceAccount (deployments account)",
        ),
        (
            "a pod template in the host's network",
            dry_run(&deployment("network", json!({"hostNetwork": true}))),
            "may not use host namespaces or host ports (deployments network)",
        ),
        (
            "a privileged container",
            dry_run(&deployment(
                "privileged",
                json!({"containers": [{"name": "database", "image": "postgres:17",
                                                                     "securityContext": {"privileged": true}}]}),
            )),
            "may not run privileged containers or add capabilities (deployments privileged)",
        ),
        (
            "a pod with an added capability",
            dry_run(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "caps", "labels": labelled()},
                            "spec": {"containers": [{"name": "c", "image": "postgres:17",
                                                     "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}})),
            "may not run privileged containers or add capabilities (pods caps)",
        ),
        (
            "someone else's Service taken over by labelling it",
            kubectl_as(&user, &["label", "-n", n, "service", "theirs", &format!("{MANAGED}=database-operator")], None),
            "may write only objects labelled app.kubernetes.io/managed-by=database-operator (services theirs)",
        ),
        (
            "someone else's Service deleted",
            kubectl_as(&user, &["delete", "-n", n, "service", "theirs", "--dry-run=server"], None),
            "may write only objects labelled app.kubernetes.io/managed-by=database-operator (services theirs)",
        ),
        (
            "its own Secret's label removed",
            kubectl_as(&user, &["label", "-n", n, "secret", "orders", &format!("{MANAGED}-")], None),
            "may write only objects labelled app.kubernetes.io/managed-by=database-operator (secrets orders)",
        ),
    ];
    for (what, result, rule) in cases {
        let said = result.expect_err(what);
        assert!(said.contains(&policy) && said.contains(rule), "{what}: {said}");
    }
    // The refusals are the policy's, not RBAC's: as cluster-admin, the same account may delete
    // its own labelled Secret.
    kubectl_as(&user, &["delete", "-n", n, "secret", "orders"], None).expect("its own labelled Secret");
}

/// Deletes `object` (`kind/name`) when dropped.
fn scopeguard(object: String) -> impl Drop {
    struct Guard(String);
    impl Drop for Guard {
        fn drop(&mut self) {
            delete_when_dropped(&[&self.0]);
        }
    }
    Guard(object)
}
