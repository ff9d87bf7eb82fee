//! The layout stays as designed (docs/design.md, "Where things are"): this test reads the
//! sources of both crates and fails when
//!
//! - a circle of modules appears (a imports b, b imports ... a), in either crate;
//! - a controller imports another controller (`database` and `backup` only meet in what lies
//!   below both);
//! - a module of the operator imports one above it: `api` < `engine` < `resources` <
//!   `database`, `backup` < `desired`, `operator`, `plugin` < `cli`;
//! - a module imports the kubectl plugin (`plugin`: nothing depends on it);
//! - a function of a reconcile (`src/database/`, `src/backup/`) is longer than
//!   [`LONGEST_FUNCTION`] lines.
//!
//! An import is any path through `crate::`, `super::` or `self::`, in a `use` or in code,
//! resolved to the file of the module that defines what it names (through `pub use`
//! re-exports). A module using its own ancestor's items is not an edge (a parent module owns
//! its children). Inline modules (`mod tests { .. }`) are not part of the layout: a test may
//! reach anything it tests.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

/// The longest function a reconcile may have, in lines, its signature and braces included.
const LONGEST_FUNCTION: usize = 60;

/// The operator's top-level modules, lowest first: each may import only those before it (and
/// a controller not the other controller).
const LAYERS: &[&[&str]] = &[
    &["api"],
    &["engine", "bucket"],
    &["resources"],
    &["database", "backup"],
    &["desired", "operator", "plugin"],
    &["cli"],
];

type Module = Vec<String>;

/// One crate's sources: every module file, by module path.
struct Crate {
    modules: BTreeMap<Module, String>,
}

impl Crate {
    fn read(root: &str) -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(root);
        let mut modules = BTreeMap::new();
        for file in rust_files(&root) {
            let relative = file.strip_prefix(&root).unwrap();
            let mut path: Module = relative.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            let last = path.pop().unwrap();
            match last.as_str() {
                "lib.rs" if path.is_empty() => {}
                "main.rs" if path.is_empty() => continue,
                "mod.rs" => {}
                _ => path.push(last.trim_end_matches(".rs").to_string()),
            }
            modules.insert(path, code_of(&fs::read_to_string(&file).unwrap()));
        }
        Self { modules }
    }

    /// The modules each module imports.
    fn imports(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        self.modules
            .iter()
            .map(|(module, code)| {
                let targets = paths(code)
                    .into_iter()
                    .filter_map(|path| self.resolve(module, &path))
                    .filter(|target| target != module && !module.starts_with(target))
                    .collect();
                (module.clone(), targets)
            })
            .collect()
    }

    /// The module that defines what `path` (as written in `from`) names.
    fn resolve(&self, from: &Module, path: &[String]) -> Option<Module> {
        let (mut base, rest) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (from.clone(), &path[1..]),
            "super" => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                (from[..from.len().checked_sub(supers)?].to_vec(), &path[supers..])
            }
            _ => return None,
        };
        for (i, segment) in rest.iter().enumerate() {
            let mut next = base.clone();
            next.push(segment.clone());
            if self.modules.contains_key(&next) {
                base = next;
                continue;
            }
            // Not a module: an item of `base`, perhaps re-exported from elsewhere.
            return Some(self.reexported(&base, segment, &rest[i + 1..]).unwrap_or(base));
        }
        Some(base)
    }

    /// Where `module` re-exports `name` from (`pub use x::name`, `pub use x::*`), resolved.
    fn reexported(&self, module: &Module, name: &str, rest: &[String]) -> Option<Module> {
        let code = self.modules.get(module)?;
        let uses = Regex::new(r"(?s)\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);").unwrap();
        for tree in uses.captures_iter(code) {
            for used in expand(&tree[1]) {
                let (last, prefix) = used.split_last()?;
                let mut target: Vec<String> =
                    if prefix.first().is_some_and(|s| s == "crate" || s == "super" || s == "self") {
                        prefix.to_vec()
                    } else {
                        std::iter::once("self".to_string()).chain(prefix.iter().cloned()).collect()
                    };
                let alias = last.split(" as ").last().unwrap_or(last).trim();
                let original = last.split(" as ").next().unwrap_or(last).trim();
                if alias == name {
                    target.push(original.to_string());
                } else if original == "*" {
                    let glob = self.resolve(module, &target)?;
                    let defines =
                        Regex::new(&format!(r"\b(struct|enum|fn|trait|type|const|static|mod)\s+{name}\b")).unwrap();
                    if !self.modules.get(&glob).is_some_and(|c| defines.is_match(c)) {
                        continue;
                    }
                    target.push(name.to_string());
                } else {
                    continue;
                }
                target.extend(rest.iter().cloned());
                return self.resolve(module, &target);
            }
        }
        None
    }
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The code of a file: without comments and without inline modules.
fn code_of(source: &str) -> String {
    let mut code: String =
        source.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let inline = Regex::new(r"\bmod\s+\w+\s*\{").unwrap();
    while let Some(found) = inline.find(&code) {
        let mut depth = 0;
        let mut end = code.len();
        for (i, c) in code[found.end() - 1..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = found.end() - 1 + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        code.replace_range(found.start()..end, "");
    }
    code
}

/// Every path through `crate::`, `super::` or `self::` in `code`, as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let uses = Regex::new(r"(?s)\buse\s+([^;]+);").unwrap();
    let mut found: Vec<Vec<String>> = uses.captures_iter(code).flat_map(|c| expand(&c[1])).collect();
    let rest = uses.replace_all(code, "");
    let inline = Regex::new(r"\b(?:crate|super|self)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+").unwrap();
    found.extend(inline.find_iter(&rest).map(|m| m.as_str().split("::").map(str::to_string).collect()));
    found.retain(|path| path.first().is_some_and(|s| s == "crate" || s == "super" || s == "self"));
    found
}

