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
        .filter(|line| line.starts_with("| `casement_") || line.starts_with("| `process_"))
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
        // | `name` | type | labels | meaning |: empty cells kept.
        let cells: Vec<&str> = row
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let (Some(name), Some(cell)) = (cells.first(), cells.get(2)) else {
            continue;
        };
        let name = name.trim_matches('`');
        if !wanted(name, prefixes) {
            continue;
        }
        // Only a label whose values the row enumerates: `label` = a, b, c (after other,
        // open labels: `route`, `status_class` = 2xx, 4xx).
        let Some((label, values)) = cell.split_once(" = ") else {
            continue;
        };
        let label = label.rsplit(',').next().unwrap_or(label).trim();
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
        let Some(labels) = rest.rfind('}').map(|end| &rest[..end]) else {
            continue;
        };
        let name = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| series.strip_suffix(suffix))
            .filter(|base| documented.keys().any(|(n, _)| n == base))
            .unwrap_or(series);
        for (label, value) in label_pairs(labels) {
            let key = (name.to_owned(), label);
            if documented.contains_key(&key) {
                served.entry(key).or_default().insert(value);
            }
        }
    }
    served
}

/// `a="x",b="y, z"` → (a, x), (b, y, z): values are quoted and may hold commas and braces
/// (the exposition format escapes `"` and `\` inside them).
fn label_pairs(labels: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = labels;
    while let Some((label, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                '"' => {
                    end = i + 1;
                    break;
                }
                other => value.push(other),
            }
        }
        pairs.push((label.trim_start_matches(',').trim().to_owned(), value));
        rest = &after[end..];
    }
    pairs
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_label_values_are_read_with_their_quotes_and_escapes() {
        assert_eq!(
            label_pairs(r#"route="/v1/documents/{doc_id}",status="200""#),
            vec![
                ("route".to_owned(), "/v1/documents/{doc_id}".to_owned()),
                ("status".to_owned(), "200".to_owned()),
            ]
        );
        assert_eq!(
            label_pairs(r#"a="x, \"y\"",le="0.5""#),
            vec![
                ("a".to_owned(), r#"x, "y""#.to_owned()),
                ("le".to_owned(), "0.5".to_owned()),
            ]
        );
        let documented = Labels::from([(
            ("m_seconds".to_owned(), "stage".to_owned()),
            BTreeSet::from(["a".to_owned()]),
        )]);
        let exposition = "# TYPE m_seconds histogram\nm_seconds_bucket{stage=\"a\",le=\"1\"} 0\nm_seconds_sum{stage=\"a\"} 0\n";
        assert_eq!(served_labels(exposition, &documented), documented);
    }
}
