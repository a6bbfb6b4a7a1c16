//! `make train-ranker`: fits the learned ranker (`casement_inference::learned`) on the tune
//! half of SQuAD and writes its weights to `shared/inference/ranker/learned.json`.
//!
//! Each tune-half question is asked of Casement as shipped (the `squad-shipped` index of
//! `make eval`, retrieval order, `top_k` [`CANDIDATES`]); the merged windows it returns are
//! the candidates, with the features the service computes (the same function), and a
//! window is relevant when it covers a reference answer. The held-out half's figures here
//! reorder the same kind of answers offline; `make eval`'s "learned ranker" row measures
//! the service itself.

use std::path::Path;

use casement_inference::WindowParts;
use casement_inference::learned::{self, Judged, LinearModel, Training};
use casement_inference::relevance;
use serde_json::{Value, json};

use crate::children::Service;
use crate::data::{Half, Squad};
use crate::score::Passage;

/// Windows asked per question: the ranker's candidates (`rerank.candidates` when it runs).
pub const CANDIDATES: usize = 20;

/// One answer's windows, owned, as the ranker reads them.
struct Owned {
    passage: Passage,
    score: f32,
    title: String,
    headings: Vec<String>,
    text: String,
    matches: Vec<(String, f32)>,
}

fn owned(window: &Value) -> Owned {
    let s = |key: &str| window[key].as_str().unwrap_or_default().to_owned();
    Owned {
        passage: Passage {
            doc_id: s("doc_id"),
            char_start: window["char_start"].as_u64().unwrap() as usize,
            char_end: window["char_end"].as_u64().unwrap() as usize,
            tokens: 0,
        },
        score: window["scores"]["fused"].as_f64().unwrap() as f32,
        title: s("title"),
        headings: window["section_path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_owned())
            .collect(),
        text: s("text"),
        matches: window["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["sentence"].as_str().unwrap().to_owned(),
                    m["score"].as_f64().unwrap() as f32,
                )
            })
            .collect(),
    }
}

fn judged(question: &str, windows: &[Owned], doc_id: &str, answers: &[(usize, usize)]) -> Judged {
    let candidates: Vec<casement_inference::Candidate<'_>> = windows
        .iter()
        .map(|w| casement_inference::Candidate {
            text: &w.text,
            retrieval_score: w.score,
            window: WindowParts {
                title: &w.title,
                headings: &w.headings,
                text: &w.text,
                matches: &w.matches,
            },
        })
        .collect();
    Judged {
        features: learned::features(question, &candidates),
        relevant: windows
            .iter()
            .map(|w| answers.iter().any(|a| w.passage.covers(doc_id, *a)))
            .collect(),
    }
}

/// MRR@10 and recall@5 of `queries` in retrieval order, or ordered by `model`.
fn measure(queries: &[Judged], model: Option<&LinearModel>) -> (f64, f64) {
    let (mut rr, mut r5) = (0.0, 0.0);
    for q in queries {
        let mut order: Vec<usize> = (0..q.relevant.len()).collect();
        if let Some(model) = model {
            let scores: Vec<f32> = q.features.iter().map(|f| model.score(f)).collect();
            order = casement_inference::order_by_score(&scores);
        }
        if let Some(rank) = order.iter().take(10).position(|&i| q.relevant[i]) {
            rr += 1.0 / (rank + 1) as f64;
            if rank < 5 {
                r5 += 1.0;
            }
        }
    }
    let n = queries.len().max(1) as f64;
    (rr / n, r5 / n)
}

/// The service's answers to every question, in order: asked, or read back from `cache`
/// (written beside the index the answers come from, so a rebuilt index asks again).
async fn answers(service: &Service, squad: &Squad, cache: &Path) -> Vec<Value> {
    if let Ok(text) = std::fs::read_to_string(cache) {
        let answers: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if answers.len() == squad.questions.len() {
            eprintln!("train-ranker: answers read from {}", cache.display());
            return answers;
        }
    }
    let mut answers = Vec::new();
    let mut file = String::new();
    for (i, q) in squad.questions.iter().enumerate() {
        let (answer, _) = service
            .ask(&json!({"query": q.question, "top_k": CANDIDATES, "rerank": false}))
            .await;
        file.push_str(&answer.to_string());
        file.push('\n');
        answers.push(answer);
        if (i + 1) % 1000 == 0 {
            eprintln!(
                "train-ranker: {} of {} questions asked",
                i + 1,
                squad.questions.len()
            );
        }
    }
    std::fs::write(cache, file).unwrap();
    answers
}

pub async fn train_ranker(
    service: &Service,
    squad: &Squad,
    cache: &Path,
    out_of_domain: &[String],
) -> Value {
    let mut halves: [Vec<Judged>; 2] = [Vec::new(), Vec::new()];
    let answers = answers(service, squad, cache).await;
    let calibration = fit_relevance(service, squad, &answers, out_of_domain).await;
    for (q, answer) in squad.questions.iter().zip(&answers) {
        let windows: Vec<Owned> = answer["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(owned)
            .collect();
        halves[usize::from(q.half == Half::Report)].push(judged(
            &q.question,
            &windows,
            &q.doc_id,
            &q.answers,
        ));
    }
    let [tune, report] = &halves;
    let settings = Training::default();
    let mut model = learned::train(tune, &settings);
    let figures = |queries: &[Judged], model: Option<&LinearModel>| {
        let (mrr, recall) = measure(queries, model);
        json!({"mrr@10": round(mrr), "recall@5": round(recall)})
    };
    let result = json!({
        "data": "SQuAD v1.1 dev, tune half (even-indexed articles in file order)",
        "questions": tune.len(),
        "candidates": format!("the first {CANDIDATES} merged windows of Casement as shipped, in retrieval order"),
        "relevant": "a window of the question's article that covers a reference answer",
        "training": format!("{settings:?}"),
        "tune": {"retrieval": figures(tune, None), "learned": figures(tune, Some(&model))},
        "report_offline": {"questions": report.len(), "retrieval": figures(report, None), "learned": figures(report, Some(&model))},
    });
    model.trained = result.clone();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/inference/ranker/learned.json");
    let mut text = serde_json::to_string_pretty(&model).unwrap();
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    eprintln!("train-ranker: weights written to {}", path.display());
    for (name, weight) in learned::FEATURES.iter().zip(&model.weights) {
        eprintln!("  {name:>24} {weight:+.3}");
    }
    json!({"ranker": result, "relevance": calibration})
}

/// Relevance thresholds the abstention figures are given at.
const THRESHOLDS: [f32; 8] = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5];

