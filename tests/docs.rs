//! The documentation must say what the repository does: these tests compare the docs with the
//! things they describe, so that a change to one without the other fails the test command.
//!
//! - README.md's flags table against `database-operator run --help` (names, environment
//!   variables, defaults), and every subcommand's flags against `run`'s;
//! - README.md's metrics table against the families the operator registers
//!   ([`database_operator::operator::Metrics`], encoded as `/metrics` encodes it);
//! - every path the docs link to or name in code, every chart value and every `--set`;
//! - manifests/rbac/README.md's table of rules against the roles the operator is bound to.
//!
//! None needs a cluster: they read files, run the binary with `--help` and encode a registry.

// In a directory of their own: a file directly in tests/ would be a test target of its own.
#[path = "docs/help.rs"]
mod help;
#[path = "docs/markdown.rs"]
mod markdown;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use markdown::{code, code_spans, relative_links, section, table, unquoted};
use serde_json::Value;

/// The documents a newcomer reads, whose paths and values are checked.
const DOCS: [&str; 3] = ["README.md", "charts/database-operator/README.md", "manifests/rbac/README.md"];

/// A word of code in the docs starting with one of these names a file or directory of the
/// repository (`target/` and `dist/` hold build outputs, which a fresh clone does not have).
const REPOSITORY_DIRECTORIES: [&str; 8] =
    ["manifests/", "charts/", "hack/", "docs/", "src/", "tests/", "benches/", "examples/"];

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = repository().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// README.md, docs/*.md and the other READMEs, as (path, text).
fn documents() -> Vec<(String, String)> {
    let mut paths: Vec<String> = DOCS.iter().map(|path| path.to_string()).collect();
    for entry in std::fs::read_dir(repository().join("docs")).expect("docs/ exists") {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            paths.push(format!("docs/{name}"));
        }
    }
    paths.sort();
    paths.into_iter().map(|path| (path.clone(), read(&path))).collect()
}

