//! Stamps the binary with the git revision it was built from, for `database-operator --version`.
//!
//! `GIT_REVISION` in the environment wins (an image built from a source archive has no `.git`);
//! otherwise `git rev-parse` in the checkout; otherwise "unknown". Cargo reruns this script when
//! HEAD moves (a commit or a checkout), not on every edit, so it costs nothing while coding.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GIT_REVISION");
    let git_dir = Path::new(".git");
    // The branch HEAD points at moves with every commit; HEAD itself does not. Only files that
    // exist are named: Cargo takes a missing one as changed, and would rerun at every build.
    let mut watched = vec![git_dir.join("HEAD"), git_dir.join("packed-refs")];
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
        && let Some(reference) = head.strip_prefix("ref: ")
    {
        watched.push(git_dir.join(reference.trim()));
    }
    for path in watched.iter().filter(|path| path.is_file()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let revision = std::env::var("GIT_REVISION").ok().filter(|r| !r.is_empty()).or_else(git_revision);
    println!("cargo:rustc-env=GIT_REVISION={}", revision.as_deref().unwrap_or("unknown"));
}

fn git_revision() -> Option<String> {
    let output = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    let revision = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !revision.is_empty()).then_some(revision)
}
