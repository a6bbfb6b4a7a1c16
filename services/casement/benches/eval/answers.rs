//! What a bot gets besides the ranking (issue 37), printed beside the fidelity table of
//! `shared/text/examples/fidelity.rs` (which `make eval` runs first and which writes
//! `target/bench/fidelity.json`):
//!
//! - **short answers**: the share of answers with fewer than `top_k` windows at `top_k` 5
//!   and 10, by the reason the answer gives (`short`);
//! - **abstention**: a question's best `scores.relevance` against `min_relevance` 0.1 (the
//!   recommendation of docs/query-api.md; the default, 0, answers everything): the share of questions
//!   the index answers that keep a window, the share of questions it cannot answer that get
//!   none, and the AUC of the best relevance between the two. In-domain: SQuAD's report
//!   half (the relevance model is fitted on the tune half), SciFact's claims, and support
//!   questions the 18F Handbook answers (`handbook-questions.json`); out-of-domain: SciFact
//!   claims asked of SQuAD, SQuAD questions asked of SciFact, and support questions the
//!   handbook does not answer asked of it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::children::{Service, backfill_with};
use crate::data::{Half, SciFact, Squad};
use crate::variants::{Index, Variant};

/// The threshold docs/query-api.md recommends for a bot that should say "I don't know".
pub const THRESHOLD: f64 = 0.1;

/// What one set of questions got from one index.
#[derive(Default)]
pub struct Asked {
    /// Answers asked at each `top_k`, and how many were short, by reason.
    short: BTreeMap<usize, (usize, BTreeMap<String, usize>)>,
    /// The best relevance of each in-domain question's answer (0 when none came back).
    answerable: Vec<f64>,
    /// The same for the questions the index cannot answer.
    unanswerable: Vec<f64>,
    /// Handbook only: answers whose windows include the page that answers the question.
    page_found: Option<(usize, usize)>,
}

