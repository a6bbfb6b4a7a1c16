//! The metric list of `docs/metrics.md` against what a `/metrics` endpoint serves: names,
//! and for each labelled metric the label values the docs list (`` `label` = a, b, c ``).

use std::collections::{BTreeMap, BTreeSet};

/// (metric, label) → documented values, for the rows whose name starts with a prefix.
pub type Labels = BTreeMap<(String, String), BTreeSet<String>>;

fn rows() -> Vec<String> {
    let path = crate::repo_root().join("docs/metrics.md");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|line| line.starts_with("| `casement_"))
        .map(str::to_owned)
        .collect()
}

fn wanted(name: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| name.starts_with(p))
}

/// Documented metric names starting with one of `prefixes`.
pub fn documented_names(prefixes: &[&str]) -> BTreeSet<String> {
    rows()
        .iter()
        .filter_map(|row| {
            row.strip_prefix("| `")?
                .split('`')
                .next()
                .map(str::to_owned)
        })
        .filter(|name| wanted(name, prefixes))
        .collect()
}

/// Documented label values (only labels whose values the docs enumerate).
pub fn documented_labels(prefixes: &[&str]) -> Labels {
    let mut labels = Labels::new();
    for row in rows() {
        let cells: Vec<&str> = row.split(" | ").collect();
        let (Some(name), Some(cell)) = (cells.first(), cells.get(2)) else {
            continue;
        };
        let name = name.trim_start_matches("| ").trim_matches('`');
        if !wanted(name, prefixes) {
            continue;
        }
        let Some((label, values)) = cell.split_once(" = ") else {
            continue;
        };
        let values = values.split(',').map(|v| v.trim().to_owned()).collect();
        labels.insert(
            (name.to_owned(), label.trim_matches('`').to_owned()),
            values,
        );
    }
    labels
}

/// Metric names served (`# TYPE` lines) starting with one of `prefixes`.
pub fn served_names(exposition: &str, prefixes: &[&str]) -> BTreeSet<String> {
    exposition
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|name| wanted(name, prefixes))
        .map(str::to_owned)
        .collect()
}

/// Label values served, for the (metric, label) pairs of `documented` (histogram series
/// `_bucket`/`_sum`/`_count` count as their metric; `le` is ignored).
pub fn served_labels(exposition: &str, documented: &Labels) -> Labels {
    let mut served = Labels::new();
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, rest)) = line.split_once('{') else {
            continue;
        };
        let name = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| series.strip_suffix(suffix))
            .filter(|base| documented.keys().any(|(n, _)| n == base))
            .unwrap_or(series);
        let Some((labels, _)) = rest.split_once('}') else {
            continue;
        };
        for pair in labels.split(',') {
            let Some((label, value)) = pair.split_once('=') else {
                continue;
            };
            let key = (name.to_owned(), label.to_owned());
            if documented.contains_key(&key) {
                served
                    .entry(key)
                    .or_default()
                    .insert(value.trim_matches('"').to_owned());
            }
        }
    }
    served
}

/// Fails unless the served names equal the documented ones and every enumerated label
/// serves exactly its documented values.
pub fn assert_served_as_documented(exposition: &str, prefixes: &[&str], except: &[&str]) {
    let documented: BTreeSet<String> = documented_names(prefixes)
        .into_iter()
        .filter(|n| !except.contains(&n.as_str()))
        .collect();
    let served = served_names(exposition, prefixes);
    assert_eq!(served, documented, "served vs docs/metrics.md");
    let labels: Labels = documented_labels(prefixes)
        .into_iter()
        .filter(|((n, _), _)| !except.contains(&n.as_str()))
        .collect();
    let served_labels = served_labels(exposition, &labels);
    assert_eq!(
        served_labels, labels,
        "served label values vs docs/metrics.md"
    );
}
