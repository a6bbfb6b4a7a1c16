//! The dashboards use only metrics that `docs/metrics.md` lists (which the services' tests
//! hold equal to what `/metrics` serves).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Metric names in a PromQL expression: `casement_…` and `process_…` words, histogram
/// suffixes removed.
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("casement_") || word.starts_with("process_"))
        .map(|word| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| word.strip_suffix(suffix))
                .unwrap_or(word)
                .to_owned()
        })
        .collect()
}

fn exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", serde_json::Value::String(expr)) => out.push(expr.clone()),
                    _ => exprs(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

#[test]
fn dashboards_use_only_documented_metrics() {
    let docs = std::fs::read_to_string(repo("docs/metrics.md")).unwrap();
    let documented: BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect();
    let mut checked = 0;
    for entry in std::fs::read_dir(repo("dashboards")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let dashboard: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut found = Vec::new();
        exprs(&dashboard, &mut found);
        assert!(!found.is_empty(), "{}: no queries", path.display());
        for expr in found {
            let names = metric_names(&expr);
            assert!(
                !names.is_empty(),
                "{}: {expr} uses no Casement metric",
                path.display()
            );
            for name in names {
                assert!(
                    documented.contains(&name),
                    "{}: {name} is not in docs/metrics.md",
                    path.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no dashboard checked");
}