/// Fails with every problem found, one a line, under `what`.
fn assert_none(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

// ---------------------------------------------------------------------------------------------
// The kubectl plugin.

/// Runs `kubectl-database args` in an empty environment; its exit status and stdout.
fn plugin(args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-database"))
        .args(args)
        .env_clear()
        .output()
        .expect("run kubectl-database");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Every verb of `kubectl database` answers `--help` (exit 0, its usage naming it, examples of
/// it), and README.md's section on the plugin shows each in an example.
#[test]
fn every_verb_of_the_kubectl_plugin_has_help_and_an_example_in_the_readme() {
    let (ok, help) = plugin(&["--help"]);
    assert!(ok && help.contains("Usage: kubectl database "), "{help}");
    let verbs: Vec<String> = help
        .split("\nCommands:\n")
        .nth(1)
        .expect("--help lists the verbs")
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    assert_eq!(verbs, ["backup", "restore", "backups", "shell", "why", "switchover"]);
    let readme = read("README.md");
    let section = section(&readme, "### The kubectl plugin", "README.md");
    let mut problems = Vec::new();
    for verb in &verbs {
        let (ok, help) = plugin(&[verb, "--help"]);
        if !ok || !help.contains(&format!("Usage: kubectl database {verb} ")) {
            problems.push(format!("`kubectl database {verb} --help` exited {ok} and printed:\n{help}"));
        }
        if !help.contains("Examples:\n") || !help.contains(&format!("  kubectl database {verb} ")) {
            problems.push(format!("`kubectl database {verb} --help` has no example of it"));
        }
        if !section.contains(&format!("kubectl database {verb} ")) {
            problems.push(format!("README.md, ### The kubectl plugin, has no example of `kubectl database {verb}`"));
        }
    }
    assert_none("the kubectl plugin's verbs", &problems);
}

// ---------------------------------------------------------------------------------------------
// Flags.

/// README.md's table writes a default as clap prints it, in backticks. Where clap prints none,
/// the cell says in words what happens without the flag (`in-cluster, else ~/.kube/config`),
/// and a switch's is `off`.
#[test]
fn the_readme_flags_table_lists_exactly_the_flags_of_run_with_their_env_and_default() {
    let readme = read("README.md");
    let rows = table(section(&readme, "## Flags", "README.md"), &["flag", "env", "default"], "README.md, ## Flags");
    let flags = help::flags(&["run"]);
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for row in &rows {
        let (flag, env, default) = (&row[0], &row[1], &row[2]);
        let Some(name) = unquoted(flag) else {
            problems.push(format!("{flag}: write the flag in backticks"));
            continue;
        };
        documented.insert(name.to_string());
        let Some(printed) = flags.get(name) else {
            problems.push(format!("{name} is in the table but not in `database-operator run --help`"));
            continue;
        };
        let expected_env = printed.env.as_ref().map_or_else(String::new, |env| format!("`{env}`"));
        if *env != expected_env {
            problems.push(format!("{name}: the table says env {env:?}, --help says {expected_env:?}"));
        }
        match (&printed.default, printed.takes_value) {
            (Some(value), _) if *default != format!("`{value}`") => {
                problems.push(format!("{name}: the table says default {default:?}, --help says `{value}`"))
            }
            (None, false) if default != "off" => {
                problems.push(format!("{name}: a switch without a default; the table should say off, not {default:?}"))
            }
            (None, true) if default.is_empty() || unquoted(default).is_some() => problems.push(format!(
                "{name}: --help prints no default; say in words what happens without the flag, not {default:?}"
            )),
            _ => {}
        }
    }
    for name in flags.keys().filter(|name| !documented.contains(*name)) {
        problems.push(format!("{name} is printed by `database-operator run --help` but missing from the table"));
    }
    assert_none("README.md, ## Flags, against `database-operator run --help`", &problems);
}

/// The flags of `run` are global (they may come before the subcommand), so every subcommand
/// and the bare command print exactly them; a subcommand with flags of its own would need a
/// table of its own.
#[test]
fn every_subcommand_takes_only_the_flags_of_run_and_is_named_in_the_readme() {
    let readme = read("README.md");
    let flags_section = section(&readme, "## Flags", "README.md");
    let run = help::flags(&["run"]);
    let mut problems = Vec::new();
    let mut commands = help::subcommands();
    assert!(commands.contains(&"run".to_string()), "`database-operator --help` lists no `run`: {commands:?}");
    for command in &commands {
        if !flags_section.contains(&format!("`{command}`")) {
            problems.push(format!("README.md, ## Flags, does not name the subcommand `{command}`"));
        }
    }
    commands.push(String::new());
    for command in &commands {
        let args: Vec<&str> = [command.as_str()].into_iter().filter(|arg| !arg.is_empty()).collect();
        let flags = help::flags(&args);
        for (name, flag) in &flags {
            if run.get(name) != Some(flag) {
                problems.push(format!("`database-operator {command}` has {name} ({flag:?}), which `run` has not"));
            }
        }
        for name in run.keys().filter(|name| !flags.contains_key(*name)) {
            problems.push(format!("`database-operator {command}` lacks {name}, a flag of `run`"));
        }
    }
    if !flags_section.contains("`database-operator --version`") {
        problems.push("README.md, ## Flags, does not say what `database-operator --version` prints".to_string());
    }
    assert_none("the subcommands' flags", &problems);
}

// ---------------------------------------------------------------------------------------------
// Metrics.

/// The families `/metrics` serves, as one queries them (a counter's name with its `_total`), of
/// the registry the operator builds with every option on (API request metrics, leader
/// election), and whether each one's type is known.
///
/// The OpenMetrics text has a `# TYPE` line for a family only once it has a series (the
/// encoder skips empty families), and most have none before the operator runs. So the names
/// come from two places: the `# TYPE` lines (with the type), and the registry's descriptors as
/// its `Debug` output prints them (`Descriptor { name: "workqueue_adds", .. }`, without the
/// type: prometheus-client offers no other way to list them).
async fn served_families() -> BTreeMap<String, Option<String>> {
    use database_operator::operator::{Metrics, Options};
    use operator_runtime::client::RequestMetrics;
    use operator_runtime::events::Recorder;
    use operator_runtime::ops::leader;

    // A client that is never called: the recorder's task only writes the events it is given.
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube_client::Client::try_from(config).expect("a client needs no connection to be built");
    let (recorder, _task) = Recorder::new(client, "example.com/database-operator", "docs-test");
    let mut options = Options::new(None, 1);
    options.request_metrics = Some(RequestMetrics::default());
    options.leader_election = Some(leader::Config::new("database-operator.example.com", "default", "docs-test"));
    let metrics = Metrics::register(&options, &recorder);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, metrics.registry()).unwrap();
    let mut families: BTreeMap<String, Option<String>> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|line| {
            let (name, kind) = line.split_once(' ').unwrap_or_else(|| panic!("a # TYPE line without a type: {line}"));
            (name.to_string(), Some(kind.to_string()))
        })
        .collect();
    let debug = format!("{:?}", metrics.registry());
    let descriptors: BTreeSet<&str> =
        debug.split("Descriptor { name: \"").skip(1).map(|rest| rest.split('"').next().unwrap()).collect();
    // The parsing holds: a family that has a series is among the descriptors.
    for (name, _) in families.iter().filter(|(name, _)| {
        text.lines().any(|line| line.starts_with(&format!("{name}_total{{")) || line.starts_with(&format!("{name}{{")))
    }) {
        assert!(
            descriptors.contains(name.as_str()),
            "{name} has samples but no descriptor in the registry's Debug: {debug}"
        );
    }
    for name in descriptors {
        families.entry(name.to_string()).or_insert(None);
    }
    assert!(families.len() > 10, "few families found; is the parsing right?\n{text}\n{debug}");
    families
}

#[tokio::test]
async fn the_readme_metrics_table_lists_exactly_the_families_the_operator_registers() {
    let readme = read("README.md");
    let metrics = section(&readme, "## Metrics and probes", "README.md");
    let rows = table(metrics, &["series", "labels", "what"], "README.md, ## Metrics and probes");
    let documented: BTreeSet<String> = rows.iter().flat_map(|row| code_spans(&row[0])).map(str::to_string).collect();
    let served = served_families().await;
    // A counter is queried (and documented) with its `_total`; a family without a series yet
    // has no known type, and either name is taken.
    let documents = |name: &str, kind: &Option<String>| match kind.as_deref() {
        Some("counter") => documented.contains(&format!("{name}_total")),
        Some(_) => documented.contains(name),
        None => documented.contains(name) || documented.contains(&format!("{name}_total")),
    };
    let mut problems = Vec::new();
    for (name, kind) in served.iter().filter(|(name, kind)| !documents(name, kind)) {
        let queried = match kind.as_deref() {
            Some("counter") => format!("{name}_total"),
            Some(_) => name.clone(),
            None => format!("{name} (or {name}_total if it is a counter)"),
        };
        problems.push(format!("{queried} is registered (served on /metrics) but missing from the table"));
    }
    for name in &documented {
        let base = name.strip_suffix("_total");
        let registered = match (served.get(name.as_str()), base.and_then(|base| served.get(base))) {
            (Some(kind), _) => kind.as_deref() != Some("counter"),
            (None, Some(kind)) => kind.as_deref().is_none_or(|kind| kind == "counter"),
            (None, None) => false,
        };
        if !registered {
            problems.push(format!("{name} is in the table but the operator registers no such family"));
        }
    }
    assert_none("README.md, ## Metrics and probes, against the operator's registry", &problems);
}

// ---------------------------------------------------------------------------------------------
// Paths.

/// The repository paths named in the code of `text` (inline spans and fenced blocks): each word
/// that starts with one of [`REPOSITORY_DIRECTORIES`], without a `:line` suffix, trailing
/// punctuation or a glob (`manifests/rbac/*.yaml` names `manifests/rbac/`).
fn named_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let (spans, fenced) = code(text);
    for span in spans.into_iter().chain(fenced) {
        for word in span.split(|c: char| c.is_whitespace() || "=(),;|>'\"".contains(c)) {
            if !REPOSITORY_DIRECTORIES.iter().any(|directory| word.starts_with(directory)) {
                continue;
            }
            let mut path = word.split(':').next().unwrap();
            if let Some(glob) = path.find(['*', '?', '[', '{', '<']) {
                path = &path[..path[..glob].rfind('/').map_or(0, |slash| slash + 1)];
            }
            paths.push(path.trim_end_matches(['.', ',', ';', ':']).to_string());
        }
    }
    paths
}

