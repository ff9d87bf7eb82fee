//! `manifests/crd/example.com_databases.yaml` and `example.com_databasebackups.yaml` must be
//! exactly what `database-operator crd` prints.
//!
//! The Rust types are the source of the CRD; the manifest is a generated copy for `kubectl apply -k`.
//! This test fails when someone changes the types and forgets to regenerate the manifest (or edits
//! the manifest by hand). It also checks that the two copies of the operator's RBAC rules agree.

use std::path::Path;

const REGENERATE: &str = "hack/generate-crds.sh";

#[test]
fn crd_manifests_match_the_generated_crds() {
    assert_matches("manifests/crd/example.com_databases.yaml", &database_operator::api::crd_yaml());
    assert_matches("manifests/crd/example.com_databasebackups.yaml", &database_operator::api::backup_crd_yaml());
}

fn assert_matches(manifest: &str, generated: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest);
    let on_disk = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}; create it with `{REGENERATE}`", path.display()));
    if on_disk == generated {
        return;
    }
    let first_difference = on_disk
        .lines()
        .zip(generated.lines())
        .position(|(disk, gen_line)| disk != gen_line)
        .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
    let line = |text: &str| text.lines().nth(first_difference).unwrap_or("<end of file>").to_owned();
    panic!(
        "{manifest} is out of date with the types (first difference at line {}):\n  \
         on disk:   {}\n  generated: {}\nregenerate it with:\n  {REGENERATE}",
        first_difference + 1,
        line(&on_disk),
        line(generated),
    );
}

/// The namespaced Role (for `run --namespace`) must grant what the ClusterRole grants, or the
/// operator works cluster-wide and fails in one namespace.
#[test]
fn namespaced_role_has_the_same_rules_as_the_cluster_role() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

    let read = |relative: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
    };
    let cluster_role: ClusterRole = serde_saphyr::from_str(&read("manifests/rbac/role.yaml")).unwrap();
    let role: Role = serde_saphyr::from_str(&read("manifests/rbac/namespaced/role.yaml")).unwrap();
    assert!(cluster_role.rules.as_ref().is_some_and(|rules| !rules.is_empty()));
    assert_eq!(
        role.rules, cluster_role.rules,
        "manifests/rbac/namespaced/role.yaml and manifests/rbac/role.yaml differ in their rules"
    );
}
