//! Cross-encoder plumbing, end to end: pair tokenisation, batching, one logit per pair,
//! ordering by score. No registry reachable from here carries trained cross-encoder weights,
//! so the model is the MiniLM encoder with an *untrained* (random, seeded) classification
//! head built by `deploy/models/build_bert_onnx.py --classifier-head`. This tests the
//! plumbing, not ranking quality.

use crate::support::plumbing;

use std::path::PathBuf;

use casement_inference::{Candidate, CrossEncoder, CrossEncoderConfig, Rerank, order_by_score};

fn load(batch_size: usize) -> CrossEncoder {
    let config = CrossEncoderConfig {
        model_dir: plumbing::plumbing_cross_encoder(),
        batch_size,
        max_tokens: 64,
        ..CrossEncoderConfig::default()
    };
    CrossEncoder::load(&config).expect("cross-encoder loads")
}

#[test]
fn pairs_are_encoded_as_cls_query_sep_passage_sep_and_the_passage_is_truncated() {
    let encoder = load(4);
    let encoding = encoder
        .encode_pair(
            "how long do refunds take",
            "Refunds take five business days.",
        )
        .expect("encodes");
    let tokens = encoding.get_tokens();
    assert_eq!(tokens.first().map(String::as_str), Some("[CLS]"));
    assert_eq!(tokens.iter().filter(|t| *t == "[SEP]").count(), 2);
    assert_eq!(tokens.last().map(String::as_str), Some("[SEP]"));
    let first_sep = tokens.iter().position(|t| t == "[SEP]").expect("a [SEP]");
    let types = encoding.get_type_ids();
    assert!(
        types[..=first_sep].iter().all(|&t| t == 0),
        "[CLS] query [SEP] are segment 0"
    );
    assert!(
        types[first_sep + 1..].iter().all(|&t| t == 1),
        "passage [SEP] are segment 1"
    );

    let long = "word ".repeat(500);
    let encoding = encoder.encode_pair("short query", &long).expect("encodes");
    assert_eq!(encoding.get_ids().len(), 64, "truncated at max_tokens");
    assert!(
        encoding.get_tokens().contains(&"query".to_owned()),
        "the query is never truncated"
    );
}

#[test]
fn batching_does_not_change_scores_and_order_follows_them() {
    let passages = [
        "Refunds take five business days.",
        "The office is closed on federal holidays, and staff work remotely when it snows.",
        "Travel over $500 needs approval.",
        "Use the card for lodging only.",
        "Ask your manager first.",
    ];
    let candidates: Vec<Candidate<'_>> = passages
        .iter()
        .map(|p| Candidate {
            text: p,
            retrieval_score: 0.0,
            ..Default::default()
        })
        .collect();
    let batched = load(4)
        .score("how long do refunds take", &candidates)
        .expect("scores");
    let single = load(1)
        .score("how long do refunds take", &candidates)
        .expect("scores");
    assert_eq!(batched.len(), passages.len());
    for (a, b) in batched.iter().zip(&single) {
        assert!((a - b).abs() < 1e-4, "batch changed a score: {a} vs {b}");
    }
    assert!(
        batched.iter().any(|s| (s - batched[0]).abs() > 1e-6),
        "an untrained head still separates inputs"
    );
    let order = order_by_score(&batched);
    for pair in order.windows(2) {
        assert!(batched[pair[0]] >= batched[pair[1]]);
    }
}

#[test]
fn a_missing_cross_encoder_says_what_is_missing() {
    let config = CrossEncoderConfig {
        model_dir: PathBuf::from("/nonexistent/cross-encoder"),
        ..CrossEncoderConfig::default()
    };
    let error = CrossEncoder::load(&config)
        .expect_err("missing")
        .to_string();
    assert!(
        error.contains("/nonexistent/cross-encoder/tokenizer.json"),
        "{error}"
    );
}