#[test]
fn every_path_the_docs_link_to_or_name_exists() {
    let mut problems = Vec::new();
    for (document, text) in documents() {
        let directory = Path::new(&document).parent().unwrap();
        for link in relative_links(&text) {
            if !repository().join(directory).join(link).exists() {
                problems.push(format!("{document} links to {link}, which does not exist"));
            }
        }
        for path in named_paths(&text) {
            if !repository().join(&path).exists() {
                problems.push(format!("{document} names `{path}`, which does not exist"));
            }
        }
    }
    assert_none("paths in the docs", &problems);
}

// ---------------------------------------------------------------------------------------------
// Chart values.

/// values.yaml's keys as dotted paths (`image.repository`), each with its value. A leaf is a
/// value that is not a map, or an empty map (`podAnnotations: {}`, a map the user fills).
fn chart_values() -> BTreeMap<String, Value> {
    fn walk(prefix: &str, value: &Value, keys: &mut BTreeMap<String, Value>) {
        keys.insert(prefix.to_string(), value.clone());
        if let Value::Object(map) = value {
            for (key, value) in map {
                walk(&format!("{prefix}{}{key}", if prefix.is_empty() { "" } else { "." }), value, keys);
            }
        }
    }
    let values: Value = serde_saphyr::from_str(&read("charts/database-operator/values.yaml")).unwrap();
    let mut keys = BTreeMap::new();
    walk("", &values, &mut keys);
    keys.remove("");
    keys
}