fn best_relevance(answer: &Value) -> f64 {
    answer["windows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["scores"]["relevance"].as_f64())
        .fold(0.0, f64::max)
}

impl Asked {
    /// Asks `questions` (those the index answers) at `top_k` 5 and 10: short shares, and
    /// the best relevance at 10. Returns the answers at 10.
    async fn ask_answerable(&mut self, service: &Service, questions: &[&str]) -> Vec<Value> {
        let mut at_ten = Vec::new();
        for top_k in [5, 10] {
            let (asked, reasons) = self.short.entry(top_k).or_default();
            for q in questions {
                let (answer, _) = service.ask(&json!({"query": q, "top_k": top_k})).await;
                *asked += 1;
                if let Some(reason) = answer["short"].as_str() {
                    *reasons.entry(reason.to_owned()).or_default() += 1;
                }
                if top_k == 10 {
                    self.answerable.push(best_relevance(&answer));
                    at_ten.push(answer);
                }
            }
        }
        at_ten
    }

    async fn ask_unanswerable(&mut self, service: &Service, questions: &[&str]) {
        for q in questions {
            let (answer, _) = service.ask(&json!({"query": q, "top_k": 10})).await;
            self.unanswerable.push(best_relevance(&answer));
        }
    }

    fn short_share(&self, top_k: usize) -> Option<f64> {
        self.short
            .get(&top_k)
            .map(|(asked, reasons)| reasons.values().sum::<usize>() as f64 / (*asked).max(1) as f64)
    }

    pub fn json(&self) -> Value {
        let answered = share(&self.answerable, |r| r >= THRESHOLD);
        let abstained = share(&self.unanswerable, |r| r < THRESHOLD);
        json!({
            "short": self.short.iter().map(|(k, (asked, reasons))| {
                (k.to_string(), json!({"asked": asked, "short": reasons, "share": self.short_share(*k)}))
            }).collect::<serde_json::Map<_, _>>(),
            "threshold": THRESHOLD,
            "answerable": self.answerable.len(),
            "unanswerable": self.unanswerable.len(),
            "answer_rate": answered,
            "abstain_rate": abstained,
            "auc": auc(&self.answerable, &self.unanswerable),
            "page_found_in_top_10": self.page_found.map(|(n, d)| json!({"found": n, "asked": d})),
        })
    }
}

fn share(values: &[f64], keep: impl Fn(f64) -> bool) -> Option<f64> {
    (!values.is_empty())
        .then(|| values.iter().filter(|v| keep(**v)).count() as f64 / values.len() as f64)
}

/// The probability that an answerable question's best relevance is above an unanswerable
/// one's (ties count half): the area under the ROC curve.
pub fn auc(positive: &[f64], negative: &[f64]) -> Option<f64> {
    if positive.is_empty() || negative.is_empty() {
        return None;
    }
    let mut wins = 0.0;
    for p in positive {
        for n in negative {
            wins += match p.total_cmp(n) {
                std::cmp::Ordering::Greater => 1.0,
                std::cmp::Ordering::Equal => 0.5,
                std::cmp::Ordering::Less => 0.0,
            };
        }
    }
    Some(wins / (positive.len() * negative.len()) as f64)
}

#[derive(Deserialize)]
struct HandbookQuestions {
    answerable: Vec<HandbookQuestion>,
    unanswerable: Vec<String>,
}

#[derive(Deserialize)]
struct HandbookQuestion {
    q: String,
    doc: String,
}

/// The 18F Handbook's live pages at their final revision, as `casement backfill` reads
/// them (the revision corpus's own events, markdown with Liquid tags).
fn write_handbook_log(log: &Path) -> usize {
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    for line in casement_testkit::read_lines(&casement_testkit::data(
        "revisions/18f-handbook/all.jsonl.gz",
    )) {
        let event: Value = serde_json::from_str(&line).unwrap();
        last.insert(event["doc_id"].as_str().unwrap().to_owned(), event);
    }
    let live: Vec<String> = last
        .into_values()
        .filter(|e| e["change"] != "delete" && e["content"].as_str().is_some_and(|c| !c.is_empty()))
        .map(|mut e| {
            e["change"] = json!("create");
            e.to_string()
        })
        .collect();
    std::fs::write(log, live.join("\n") + "\n").unwrap();
    live.len()
}

/// Asks every set; returns the figures per corpus (`squad`, `scifact`, `handbook`).
pub async fn measure(
    bin: &Path,
    work: &Path,
    squad: &Squad,
    scifact: &SciFact,
    defaults: &Variant,
    reuse: bool,
) -> BTreeMap<&'static str, Asked> {
    let report: Vec<&str> = squad
        .questions
        .iter()
        .filter(|q| q.half == Half::Report)
        .map(|q| q.question.as_str())
        .collect();
    let claims: Vec<&str> = scifact.claims.iter().map(|c| c.claim.as_str()).collect();
    let mut out = BTreeMap::new();
    // The indexes of the `defaults` row.
    let squad_dir = work.join(format!("squad-{}", Index::Shipped.name()));
    let scifact_dir = work.join("scifact-shipped");

    eprintln!("eval: short answers and abstention, SQuAD");
    let service = Service::start(bin, &squad_dir, defaults).await;
    let mut asked = Asked::default();
    asked.ask_answerable(&service, &report).await;
    asked.ask_unanswerable(&service, &claims).await;
    out.insert("squad", asked);
    drop(service);

    eprintln!("eval: short answers and abstention, SciFact");
    let service = Service::start(bin, &scifact_dir, defaults).await;
    let mut asked = Asked::default();
    asked.ask_answerable(&service, &claims).await;
    asked.ask_unanswerable(&service, &report).await;
    out.insert("scifact", asked);
    drop(service);

    eprintln!("eval: short answers and abstention, 18F Handbook");
    let questions: HandbookQuestions =
        serde_json::from_str(include_str!("handbook-questions.json"))
            .expect("handbook-questions.json");
    let dir = work.join("handbook");
    backfill_with(bin, &dir, Index::Shipped, reuse, write_handbook_log);
    let service = Service::start(bin, &dir, defaults).await;
    let mut asked = Asked::default();
    let answerable: Vec<&str> = questions.answerable.iter().map(|q| q.q.as_str()).collect();
    let answers = asked.ask_answerable(&service, &answerable).await;
    let found = questions
        .answerable
        .iter()
        .zip(&answers)
        .filter(|(q, answer)| {
            let want = format!("18f-handbook:{}", q.doc);
            answer["windows"]
                .as_array()
                .is_some_and(|ws| ws.iter().any(|w| w["doc_id"] == want.as_str()))
        })
        .count();
    asked.page_found = Some((found, answers.len()));
    let unanswerable: Vec<&str> = questions.unanswerable.iter().map(String::as_str).collect();
    asked.ask_unanswerable(&service, &unanswerable).await;
    out.insert("handbook", asked);
    out
}

