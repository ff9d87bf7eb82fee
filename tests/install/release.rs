//! `hack/release.sh VERSION`: crds.yaml and install.yaml are what `kubectl kustomize
//! manifests/` renders with the image pinned by the digest of the image archive it writes
//! beside them, the CRDs alone in crds.yaml; the packaged chart defaults to the same image; the
//! kubectl plugin is one binary that runs as it is.

use crate::{run, user_command};

fn helm() -> String {
    std::env::var("HELM").unwrap_or_else(|_| panic!("HELM is not set: run hack/helm.sh, or hack/test.sh"))
}

#[test]
fn the_release_pins_the_image_by_the_digest_of_its_archive_in_install_yaml_and_the_chart() {
    let version = env!("CARGO_PKG_VERSION");
    let dist = std::env::temp_dir().join(format!("database-operator-dist-{:08x}", rand::random::<u32>()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/release.sh");
    let output = user_command(script)
        .arg(version)
        .env("DIST", &dist)
        .env("IMAGE_REPOSITORY", "registry.example/team/database-operator")
        .output()
        .unwrap();
    assert!(output.status.success(), "hack/release.sh {version}: {}", String::from_utf8_lossy(&output.stderr));

    // The archive's manifest digest, computed here from its content.
    let archive = dist.join(format!("database-operator-{version}.oci.tar"));
    let (index, _) = run("tar", &["-xOf", archive.to_str().unwrap(), "index.json"], None);
    let index: serde_json::Value = serde_json::from_str(&index).unwrap();
    let digest = index["manifests"][0]["digest"].as_str().unwrap().to_string();
    let blob = format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"));
    let (manifest, _) = run("sh", &["-c", &format!("tar -xOf '{}' '{blob}' | sha256sum", archive.display())], None);
    assert_eq!(format!("sha256:{}", &manifest[..64]), digest, "the manifest blob hashes to its digest");
    let pinned = format!("registry.example/team/database-operator@{digest}");

    // crds.yaml and install.yaml: the manifests, but for the image, split in two: the CRDs
    // alone in crds.yaml, so that deleting install.yaml deletes no Database.
    let documents = |file: &str| {
        let text = std::fs::read_to_string(dist.join(file)).unwrap();
        let body: String = text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
        body.split("---\n").map(str::to_string).collect::<Vec<_>>()
    };
    let (crds, install) = (documents("crds.yaml"), documents("install.yaml"));
    let kind =
        |document: &String| document.lines().find_map(|l| l.strip_prefix("kind: ")).unwrap_or_default().to_string();
    assert_eq!(crds.iter().map(kind).collect::<Vec<_>>(), ["CustomResourceDefinition"; 2]);
    assert!(!install.iter().any(|d| kind(d) == "CustomResourceDefinition"), "install.yaml holds a CRD");
    let (manifests, _) = run("kubectl", &["kustomize", concat!(env!("CARGO_MANIFEST_DIR"), "/manifests")], None);
    let manifests = manifests.replace(&format!("localhost/database-operator:{version}"), &pinned);
    let mut released: Vec<_> = crds.into_iter().chain(install.iter().cloned()).collect();
    let mut expected: Vec<_> = manifests.split("---\n").map(str::to_string).collect();
    released.sort();
    expected.sort();
    assert_eq!(released, expected, "crds.yaml and install.yaml together are the manifests");
    assert!(install.iter().any(|d| d.contains(&format!("image: {pinned}\n"))));

    // The chart: its default render names the same image.
    let chart = dist.join(format!("database-operator-{version}.tgz"));
    let (rendered, _) = run(&helm(), &["template", "database-operator", chart.to_str().unwrap()], None);
    assert!(rendered.contains(&format!("image: {pinned}\n")), "{rendered}");

    // The kubectl plugin: one binary that runs here as it is.
    let plugin = dist.join(format!("kubectl-database-{version}-linux-amd64"));
    let (help, _) = run(plugin.to_str().unwrap(), &["--help"], None);
    assert!(help.contains("backup") && help.contains("restore") && help.contains("why"), "{help}");

    let (sums, _) = run("sh", &["-c", &format!("cd '{}' && sha256sum --check SHA256SUMS", dist.display())], None);
    assert_eq!(sums.lines().filter(|l| l.ends_with(": OK")).count(), 5, "{sums}");
    std::fs::remove_dir_all(dist).unwrap();
}