fn is_leaf(value: &Value) -> bool {
    value.as_object().is_none_or(|map| map.is_empty())
}

/// A value as the chart's README writes its default: `""`, `[]`, `{}`, `true`, `8443`, `text`.
fn as_written(value: &Value) -> String {
    match value {
        Value::String(text) if text.is_empty() => "\"\"".to_string(),
        Value::String(text) => text.clone(),
        Value::Array(items) if items.is_empty() => "[]".to_string(),
        Value::Object(map) if map.is_empty() => "{}".to_string(),
        other => other.to_string(),
    }
}

/// A row of the table documents every key below the ones it names (`resources` documents
/// `resources.requests.cpu`). Where a row gives as many backticked defaults as it names keys,
/// each must be the key's value in values.yaml; a default in words (`empty`) is not compared.
#[test]
fn the_chart_values_table_lists_exactly_the_keys_of_values_yaml_with_their_defaults() {
    let where_ = "charts/database-operator/README.md, ## Values";
    let readme = read("charts/database-operator/README.md");
    let rows =
        table(section(&readme, "## Values", "charts/database-operator/README.md"), &["value", "default"], where_);
    let values = chart_values();
    let mut problems = Vec::new();
    let mut documented = Vec::new();
    for row in &rows {
        let keys = code_spans(&row[0]);
        // `20`, `30` for two keys; None when the cell has words.
        let defaults: Option<Vec<&str>> = row[1].split(", ").map(unquoted).collect();
        let defaults = defaults.filter(|defaults| defaults.len() == keys.len());
        for (index, key) in keys.iter().enumerate() {
            documented.push(key.to_string());
            let Some(value) = values.get(*key) else {
                problems.push(format!("`{key}` is in the table but not in values.yaml"));
                continue;
            };
            if let Some(default) = defaults.as_ref().map(|defaults| defaults[index])
                && default != as_written(value)
            {
                problems.push(format!("`{key}`: the table says `{default}`, values.yaml `{}`", as_written(value)));
            }
        }
    }
    let covered = |key: &str| documented.iter().any(|doc| key == doc || key.starts_with(&format!("{doc}.")));
    for (key, _) in values.iter().filter(|(key, value)| is_leaf(value) && !covered(key)) {
        problems.push(format!("`{key}` is in values.yaml but not in the table"));
    }
    assert_none(&format!("{where_}, against charts/database-operator/values.yaml"), &problems);
}

#[test]
fn every_set_in_the_docs_names_a_chart_value() {
    let values = chart_values();
    let mut problems = Vec::new();
    let mut seen = 0;
    for (document, text) in documents() {
        for (at, _) in text.match_indices("--set ") {
            // A shell-quoted assignment (`'list={a,b}'`) is read without its quote.
            let assignment = text[at + "--set ".len()..].split_whitespace().next().unwrap_or("");
            let assignment = assignment.trim_start_matches(['\'', '"']);
            let Some((key, _)) = assignment.split_once('=') else {
                problems.push(format!("{document}: `--set {assignment}` has no key=value"));
                continue;
            };
            seen += 1;
            if !values.contains_key(key) {
                problems.push(format!("{document}: `--set {key}=...` names no value of values.yaml"));
            }
        }
    }
    assert!(seen > 0, "no `--set` found in the docs: is the search right?");
    assert_none("--set in the docs, against charts/database-operator/values.yaml", &problems);
}