/// A `use` tree as paths: `a::{b, c::{d, e}}` is `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()];
    };
    let prefix: Vec<String> =
        tree[..open].split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|rest| if rest == ["self"] { prefix.clone() } else { prefix.iter().cloned().chain(rest).collect() })
        .collect()
}

/// A circle in `imports`, if there is one, as the modules along it.
fn circle(imports: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        module: &Module,
        imports: &BTreeMap<Module, BTreeSet<Module>>,
        done: &mut BTreeSet<Module>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = stack.iter().position(|m| m == module) {
            let mut found = stack[at..].to_vec();
            found.push(module.clone());
            return Some(found);
        }
        if done.contains(module) {
            return None;
        }
        stack.push(module.clone());
        for next in imports.get(module).into_iter().flatten() {
            if let Some(found) = visit(next, imports, done, stack) {
                return Some(found);
            }
        }
        stack.pop();
        done.insert(module.clone());
        None
    }
    let mut done = BTreeSet::new();
    imports.keys().find_map(|module| visit(module, imports, &mut done, &mut Vec::new()))
}

fn name(module: &Module) -> String {
    if module.is_empty() { "crate".into() } else { module.join("::") }
}

fn layer(module: &Module) -> Option<usize> {
    let top = module.first()?;
    LAYERS.iter().position(|layer| layer.contains(&top.as_str()))
}

#[test]
fn no_circle_of_modules_in_either_crate() {
    for root in ["src", "runtime/src"] {
        let imports = Crate::read(root).imports();
        assert!(imports.len() > 10, "{root}: the sources were read");
        if let Some(found) = circle(&imports) {
            let names: Vec<String> = found.iter().map(name).collect();
            panic!("{root}: an import circle: {}", names.join(" -> "));
        }
    }
}

#[test]
fn the_operator_s_modules_import_only_downward_and_no_controller_imports_another() {
    let imports = Crate::read("src").imports();
    let mut wrong = Vec::new();
    for (from, targets) in &imports {
        for to in targets {
            let (Some(a), Some(b)) = (layer(from), layer(to)) else { continue };
            if from.first() != to.first() && a <= b {
                wrong.push(format!("{} imports {}", name(from), name(to)));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that do not look down:\n{}", wrong.join("\n"));
    // The rule is checked on something: both controllers import the layers below them.
    for controller in ["database", "backup"] {
        let below: BTreeSet<&str> = imports
            .iter()
            .filter(|(from, _)| from.first().is_some_and(|top| top == controller))
            .flat_map(|(_, targets)| targets.iter().filter_map(|t| t.first().map(String::as_str)))
            .collect();
        assert!(below.contains("api") && below.contains("resources"), "{controller} imports {below:?}");
    }
}

/// The kubectl plugin stands beside the operator: it uses what lies below, and the operator
/// never depends on it (a change to a verb never changes what the operator does).
#[test]
fn nothing_imports_the_kubectl_plugin() {
    let imports = Crate::read("src").imports();
    let importers: Vec<String> = imports
        .iter()
        .filter(|(from, targets)| {
            from.first().is_none_or(|top| top != "plugin")
                && targets.iter().any(|t| t.first().is_some_and(|top| top == "plugin"))
        })
        .map(|(from, _)| name(from))
        .collect();
    assert!(importers.is_empty(), "modules that import the plugin: {importers:?}");
    assert!(imports.keys().any(|m| m.first().is_some_and(|top| top == "plugin")), "the plugin's sources were read");
}

#[test]
fn a_circle_and_an_upward_import_are_found() {
    let imports: BTreeMap<Module, BTreeSet<Module>> = [
        (vec!["a".to_string()], BTreeSet::from([vec!["b".to_string()]])),
        (vec!["b".to_string()], BTreeSet::from([vec!["a".to_string()]])),
    ]
    .into();
    assert_eq!(circle(&imports).map(|c| c.len()), Some(3));
    assert_eq!(expand("super::{a, b::{c, self}}").len(), 3);
    assert!(layer(&vec!["api".into()]) < layer(&vec!["database".into()]));
}

#[test]
fn no_function_of_a_reconcile_is_longer_than_sixty_lines() {
    let header = Regex::new(r"^\s*(pub(\([a-z]+\))?\s+)?(async\s+)?fn\s+(\w+)").unwrap();
    let mut long = Vec::new();
    for dir in ["src/database", "src/backup"] {
        for file in rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)) {
            let source = fs::read_to_string(&file).unwrap();
            let source = source.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
            let lines: Vec<&str> = source.lines().collect();
            for (start, line) in lines.iter().enumerate() {
                let Some(found) = header.captures(line) else { continue };
                let indent = line.len() - line.trim_start().len();
                let end = lines[start..]
                    .iter()
                    .position(|l| l.len() - l.trim_start().len() == indent && l.trim_start().starts_with('}'))
                    .map_or(1, |n| n + 1);
                if end > LONGEST_FUNCTION {
                    long.push(format!("{}: {} is {end} lines", file.display(), &found[4]));
                }
            }
        }
    }
    assert!(long.is_empty(), "functions longer than {LONGEST_FUNCTION} lines:\n{}", long.join("\n"));
}