/// Fits the relevance calibration (`casement_inference::relevance`) on every window of
/// the tune half's answers (relevant: it covers a reference answer), writes it to
/// `shared/inference/ranker/relevance.json`, and reports on the report half: the AUC of
/// relevance between relevant and other windows, and at each of [`THRESHOLDS`] the share
/// of questions whose best window reaches it (answered) and, for questions the index
/// cannot answer (SciFact claims asked of the SQuAD index), the share whose best window
/// does not (abstained); the threshold with the highest sum is the recommended one.
async fn fit_relevance(
    service: &Service,
    squad: &Squad,
    answers: &[Value],
    out_of_domain: &[String],
) -> Value {
    let sample = |question: &str, window: &Value| -> relevance::Features {
        let matches: Vec<&str> = window["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["sentence"].as_str().unwrap())
            .collect();
        relevance::features(
            question,
            window["text"].as_str().unwrap_or_default(),
            &matches,
            window["scores"]["similarity"].as_f64().unwrap_or(0.0) as f32,
        )
    };
    let mut tune = Vec::new();
    let mut report: Vec<(Vec<relevance::Features>, Vec<bool>)> = Vec::new();
    for (q, answer) in squad.questions.iter().zip(answers) {
        let windows = answer["windows"].as_array().unwrap();
        let features: Vec<relevance::Features> =
            windows.iter().map(|w| sample(&q.question, w)).collect();
        let labels: Vec<bool> = windows
            .iter()
            .map(|w| {
                let passage = owned(w).passage;
                q.answers.iter().any(|a| passage.covers(&q.doc_id, *a))
            })
            .collect();
        if q.half == Half::Tune {
            tune.extend(features.into_iter().zip(labels));
        } else {
            report.push((features, labels));
        }
    }
    let mut model = relevance::fit(&tune, 400);
    let scored: Vec<(f32, bool)> = report
        .iter()
        .flat_map(|(f, l)| f.iter().map(|f| model.relevance(f)).zip(l.iter().copied()))
        .collect();
    let window_auc = relevance::auc(&scored);
    // Per question: its best window's relevance; in-domain questions with an answer in the
    // windows are positives, out-of-domain ones negatives.
    let best = |features: &[relevance::Features]| {
        features
            .iter()
            .map(|f| model.relevance(f))
            .fold(0.0f32, f32::max)
    };
    let in_domain: Vec<f32> = report
        .iter()
        .filter(|(_, l)| l.iter().any(|x| *x))
        .map(|(f, _)| best(f))
        .collect();
    let mut outside = Vec::new();
    for claim in out_of_domain {
        let (answer, _) = service
            .ask(&json!({"query": claim, "top_k": 5, "rerank": false}))
            .await;
        let features: Vec<relevance::Features> = answer["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| sample(claim, w))
            .collect();
        outside.push(best(&features));
    }
    let rate = |scores: &[f32], threshold: f32, answered: bool| {
        let n = scores
            .iter()
            .filter(|s| (**s >= threshold) == answered)
            .count();
        round(n as f64 / scores.len().max(1) as f64)
    };
    let table: Vec<(f32, f64, f64)> = THRESHOLDS
        .iter()
        .map(|&t| (t, rate(&in_domain, t, true), rate(&outside, t, false)))
        .collect();
    let (threshold, answer_rate, abstain_rate) = table
        .iter()
        .copied()
        .max_by(|a, b| (a.1 + a.2).total_cmp(&(b.1 + b.2)))
        .unwrap_or((0.5, 0.0, 0.0));
    let question_auc = relevance::auc(
        &in_domain
            .iter()
            .map(|s| (*s, true))
            .chain(outside.iter().map(|s| (*s, false)))
            .collect::<Vec<_>>(),
    );
    let figures = json!({
        "data": "SQuAD v1.1 dev tune half: every window of the first 20 of each question (relevant: covers a reference answer)",
        "windows": tune.len(),
        "report_half": {
            "window_auc": round(window_auc),
            "questions_with_an_answer_in_the_windows": in_domain.len(),
        },
        "out_of_domain": {
            "questions": "SciFact claims asked of the SQuAD index",
            "count": outside.len(),
            "question_auc": round(question_auc),
        },
        "recommended_threshold": threshold,
        "at_recommended": {"answer_rate": answer_rate, "abstain_rate": abstain_rate},
        "thresholds": table.iter().map(|(t, a, b)| json!({"min_relevance": t, "answer_rate": a, "abstain_rate": b})).collect::<Vec<_>>(),
    });
    model.trained = figures.clone();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/inference/ranker/relevance.json");
    let mut text = serde_json::to_string_pretty(&model).unwrap();
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    eprintln!(
        "train-ranker: relevance calibration written to {}: {figures}",
        path.display()
    );
    figures
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