// ---------------------------------------------------------------------------------------------
// RBAC.

/// A rule as the RBAC table writes it: API group, resource and the resource names it is
/// limited to (`leases` named `database-operator.example.com`), with its verbs.
type Rules = BTreeMap<(String, String, String, String), BTreeSet<String>>;

/// The roles bound to the operator's ServiceAccount by manifests/rbac/, with their rules, one
/// entry per (role, group, resource, names).
fn bound_roles() -> Rules {
    let directory = repository().join("manifests/rbac");
    let objects: Vec<Value> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "yaml"))
        .filter(|path| !path.ends_with("kustomization.yaml"))
        .map(|path| serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap())
        .collect();
    let operator = |subject: &Value| subject["kind"] == "ServiceAccount" && subject["name"] == "database-operator";
    let bound: BTreeSet<&str> = objects
        .iter()
        .filter(|object| object["kind"].as_str().is_some_and(|kind| kind.ends_with("Binding")))
        .filter(|binding| binding["subjects"].as_array().is_some_and(|subjects| subjects.iter().any(operator)))
        .filter_map(|binding| binding["roleRef"]["name"].as_str())
        .collect();
    let strings = |value: &Value| -> Vec<String> {
        value.as_array().into_iter().flatten().map(|item| item.as_str().unwrap().to_string()).collect()
    };
    let mut rules = Rules::new();
    for role in objects.iter().filter(|object| matches!(object["kind"].as_str(), Some("Role" | "ClusterRole"))) {
        let name = role["metadata"]["name"].as_str().unwrap();
        if !bound.contains(name) {
            continue;
        }
        for rule in role["rules"].as_array().unwrap() {
            let names = strings(&rule["resourceNames"]).join(", ");
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    let key = (name.to_string(), group.clone(), resource, names.clone());
                    rules.entry(key).or_default().extend(strings(&rule["verbs"]));
                }
            }
        }
    }
    rules
}

#[test]
fn the_rbac_readme_lists_exactly_the_verbs_of_the_roles_the_operator_is_bound_to() {
    let where_ = "manifests/rbac/README.md, the operator's rules";
    let readme = read("manifests/rbac/README.md");
    let rows = table(&readme, &["role", "API group", "resources", "verbs", "why", "code"], where_);
    let mut documented = Rules::new();
    let mut role = String::new();
    for row in &rows {
        if let Some(name) = unquoted(&row[0]) {
            role = name.to_string();
        }
        let group = code_spans(&row[1]).first().map(|group| group.replace("\"\"", "")).unwrap_or_default();
        let resources = code_spans(&row[2]);
        let (resource, names) = match resources.as_slice() {
            [resource] => (resource.to_string(), String::new()),
            [resource, names @ ..] if row[2].contains(" named ") => (resource.to_string(), names.join(", ")),
            _ => panic!("{where_}: cannot read the resources cell {:?}", row[2]),
        };
        let verbs = row[3].split(',').map(|verb| verb.trim().to_string()).collect();
        // The code that needs the rule: files of the repository.
        let files: Vec<&str> = code_spans(&row[5]).into_iter().filter(|span| span.ends_with(".rs")).collect();
        assert!(!files.is_empty(), "{where_}: the rule {:?} names no code that needs it", row[2]);
        for file in files {
            assert!(repository().join(file).is_file(), "{where_}: {file} (for {:?}) is not a file", row[2]);
        }
        documented.insert((role.clone(), group, resource, names), verbs);
    }
    let granted = bound_roles();
    let describe = |(role, group, resource, names): &(String, String, String, String)| {
        let named = if names.is_empty() { String::new() } else { format!(" named {names}") };
        format!("{role}: {resource}{named} in group {group:?}")
    };
    let mut problems = Vec::new();
    for (rule, verbs) in &granted {
        match documented.get(rule) {
            None => problems.push(format!("{} ({verbs:?}) is granted but not in the table", describe(rule))),
            Some(listed) if listed != verbs => {
                problems.push(format!("{}: the table says {listed:?}, the role grants {verbs:?}", describe(rule)))
            }
            Some(_) => {}
        }
    }
    for rule in documented.keys().filter(|rule| !granted.contains_key(*rule)) {
        problems.push(format!("{} is in the table but no role bound to the operator grants it", describe(rule)));
    }
    assert_none(&format!("{where_}, against manifests/rbac/*.yaml"), &problems);
}
