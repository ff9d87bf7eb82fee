//! The tutorial cannot rot: docs/tutorial.md's command blocks run here, in order, on the
//! control plane, and their outputs are checked against the ones the tutorial shows;
//! docs/tutorial.zh.md must hold the very same blocks.
//!
//! What the harness reads in a tutorial:
//! - a ```` ```sh ```` block is run, with bash (`set -euo pipefail`), from the repository's
//!   root; what it exports (`export`, `eval "$(hack/control-plane.sh env)"`) carries over to
//!   the next block, as it would in the reader's shell;
//! - a ```` ```text ```` block right after it is the output it must end with: the last lines
//!   of what the block printed (stdout and stderr together), line for line, where runs of
//!   spaces match any run of spaces and a word in angle brackets (`<age>`) matches any text;
//! - `<!-- tutorial: fails -->` on the line before a block: it must exit non-zero;
//! - every other fence (`console`, `yaml`, ...) is for reading only.
//!
//! It needs the plane of hack/test.sh: `PLANE` names it and `KUBECONFIG` points at it (the
//! tutorial's first block runs `hack/control-plane.sh up`, which finds it already up), plus
//! podman and the Go toolchain for the image and helm, as the tutorial's reader needs them.
//! Before it starts, the harness removes what an earlier test may have left of the operator
//! (its CRDs and namespaces), so the plane looks like a fresh cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const ENGLISH: &str = "docs/tutorial.md";
const CHINESE: &str = "docs/tutorial.zh.md";
const FAILS: &str = "<!-- tutorial: fails -->";
/// The environment a reader's shell passes on; everything else cargo set for the test is
/// dropped. `PLANE` and `KUBECONFIG` name the plane, `CONTAINERD_ADDRESS` its real node's
/// containerd, `IMAGE` and `HELM` what hack/test.sh built.
const KEPT: [&str; 17] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "TERM",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "RUSTUP_HOME",
    "CARGO_HOME",
    "HELM",
    "CONTAINERS_CONF",
    "KUBECONFIG",
    "CONTAINERD_ADDRESS",
    "IMAGE",
    "PLANE",
];
/// The longest a block may run: the slowest waits in the tutorial are 3 minutes.
const BLOCK_TIMEOUT_SECONDS: u32 = 600;

/// One runnable block of a tutorial.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    /// Its first line's number in the file (1-based), for messages.
    line: usize,
    code: String,
    /// The lines its output must end with.
    expected: Option<Vec<String>>,
    /// It must fail.
    fails: bool,
}

/// The runnable blocks of a tutorial, in order.
fn blocks(markdown: &str) -> Vec<Block> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks: Vec<Block> = Vec::new();
    let mut i = 0;
    // Whether the last fence closed was a runnable block with only blank lines since.
    let mut after_block = false;
    while i < lines.len() {
        let line = lines[i].trim_end();
        let Some(info) = line.strip_prefix("```") else {
            if !line.trim().is_empty() {
                after_block = false;
            }
            i += 1;
            continue;
        };
        let start = i + 1;
        let end = (start..lines.len())
            .find(|&j| lines[j].trim_end() == "```")
            .unwrap_or_else(|| panic!("line {}: a fence that is never closed", i + 1));
        let body = lines[start..end].join("\n");
        match info.trim() {
            "sh" => {
                let fails = lines[..i].iter().rev().find(|l| !l.trim().is_empty()).is_some_and(|l| l.trim() == FAILS);
                blocks.push(Block { line: i + 1, code: body, expected: None, fails });
                after_block = true;
            }
            "text" if after_block => {
                let block = blocks.last_mut().expect("a text block follows a runnable one");
                block.expected = Some(lines[start..end].iter().map(|l| l.to_string()).collect());
                after_block = false;
            }
            _ => after_block = false,
        }
        i = end + 1;
    }
    blocks
}

/// `expected` line as a regular expression: placeholders match any text, spaces any spaces.
fn pattern(expected: &str) -> regex::Regex {
    let mut pattern = String::from("^");
    let mut rest = expected.trim();
    while !rest.is_empty() {
        if rest.starts_with(char::is_whitespace) {
            rest = rest.trim_start();
            pattern.push_str(r"\s+");
        } else if let Some(end) =
            rest.strip_prefix('<').and_then(|r| r.find(|c: char| c == '>' || c == '<' || c.is_whitespace()))
            && rest[1 + end..].starts_with('>')
            && end > 0
        {
            pattern.push_str(".+?");
            rest = &rest[end + 2..];
        } else {
            let mut chars = rest.chars();
            let c = chars.next().expect("rest is not empty");
            pattern.push_str(&regex::escape(&c.to_string()));
            rest = chars.as_str();
        }
    }
    pattern.push('$');
    regex::Regex::new(&pattern).unwrap_or_else(|err| panic!("the expected line {expected:?}: {err}"))
}

/// Why `output` does not end with `expected`, if it does not.
fn mismatch(expected: &[String], output: &str) -> Option<String> {
    let printed: Vec<&str> = output.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let expected: Vec<&String> = expected.iter().filter(|l| !l.trim().is_empty()).collect();
    if printed.len() < expected.len() {
        return Some(format!("{} lines expected, {} printed", expected.len(), printed.len()));
    }
    let tail = &printed[printed.len() - expected.len()..];
    expected
        .iter()
        .zip(tail)
        .find(|(want, got)| !pattern(want).is_match(got.trim()))
        .map(|(want, got)| format!("expected a line like\n  {want}\nbut it printed\n  {got}"))
}

