//! The embedder reproduces sentence-transformers: 64 reference texts (edge cases, empty,
//! unicode, one over 256 tokens, SQuAD and handbook sentences) embedded by
//! sentence-transformers 6.2.0 (`../shared/models/reference`). Needs `make models`.

use std::path::PathBuf;

use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder, Precision, load_embedder};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    text: String,
    embedding: Vec<f32>,
}

fn references() -> Vec<Reference> {
    let path = std::env::var_os("CASEMENT_SHARED_DATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models/reference"),
        |d| PathBuf::from(d).join("../models/reference"),
    );
    let file = path.join("all-MiniLM-L6-v2.reference.jsonl");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).expect("reference line"))
        .collect()
}

fn cosines(precision: Precision, batch_size: usize) -> Vec<(f32, String)> {
    let config = EmbedderConfig {
        precision,
        batch_size,
        ..EmbedderConfig::default()
    };
    let embedder = OnnxEmbedder::load(&config).expect("model loads (run `make models`)");
    assert_eq!(embedder.dimension(), 384);
    let references = references();
    assert_eq!(references.len(), 64);
    let texts: Vec<&str> = references.iter().map(|r| r.text.as_str()).collect();
    let vectors = embedder.embed(&texts).expect("embeds");
    references
        .iter()
        .zip(vectors)
        .map(|(r, v)| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
            let cos: f32 = r.embedding.iter().zip(&v).map(|(a, b)| a * b).sum::<f32>()
                / r.embedding.iter().map(|x| x * x).sum::<f32>().sqrt();
            (cos, r.text.chars().take(40).collect())
        })
        .collect()
}

#[test]
fn fp32_matches_sentence_transformers_for_every_text() {
    // Batch 7 mixes lengths in a batch, so padding must not change any vector.
    let results = cosines(Precision::Fp32, 7);
    let worst =
        results.iter().cloned().fold(
            (f32::MAX, String::new()),
            |a, b| if b.0 < a.0 { b } else { a },
        );
    eprintln!("fp32: min cosine {:.5} ({:?})", worst.0, worst.1);
    assert!(
        worst.0 >= 0.999,
        "fp32 cosine {} < 0.999 for {:?}",
        worst.0,
        worst.1
    );
}

#[test]
fn int8_stays_close_to_sentence_transformers() {
    let results = cosines(Precision::Int8, 32);
    let min = results.iter().map(|r| r.0).fold(f32::MAX, f32::min);
    let mean = results.iter().map(|r| r.0).sum::<f32>() / results.len() as f32;
    eprintln!("int8: min cosine {min:.4}, mean {mean:.4}");
    assert!(min >= 0.97, "int8 min cosine {min} < 0.97");
    assert!(mean >= 0.99, "int8 mean cosine {mean} < 0.99");
}

#[test]
fn a_missing_model_is_a_clear_error() {
    let config = EmbedderConfig {
        model_dir: PathBuf::from("/nonexistent/model"),
        ..EmbedderConfig::default()
    };
    let error = OnnxEmbedder::load(&config)
        .expect_err("no model")
        .to_string();
    assert!(
        error.contains("/nonexistent/model/model.onnx") && error.contains("make models"),
        "{error}"
    );
}

/// The default config (no `kind`) loads the same ONNX model through `load_embedder`.
#[test]
fn load_embedder_without_a_kind_is_the_onnx_model() {
    let config = EmbedderConfig::default();
    let direct = OnnxEmbedder::load(&config).expect("model loads");
    let loaded = load_embedder(&config).expect("model loads");
    assert_eq!(loaded.model_id(), direct.model_id());
    assert_eq!(loaded.dimension(), 384);
    let text = ["How do I request leave?"];
    assert_eq!(
        loaded.embed(&text).expect("embeds"),
        direct.embed(&text).expect("embeds")
    );
}

fn embed_alone_and_together(config: &EmbedderConfig) -> f32 {
    let embedder = OnnxEmbedder::load(config).expect("model loads");
    let references = references();
    let texts: Vec<&str> = references.iter().map(|r| r.text.as_str()).collect();
    let together = embedder.embed(&texts).expect("embeds");
    texts
        .iter()
        .zip(&together)
        .map(|(text, batched)| {
            let alone = embedder.embed(&[text]).expect("embeds").remove(0);
            alone.iter().zip(batched).map(|(a, b)| a * b).sum::<f32>()
        })
        .fold(f32::MAX, f32::min)
}

/// Invariant 1 needs a sentence's vector to be the same whether it is embedded with its
/// whole document (rebuild) or with a few edited neighbours (incremental).
#[test]
fn a_vector_does_not_depend_on_the_batch_it_is_computed_in() {
    let fp32 = embed_alone_and_together(&EmbedderConfig {
        precision: Precision::Fp32,
        batch_size: 32,
        ..EmbedderConfig::default()
    });
    assert!(
        fp32 >= 0.99999,
        "fp32 alone vs in a batch of 32: min cosine {fp32}"
    );
    let int8_single = embed_alone_and_together(&EmbedderConfig {
        precision: Precision::Int8,
        batch_size: 1,
        ..EmbedderConfig::default()
    });
    assert!(
        int8_single >= 0.99999,
        "int8 with batch_size 1: min cosine {int8_single}"
    );
    // Static int8: activation scales fixed at provisioning, so batches of 32 are fine.
    let int8_static = embed_alone_and_together(&EmbedderConfig {
        precision: Precision::Int8Static,
        batch_size: 32,
        ..EmbedderConfig::default()
    });
    assert!(
        int8_static >= 0.99999,
        "static int8 alone vs in a batch of 32: min cosine {int8_static}"
    );
}

#[test]
fn static_int8_stays_close_to_sentence_transformers() {
    let results = cosines(Precision::Int8Static, 32);
    let min = results.iter().map(|r| r.0).fold(f32::MAX, f32::min);
    let mean = results.iter().map(|r| r.0).sum::<f32>() / results.len() as f32;
    eprintln!("static int8: min cosine {min:.4}, mean {mean:.4}");
    assert!(min >= 0.97, "static int8 min cosine {min} < 0.97");
    assert!(mean >= 0.99, "static int8 mean cosine {mean} < 0.99");
}
