//! The rescoring reranker (embedding rescoring of whole windows, blended with the retrieval
//! score) on real SQuAD questions: it ranks a window holding the answer first for most
//! questions and does not rank worse than retrieval order beyond noise. Whether it helps
//! enough to be the default is measured by `make bench-rerank` (it does not: the default is
//! retrieval order).

use crate::support::squad;

use std::sync::Arc;

use casement_inference::rerank::DEFAULT_RESCORING_WEIGHT;
use casement_inference::{Candidate, Embed, EmbedderConfig, OnnxEmbedder, Rerank, Rescoring};

#[test]
fn rescoring_ranks_the_relevant_window_first_on_squad_questions() {
    let embedder =
        OnnxEmbedder::load(&EmbedderConfig::default()).expect("model loads (run `make models`)");
    // 6 articles, every 8th question, 120 questions.
    let (cases, misses) = squad::build_cases(&embedder, 8, 8, 120);
    assert!(
        cases.len() >= 80,
        "only {} usable questions ({misses} retrieval misses)",
        cases.len()
    );
    let all: Vec<&squad::Case> = cases.iter().collect();
    let retrieval = squad::evaluate(&all, squad::retrieval_order);
    let rescoring = squad::evaluate(&all, |c| squad::rescored(c, DEFAULT_RESCORING_WEIGHT));
    eprintln!(
        "{} questions: retrieval hit@1 {:.3} MRR {:.3}; rescoring hit@1 {:.3} MRR {:.3}",
        cases.len(),
        retrieval.hit_at_1,
        retrieval.mrr,
        rescoring.hit_at_1,
        rescoring.mrr
    );
    assert!(
        rescoring.hit_at_1 >= 0.6,
        "relevant window first in only {:.0}% of questions",
        rescoring.hit_at_1 * 100.0
    );
    assert!(
        rescoring.mrr >= retrieval.mrr - 0.01,
        "rescoring made ranking worse: MRR {:.3} vs {:.3}",
        rescoring.mrr,
        retrieval.mrr
    );
}

#[test]
fn the_reranker_interface_scores_through_the_embedder() {
    let embedder: Arc<dyn Embed> =
        Arc::new(OnnxEmbedder::load(&EmbedderConfig::default()).expect("model loads"));
    let reranker = Rescoring::new(embedder, DEFAULT_RESCORING_WEIGHT);
    let candidates = [
        Candidate {
            text: "The Broncos won Super Bowl 50, beating the Panthers 24–10 at Levi's Stadium.",
            retrieval_score: 0.016,
            ..Default::default()
        },
        Candidate {
            text: "Photosynthesis turns light into chemical energy in chloroplasts.",
            retrieval_score: 0.016,
            ..Default::default()
        },
    ];
    let scores = reranker
        .score("Who won Super Bowl 50?", &candidates)
        .expect("scores");
    assert_eq!(scores.len(), 2);
    assert!(scores[0] > scores[1], "{scores:?}");
    assert!(
        reranker.name().starts_with("rescoring:all-minilm-l6-v2"),
        "{}",
        reranker.name()
    );
}

#[test]
fn rerankers_are_chosen_by_config_and_the_default_keeps_retrieval_order() {
    use casement_inference::RerankerConfig;
    let embedder: Arc<dyn Embed> =
        Arc::new(OnnxEmbedder::load(&EmbedderConfig::default()).expect("model loads"));
    assert!(
        RerankerConfig::default()
            .build(None)
            .expect("builds")
            .is_none()
    );
    let rescoring = RerankerConfig::Rescoring { weight: 0.4 }
        .build(Some(embedder.clone()))
        .expect("builds")
        .expect("a reranker");
    assert!(rescoring.name().starts_with("rescoring:"));
    let error = RerankerConfig::Rescoring { weight: 1.5 }
        .build(Some(embedder.clone()))
        .err()
        .expect("rejected")
        .to_string();
    assert!(error.contains("1.5"), "{error}");
    let parsed: RerankerConfig = serde_json::from_value(
        serde_json::json!({"kind": "cross-encoder", "model_dir": "/nonexistent/ce"}),
    )
    .expect("parses");
    let error = parsed.build(None).err().expect("missing model").to_string();
    assert!(error.contains("/nonexistent/ce"), "{error}");
}