/// The fidelity table (`target/bench/fidelity.json`) with the short-answer and abstention
/// columns beside it, one row per corpus.
pub fn print_table(asked: &BTreeMap<&'static str, Asked>) -> Value {
    let fidelity: Vec<Value> =
        std::fs::read_to_string(casement_testkit::bench_dir().join("fidelity.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default();
    let pct = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{:.2}%", 100.0 * v));
    let fid = |corpus: &str, key: &str| {
        fidelity
            .iter()
            .find(|f| f["corpus"].as_str().is_some_and(|c| c.starts_with(corpus)))
            .and_then(|f| f[key].as_f64())
    };
    println!();
    println!(
        "| corpus | markup in windows | list hits without lead-in | whole list kept | citations resolve | short at top_k 5 | short at 10 | answered at {THRESHOLD} | abstained at {THRESHOLD} | relevance AUC |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let rows: [(&str, &str, Option<&str>); 5] = [
        ("18F Handbook", "18F handbook", Some("handbook")),
        ("Wikipedia wikitext", "Wikipedia wikitext", None),
        ("HTML/Hugo/MDX", "HTML/Hugo/MDX", None),
        ("SQuAD (report half)", "", Some("squad")),
        ("SciFact", "", Some("scifact")),
    ];
    for (name, corpus, key) in rows {
        let a = key.and_then(|k| asked.get(k));
        let (markup, lead, whole, cite) = if corpus.is_empty() {
            (None, None, None, None)
        } else {
            (
                fid(corpus, "markup_share"),
                fid(corpus, "lead_in_missing_share"),
                fid(corpus, "whole_list_share"),
                fid(corpus, "citations_resolve_share"),
            )
        };
        let j = a.map(Asked::json);
        let f = |k: &str| j.as_ref().and_then(|j| j[k].as_f64());
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            pct(markup),
            pct(lead),
            pct(whole),
            pct(cite),
            pct(a.and_then(|a| a.short_share(5))),
            pct(a.and_then(|a| a.short_share(10))),
            pct(f("answer_rate")),
            pct(f("abstain_rate")),
            f("auc").map_or("—".to_owned(), |v| format!("{v:.3}")),
        );
    }
    println!(
        "(SQuAD and SciFact are plain text: no markup columns. Out-of-domain: SciFact claims asked of SQuAD, SQuAD report-half questions of SciFact, {} support questions the handbook does not answer of it.)",
        asked.get("handbook").map_or(0, |a| a.unanswerable.len())
    );
    if let Some((found, of)) = asked.get("handbook").and_then(|a| a.page_found) {
        println!(
            "Handbook questions whose answering page is among the top 10 windows: {found} of {of}."
        );
    }
    json!({
        "fidelity": fidelity,
        "answers": asked.iter().map(|(k, a)| ((*k).to_owned(), a.json())).collect::<serde_json::Map<_, _>>(),
    })
}
