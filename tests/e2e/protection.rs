//! Deletion protection: with the admission policy of `manifests/policy/` installed (as
//! `kubectl apply -k manifests/` and the chart install it), a Database whose
//! `spec.deletionProtection` is true cannot be deleted, neither by itself nor with its
//! namespace, until the field is set to false; the refusal names the field. Admission only:
//! no operator runs.

use std::process::Command;
use std::time::Duration;

use database_operator::api::{Database, DatabaseSpec, EngineKind, Size};
use k8s_openapi::api::core::v1::Namespace;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{TestNamespace, client, install_crd, wait_until};

/// `kubectl delete database NAME -n NAMESPACE` with `extra` flags: whether it succeeded, and
/// what kubectl said.
fn kubectl_delete(namespace: &str, name: &str, extra: &[&str]) -> (bool, String) {
    let output = Command::new("kubectl")
        .args(["delete", "database", name, "-n", namespace, "--wait=false"])
        .args(extra)
        .output()
        .expect("run kubectl");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr),
    )
}

#[tokio::test]
async fn a_protected_database_is_deleted_neither_alone_nor_with_its_namespace_until_unprotected() {
    let client = client().await;
    install_crd(&client).await;
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/policy");
    let applied = Command::new("kubectl").args(["apply", "--server-side", "-k", policy]).output().unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let ns = TestNamespace::create(&client, "protected").await;
    let databases: Api<Database> = Api::namespaced(client.clone(), &ns.name);
    let mut db =
        Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
    db.spec.deletion_protection = Some(true);
    databases.create(&PostParams::default(), &db).await.unwrap();

    // The policy takes effect a moment after it is made: asked with a dry run until it answers.
    let refused = wait_until("the policy to refuse a dry-run delete", Duration::from_secs(30), || async {
        let (deleted, said) = kubectl_delete(&ns.name, "orders", &["--dry-run=server"]);
        (!deleted).then_some(said)
    })
    .await;
    assert!(refused.contains("spec.deletionProtection: true"), "{refused}");
    let (deleted, said) = kubectl_delete(&ns.name, "orders", &[]);
    assert!(!deleted, "{said}");
    assert!(
        said.contains("ValidatingAdmissionPolicy 'database-operator-deletion-protection'")
            && said.contains("Database orders has spec.deletionProtection: true; set it to false to delete it"),
        "{said}"
    );
    // Unprotected Databases beside it are not concerned.
    databases
        .create(&PostParams::default(), &Database::new("scratch", DatabaseSpec::new(Size::Small, "redis:8")))
        .await
        .unwrap();
    let (deleted, said) = kubectl_delete(&ns.name, "scratch", &[]);
    assert!(deleted, "{said}");

    // The namespace deleted: it stays, Terminating, with the Database in it and the policy's
    // words in its status.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(&ns.name, &Default::default()).await.unwrap();
    let stuck = wait_until("the namespace to report what it cannot delete", Duration::from_secs(60), || async {
        let conditions = namespaces.get(&ns.name).await.ok()?.status?.conditions?;
        let failed =
            conditions.into_iter().find(|c| c.type_ == "NamespaceDeletionContentFailure" && c.status == "True");
        failed.and_then(|c| c.message)
    })
    .await;
    assert!(stuck.contains("spec.deletionProtection: true"), "{stuck}");
    assert!(databases.get_opt("orders").await.unwrap().is_some(), "the protected Database is still there");

    // Unprotected, it goes, and the namespace with it.
    let unprotect = json!({"spec": {"deletionProtection": false}});
    databases.patch("orders", &PatchParams::default(), &Patch::Merge(&unprotect)).await.unwrap();
    wait_until("the namespace to be gone", Duration::from_secs(120), || async {
        namespaces.get_opt(&ns.name).await.ok()?.is_none().then_some(())
    })
    .await;
}
