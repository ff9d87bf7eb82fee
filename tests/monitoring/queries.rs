//! The PromQL of the chart's monitoring, for the tests that check it against what the operator
//! serves (`tests/monitoring.rs` against its registry, `tests/e2e/monitoring.rs` against a
//! running operator): the rules' and the dashboard's queries, and the metric names each selects.

use std::collections::BTreeSet;
use std::path::Path;

use regex::Regex;
use serde_json::Value;

/// The alerting rules: the chart's PrometheusRule is this file.
pub(crate) const RULES: &str = "charts/database-operator/files/prometheus-rules.yaml";
/// The Grafana dashboard the chart's ConfigMap carries.
pub(crate) const DASHBOARD: &str = "charts/database-operator/files/grafana-dashboard.json";

/// Series Prometheus makes itself, not the operator.
pub(crate) const PROMETHEUS_OWN: [&str; 1] = ["up"];

/// Labels Prometheus adds to every scraped series (the target's).
pub(crate) const TARGET_LABELS: [&str; 2] = ["job", "instance"];

pub(crate) fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// The names of the alerts of [`RULES`].
pub(crate) fn alert_names() -> BTreeSet<String> {
    rules().into_iter().map(|(name, _)| name).collect()
}

/// Every query of the rules and the dashboard, as (where, PromQL).
pub(crate) fn all() -> Vec<(String, String)> {
    rules()
        .into_iter()
        .map(|(alert, expr)| (format!("{RULES}, {alert}"), expr))
        .chain(dashboard_queries().into_iter().map(|(path, expr)| (format!("{DASHBOARD}{path}"), expr)))
        .collect()
}

/// The labels of `name`'s series in the text of a scrape, one set per series; empty when it has
/// none.
pub(crate) fn series_labels(text: &str, name: &str) -> Vec<BTreeSet<String>> {
    let label = Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*""#).unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| match line.strip_prefix(name)? {
            rest if rest.starts_with(' ') => Some(BTreeSet::new()),
            rest => Some(
                label.captures_iter(rest.strip_prefix('{')?.split('}').next()?).map(|c| c[1].to_string()).collect(),
            ),
        })
        .collect()
}

/// The rule file's rules, as (alert, expr).
pub(crate) fn rules() -> Vec<(String, String)> {
    let file: Value = serde_saphyr::from_str(&read(RULES)).expect("the rule file is YAML");
    let mut rules = Vec::new();
    for group in file["groups"].as_array().expect("the rule file has groups") {
        for rule in group["rules"].as_array().expect("a group has rules") {
            let name = rule["alert"].as_str().or(rule["record"].as_str()).expect("a rule is an alert or a record");
            rules.push((name.to_string(), rule["expr"].as_str().expect("a rule has an expr").to_string()));
        }
    }
    rules
}

/// Every PromQL query of the dashboard: its panels' targets and its variables' queries.
pub(crate) fn dashboard_queries() -> Vec<(String, String)> {
    fn walk(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    let here = format!("{path}.{key}");
                    match (key.as_str(), value) {
                        ("expr", Value::String(expr)) => out.push((here, expr.clone())),
                        // A query variable's: {"query": "label_values(...)", "refId": ...}.
                        ("query", Value::String(query)) if path.contains(".templating") => {
                            out.push((here, query.clone()))
                        }
                        _ => walk(value, &here, out),
                    }
                }
            }
            Value::Array(items) => {
                items.iter().enumerate().for_each(|(i, item)| walk(item, &format!("{path}[{i}]"), out))
            }
            _ => {}
        }
    }
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let mut out = Vec::new();
    walk(&dashboard, "", &mut out);
    // A datasource variable's query is a data source type, not PromQL.
    out.retain(|(_, query)| query != "prometheus");
    out
}

/// The metric names a PromQL expression selects, each with the labels it matches on.
pub(crate) fn selectors(expr: &str) -> Vec<(String, BTreeSet<String>)> {
    let strings = Regex::new(r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`"#).unwrap();
    let ranges = Regex::new(r"\[[^\]]*\]").unwrap();
    let grouping = Regex::new(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)").unwrap();
    // Grafana's label_values(metric, label): only the first argument is a selector.
    let label_values =
        Regex::new(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*(?:\s*\{[^}]*\})?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)")
            .unwrap();
    let name = Regex::new(r"[a-zA-Z_:][a-zA-Z0-9_:]*").unwrap();
    let matcher = Regex::new(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)").unwrap();
    let keywords = ["and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "Inf", "NaN"];

    let expr = strings.replace_all(expr, "\"\"");
    let expr = label_values.replace_all(&expr, "$1");
    let expr = ranges.replace_all(&expr, " ");
    let expr = grouping.replace_all(&expr, " ");
    let mut found = Vec::new();
    let mut rest = expr.as_ref();
    while let Some(word) = name.find(rest) {
        let (before, after) = (&rest[..word.start()], rest[word.end()..].trim_start());
        let (matchers, next) = match after.strip_prefix('{') {
            Some(inner) => inner.split_once('}').expect("a selector's braces close"),
            None => ("", after),
        };
        // A number's exponent (1e3), a function or an aggregation (sum (...)), a keyword.
        let in_number = before.ends_with(|c: char| c.is_ascii_digit() || c == '.');
        let called = matchers.is_empty() && next.starts_with('(');
        if !in_number && !called && !keywords.contains(&word.as_str()) {
            let labels = matcher.captures_iter(matchers).map(|c| c[1].to_string()).collect();
            found.push((word.as_str().to_string(), labels));
        }
        rest = if after.starts_with('{') { next } else { &rest[word.end()..] };
    }
    found
}
