//! Facts about the repository that would otherwise drift silently: the declared minimum Rust
//! version is what the locked dependencies need, the manifests' image tag and the Helm chart's
//! version follow the crate's version, and the LICENSE is the license Cargo.toml declares.

use std::path::Path;
use std::process::Command;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// A version such as "1.89" or "1.89.0" as comparable numbers (missing parts are 0).
fn version(text: &str) -> [u32; 3] {
    let mut numbers = [0; 3];
    for (number, part) in numbers.iter_mut().zip(text.split('.')) {
        *number = part.parse().unwrap();
    }
    numbers
}

/// The host's target triple, as rustc reports it.
fn host_triple() -> String {
    let output = Command::new("rustc").arg("-vV").output().expect("run rustc -vV");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.lines().find_map(|line| line.strip_prefix("host: ")).expect("rustc -vV names the host").to_string()
}

/// Offline, so only for the host's platform: a dependency of another platform only (Android's,
/// say) is never downloaded by a build here, and `cargo metadata --offline` without the filter
/// fails on a machine whose cargo cache lacks it (a fresh one).
#[test]
fn rust_version_is_what_the_locked_dependencies_need() {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", &host_triple()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let ours = packages.iter().find(|p| p["name"] == "database-operator").unwrap();
    let declared = version(ours["rust_version"].as_str().expect("rust-version is set"));
    let (needed, by) = packages
        .iter()
        .filter(|p| p["name"] != "database-operator")
        .filter_map(|p| Some((version(p["rust_version"].as_str()?), p["name"].as_str()?.to_string())))
        .max()
        .unwrap();
    assert!(declared >= needed, "rust-version {declared:?} in Cargo.toml is older than {by}'s {needed:?}");
}

#[test]
fn the_manifests_image_tag_is_the_crate_version() {
    let kustomization = read("manifests/kustomization.yaml");
    assert!(
        kustomization.contains(&format!("newTag: {}\n", env!("CARGO_PKG_VERSION"))),
        "manifests/kustomization.yaml's images: entry must tag {} (hack/image.sh builds that tag)",
        env!("CARGO_PKG_VERSION")
    );
}

#[test]
fn the_license_file_is_the_license_cargo_toml_declares() {
    assert!(read("Cargo.toml").contains("license = \"Apache-2.0\""));
    let license = read("LICENSE");
    assert!(license.contains("Apache License") && license.contains("Version 2.0, January 2004"));
}