/// Runs `block` in bash from the repository's root with the environment in `state` (a file of
/// `export` lines), and saves what it exports there. Returns its exit status and output.
fn run(block: &Block, state: &Path) -> (bool, String) {
    let script = format!(
        "set -euo pipefail\ncd {ROOT:?}\nsource {state:?}\n{code}\nexport -p > {state:?}\n",
        state = state.display().to_string(),
        code = block.code
    );
    let mut command = Command::new("timeout");
    // The reader's environment, not the one cargo gives a test (CARGO_*, OUT_DIR, ...): the
    // tutorial's own cargo build (hack/image.sh) would otherwise see another
    // environment than the suite's builds and rebuild everything.
    command.env_clear();
    for (name, value) in std::env::vars_os() {
        let name_str = name.to_string_lossy();
        if KEPT.contains(&name_str.as_ref()) || name_str.starts_with("GO") || name_str.starts_with("LC_") {
            command.env(name, value);
        }
    }
    let output = command
        .arg(BLOCK_TIMEOUT_SECONDS.to_string())
        .args(["bash", "-c", &format!("exec 2>&1\n{script}")])
        .output()
        .expect("bash runs");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(relative)).unwrap_or_else(|err| panic!("{relative}: {err}"))
}

/// Runs a tutorial's blocks in order; panics at the first that fails or shows other output.
fn run_tutorial(relative: &str) {
    let plane = std::env::var("PLANE").unwrap_or_default();
    assert!(
        !plane.is_empty() && std::env::var_os("KUBECONFIG").is_some(),
        "the tutorial needs the test plane: run hack/test.sh, or set PLANE to the name of a running \
         plane of hack/control-plane.sh and KUBECONFIG to its kubeconfig"
    );
    let state: PathBuf = std::env::temp_dir().join(format!("database-operator-tutorial-{}.env", std::process::id()));
    std::fs::write(&state, "").unwrap();
    let fresh = Block {
        line: 0,
        code: "kubectl delete namespace shop database-operator-system --ignore-not-found --wait\n\
               kubectl delete crd databases.example.com databasebackups.example.com --ignore-not-found --wait"
            .into(),
        expected: None,
        fails: false,
    };
    let (ok, output) = run(&fresh, &state);
    assert!(ok, "removing what earlier tests left of the operator:\n{output}");
    for block in blocks(&read(relative)) {
        let started = std::time::Instant::now();
        let (ok, output) = run(&block, &state);
        eprintln!(
            "{relative}:{}: {} in {:.1} s",
            block.line,
            if ok { "ok" } else { "failed" },
            started.elapsed().as_secs_f64()
        );
        assert_eq!(
            ok,
            !block.fails,
            "{relative}:{}: the block {} but the tutorial says it {}:\n{}\n--- output ---\n{output}",
            block.line,
            if ok { "succeeded" } else { "failed" },
            if block.fails { "fails" } else { "succeeds" },
            block.code
        );
        if let Some(why) = block.expected.as_deref().and_then(|expected| mismatch(expected, &output)) {
            panic!("{relative}:{}: {why}\n--- the block ---\n{}\n--- output ---\n{output}", block.line, block.code);
        }
    }
    let _ = std::fs::remove_file(&state);
}

#[test]
fn both_languages_run_the_same_commands_and_show_the_same_outputs() {
    let english = blocks(&read(ENGLISH));
    let chinese = blocks(&read(CHINESE));
    assert!(english.len() > 10, "docs/tutorial.md has {} runnable blocks", english.len());
    for (i, (en, zh)) in english.iter().zip(&chinese).enumerate() {
        assert_eq!(
            (&en.code, &en.expected, en.fails),
            (&zh.code, &zh.expected, zh.fails),
            "block {} differs: {ENGLISH}:{} and {CHINESE}:{}",
            i + 1,
            en.line,
            zh.line
        );
    }
    assert_eq!(english.len(), chinese.len(), "{ENGLISH} and {CHINESE} have different numbers of runnable blocks");
}

#[test]
fn the_tutorial_runs_as_written() {
    run_tutorial(ENGLISH);
}

#[test]
fn blocks_are_read_with_their_outputs_and_failures() {
    let markdown = "intro\n```sh\necho hi\n```\n\n```text\nhi\n```\n<!-- tutorial: fails -->\n```sh\nfalse\n```\n\
                    ```console\n$ not run\n```\n```text\nnot an output\n```\n";
    let found = blocks(markdown);
    assert_eq!(
        found,
        vec![
            Block { line: 2, code: "echo hi".into(), expected: Some(vec!["hi".into()]), fails: false },
            Block { line: 10, code: "false".into(), expected: None, fails: true },
        ]
    );
}

#[test]
fn an_output_matches_when_it_ends_with_the_shown_lines() {
    let shown = ["NAME   READY   AGE".to_string(), "orders <ready>  <age>".to_string()];
    assert_eq!(mismatch(&shown, "warning: x\nNAME READY AGE\norders 1/1 3m2s\n"), None);
    assert!(mismatch(&shown, "NAME READY AGE\nbilling 1/1 3s\n").is_some(), "another name");
    assert!(mismatch(&shown, "NAME READY AGE\norders 1/1 3s\nextra 1 2\n").is_some(), "a line after the shown ones");
    assert!(mismatch(&shown, "orders 1/1 3s\n").is_some(), "fewer lines");
    let uri = ["postgresql://app:<password>@orders.shop.svc:5432/app".to_string()];
    assert_eq!(mismatch(&uri, "postgresql://app:s3cr3t@orders.shop.svc:5432/app"), None);
    assert!(mismatch(&uri, "postgresql://app:s3cr3t@orders.default.svc:5432/app").is_some());
    // kubectl's own <none> is literal text that a placeholder also matches.
    assert_eq!(mismatch(&["a <none> b".to_string()], "a <none> b"), None);
}
