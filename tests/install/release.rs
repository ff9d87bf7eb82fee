//! `hack/release.sh VERSION`: install.yaml is what `kubectl kustomize manifests/` renders with
//! the image pinned by the digest of the image archive it writes beside it, and the packaged
//! chart defaults to the same image.

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

    // install.yaml: the manifests, but for the image.
    let install = std::fs::read_to_string(dist.join("install.yaml")).unwrap();
    let (manifests, _) = run("kubectl", &["kustomize", concat!(env!("CARGO_MANIFEST_DIR"), "/manifests")], None);
    let body: String = install.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    assert_eq!(body, manifests.replace(&format!("localhost/database-operator:{version}"), &pinned));
    assert!(install.contains(&format!("image: {pinned}\n")));

    // The chart: its default render names the same image.
    let chart = dist.join(format!("database-operator-{version}.tgz"));
    let (rendered, _) = run(&helm(), &["template", "database-operator", chart.to_str().unwrap()], None);
    assert!(rendered.contains(&format!("image: {pinned}\n")), "{rendered}");

    let (sums, _) = run("sh", &["-c", &format!("cd '{}' && sha256sum --check SHA256SUMS", dist.display())], None);
    assert_eq!(sums.lines().filter(|l| l.ends_with(": OK")).count(), 3, "{sums}");
    std::fs::remove_dir_all(dist).unwrap();
}
