//! One row of the table per system, and the table itself.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::data::Half;
use crate::score::{SciFactSums, SquadSums, percentile};

#[derive(Default)]
pub struct Row {
    /// The variant's name (`defaults`, `learned`, …); empty for chunk rows.
    pub name: String,
    pub system: String,
    pub what: String,
    pub squad: BTreeMap<Half, SquadSums>,
    pub scifact: Option<SciFactSums>,
    pub latencies: Vec<f64>,
}

impl Row {
    pub fn json(&self) -> Value {
        let mut latencies = self.latencies.clone();
        latencies.sort_by(f64::total_cmp);
        json!({
            "system": self.system,
            "what": self.what,
            "squad": self.squad.iter().map(|(h, s)| (h.name().to_owned(), s.json())).collect::<serde_json::Map<_, _>>(),
            "scifact": self.scifact.as_ref().map(SciFactSums::json),
            "latency_ms": if latencies.is_empty() { Value::Null } else {
                json!({"p50": percentile(&latencies, 0.5), "p95": percentile(&latencies, 0.95), "requests": latencies.len()})
            },
        })
    }
}

pub fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| system | half | SQuAD R@1 | R@5 | R@10 | MRR@10 | top-5 tokens | R in 512 | R in 1024 | SciFact nDCG@10 | evidence R@5 | p50 ms | p95 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let legend = "R in 512/1024: Casement's defaults asked with token_budget 512/1024; other rows: the leading passages of the plain answer that fit";
    for row in rows {
        let mut latencies = row.latencies.clone();
        latencies.sort_by(f64::total_cmp);
        let (p50, p95) = if latencies.is_empty() {
            ("—".to_owned(), "—".to_owned())
        } else {
            (
                format!("{:.1}", percentile(&latencies, 0.5)),
                format!("{:.1}", percentile(&latencies, 0.95)),
            )
        };
        let scifact = row.scifact.as_ref().map_or(("—".into(), "—".into()), |s| {
            let j = s.json();
            (
                format!("{:.3}", j["ndcg_at_10"].as_f64().unwrap()),
                format!("{:.3}", j["evidence_recall_at_5"].as_f64().unwrap()),
            )
        });
        for (i, (half, sums)) in row.squad.iter().enumerate() {
            let j = sums.json();
            let f = |k: &str| format!("{:.3}", j[k].as_f64().unwrap());
            let (sf, p) = if i == 0 {
                (scifact.clone(), (p50.clone(), p95.clone()))
            } else {
                (("".into(), "".into()), ("".into(), "".into()))
            };
            let cells = [
                row.what.clone(),
                half.name().to_owned(),
                f("recall_at_1"),
                f("recall_at_5"),
                f("recall_at_10"),
                f("mrr_at_10"),
                format!("{:.0}", j["top5_cl100k_tokens"].as_f64().unwrap()),
                format!("{:.3}", sums.recall_within(0)),
                format!("{:.3}", sums.recall_within(1)),
                sf.0,
                sf.1,
                p.0,
                p.1,
            ];
            println!("| {} |", cells.join(" | "));
        }
    }
    println!("({legend}; tokens are cl100k_base.)");
}
