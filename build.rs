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
    if git_dir.is_dir() {
        println!("cargo:rerun-if-changed=.git/HEAD");
        println!("cargo:rerun-if-changed=.git/packed-refs");
        // The branch HEAD points at moves with every commit; HEAD itself does not.
        if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
            && let Some(reference) = head.strip_prefix("ref: ")
        {
            println!("cargo:rerun-if-changed=.git/{}", reference.trim());
        }
    }
    let revision = std::env::var("GIT_REVISION").ok().filter(|r| !r.is_empty()).or_else(git_revision);
    println!("cargo:rustc-env=GIT_REVISION={}", revision.as_deref().unwrap_or("unknown"));
}

fn git_revision() -> Option<String> {
    let output = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    let revision = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !revision.is_empty()).then_some(revision)
}
