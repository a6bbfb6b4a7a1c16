//! The learned ranker: its features, its training and its weights file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use casement_inference::learned::{
    FEATURES, Judged, LearnedConfig, LearnedRanker, LinearModel, Training, features, train,
};
use casement_inference::{Candidate, RerankerConfig, WindowParts, order_by_score};

fn feature(name: &str) -> usize {
    FEATURES.iter().position(|f| *f == name).unwrap()
}

struct W {
    title: &'static str,
    headings: Vec<String>,
    text: &'static str,
    matches: Vec<(String, f32)>,
    score: f32,
}

fn w(title: &'static str, text: &'static str, score: f32) -> W {
    W {
        title,
        headings: vec![],
        text,
        matches: vec![(text.to_owned(), score)],
        score,
    }
}

fn candidates(windows: &[W]) -> Vec<Candidate<'_>> {
    windows
        .iter()
        .map(|w| Candidate {
            text: w.text,
            retrieval_score: w.score,
            window: WindowParts {
                title: w.title,
                headings: &w.headings,
                text: w.text,
                matches: &w.matches,
            },
        })
        .collect()
}

#[test]
fn features_describe_coverage_rank_pairs_and_title() {
    let windows = [
        w("Rivers", "The Nile is long.", 0.10),
        w(
            "Super Bowl 50",
            "The Denver Broncos won Super Bowl 50 in 2016.",
            0.08,
        ),
        w("Rivers", "Rivers flow to the sea.", 0.05),
    ];
    let f = features("Which team won Super Bowl 50?", &candidates(&windows));
    assert_eq!(f.len(), 3);
    assert!(f.iter().flatten().all(|v| v.is_finite()));
    // Rank: the first candidate's reciprocal rank is 1, the third's 1/3.
    assert_eq!(f[0][feature("reciprocal_rank")], 1.0);
    assert!((f[2][feature("reciprocal_rank")] - 1.0 / 3.0).abs() < 1e-6);
    assert_eq!(f[0][feature("fused_vs_top")], 1.0);
    // "won", "super", "bowl", "50" are in the second window, "team" is not; none in the first.
    let covered = f[1][feature("window_coverage")];
    assert!(covered > 0.6 && covered < 1.0, "{covered}");
    assert_eq!(f[0][feature("window_coverage")], 0.0);
    assert_eq!(f[1][feature("best_sentence_coverage")], covered);
    // Word pairs of the query in the text: "super bowl", "bowl 50".
    assert!(f[1][feature("query_pairs")] > 0.0);
    assert_eq!(f[0][feature("query_pairs")], 0.0);
    // The title "Super Bowl 50" covers most of the query's weight.
    assert!(f[1][feature("title_coverage")] > 0.5);
    assert_eq!(f[0][feature("title_coverage")], 0.0);
}

#[test]
fn no_candidates_and_an_empty_query_are_fine() {
    assert!(features("anything", &[]).is_empty());
    let windows = [w("", "", 0.0)];
    let f = features("", &candidates(&windows));
    assert!(f[0].iter().all(|v| v.is_finite()));
}

/// Queries whose relevant window is the one with the best coverage, wherever retrieval
/// put it: training finds the coverage weight, and the model ranks those windows first.
#[test]
fn training_learns_what_decides_relevance_and_is_deterministic() {
    let mut queries = Vec::new();
    for q in 0..200usize {
        let n = 10;
        let relevant_at = (q * 7) % n;
        let mut features_of = Vec::new();
        for i in 0..n {
            let mut f = [0f32; FEATURES.len()];
            f[feature("reciprocal_rank")] = 1.0 / (1.0 + i as f32);
            f[feature("window_coverage")] = if i == relevant_at {
                0.9
            } else {
                ((q + i) % 5) as f32 / 10.0
            };
            features_of.push(f);
        }
        queries.push(Judged {
            features: features_of,
            relevant: (0..n).map(|i| i == relevant_at).collect(),
        });
    }
    let model = train(&queries, &Training::default());
    assert!(model.weights[feature("window_coverage")] > 0.5, "{model:?}");
    for q in &queries {
        let scores: Vec<f32> = q.features.iter().map(|f| model.score(f)).collect();
        let first = order_by_score(&scores)[0];
        assert!(q.relevant[first]);
    }
    assert_eq!(train(&queries, &Training::default()), model);
}

#[test]
fn the_shipped_weights_load_and_rank() {
    let ranker = RerankerConfig::Learned(LearnedConfig::default())
        .build(None)
        .unwrap()
        .expect("a reranker");
    assert_eq!(ranker.name(), "learned:shipped");
    let windows = [
        w("Rivers", "The Nile is long.", 0.10),
        w(
            "Super Bowl 50",
            "The Denver Broncos won Super Bowl 50.",
            0.09,
        ),
    ];
    let scores = ranker
        .score("Which team won Super Bowl 50?", &candidates(&windows))
        .unwrap();
    assert_eq!(scores.len(), 2);
    assert!(scores.iter().all(|s| s.is_finite()));
}

#[test]
fn a_weights_file_for_other_features_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.json");
    let model = LinearModel {
        features: vec!["rank".into()],
        mean: vec![0.0],
        scale: vec![1.0],
        weights: vec![1.0],
        trained: serde_json::Value::Null,
    };
    std::fs::write(&path, serde_json::to_string(&model).unwrap()).unwrap();
    let error = LearnedRanker::load(&LearnedConfig {
        weights: Some(path.clone()),
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("make train-ranker"), "{error}");
    let missing = LearnedRanker::load(&LearnedConfig {
        weights: Some(dir.path().join("missing.json")),
    })
    .unwrap_err()
    .to_string();
    assert!(missing.contains("missing.json"), "{missing}");
}
