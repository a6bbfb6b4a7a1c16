//! The hosted-model clients against OpenAI- and Cohere-shaped stubs on localhost: the real
//! client code runs (async-openai for embeddings, reqwest for rerank), only the server is fake.

use crate::support::stub_http;

use std::sync::Arc;

use casement_inference::{
    BlockingPool, Candidate, Embed, OpenAiEmbedder, RemoteConfig, RemoteReranker, Rerank,
};
use serde_json::json;

fn config(base_url: &str, model: &str) -> RemoteConfig {
    RemoteConfig {
        base_url: base_url.to_owned(),
        model: model.to_owned(),
        api_key: Some("test-key".into()),
        batch_size: 2,
        ..RemoteConfig::default()
    }
}

/// An OpenAI-shaped embeddings endpoint: vector [len, vowels, 1], answered in reverse order.
fn embeddings_stub() -> stub_http::StubServer {
    stub_http::start(|path, body| {
        if path != "/v1/embeddings" {
            return (
                404,
                json!({"error": {"message": "no such route", "type": "invalid_request_error"}}),
            );
        }
        let inputs: Vec<String> = body["input"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut data: Vec<_> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let vowels = t.chars().filter(|c| "aeiou".contains(*c)).count();
                json!({"object": "embedding", "index": i, "embedding": [t.len() as f32, vowels as f32, 1.0]})
            })
            .collect();
        data.reverse();
        (
            200,
            json!({"object": "list", "model": body["model"], "data": data, "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        )
    })
}

#[test]
fn openai_compatible_embeddings_come_back_in_input_order_and_normalised() {
    let stub = embeddings_stub();
    let embedder =
        OpenAiEmbedder::connect(&config(&stub.base_url, "stub-embed-1")).expect("connects");
    assert_eq!(embedder.dimension(), 3);
    let texts = ["aaaa", "bb", "a", ""];
    let vectors = embedder.embed(&texts).expect("embeds");
    for (text, vector) in texts.iter().zip(&vectors) {
        let len = if text.is_empty() {
            1.0
        } else {
            text.len() as f32
        };
        let vowels = text.chars().filter(|c| "aeiou".contains(*c)).count() as f32;
        let norm = (len * len + vowels * vowels + 1.0).sqrt();
        assert!(
            (vector[0] - len / norm).abs() < 1e-6 && (vector[1] - vowels / norm).abs() < 1e-6,
            "{text:?}: {vector:?}"
        );
    }
    let requests = stub.requests.lock().expect("log").clone();
    assert_eq!(requests.len(), 1 + 2, "probe + two batches of 2");
    assert!(
        requests
            .iter()
            .all(|r| r.authorization == "Bearer test-key")
    );
    assert_eq!(requests[1].body["model"], "stub-embed-1");
    assert_eq!(
        requests[2].body["input"],
        json!(["a", " "]),
        "empty text sent as a space"
    );
}

#[test]
fn a_failing_embeddings_endpoint_is_a_clear_error() {
    let stub = stub_http::start(|_, _| {
        (
            500,
            json!({"error": {"message": "model overloaded", "type": "server_error"}}),
        )
    });
    let error = OpenAiEmbedder::connect(&config(&stub.base_url, "m"))
        .expect_err("fails at start")
        .to_string();
    assert!(
        error.contains(&stub.base_url) && error.contains("model overloaded"),
        "{error}"
    );
}

#[tokio::test]
async fn the_blocking_pool_embeds_without_blocking_the_executor() {
    let stub = embeddings_stub();
    let base_url = stub.base_url.clone();
    let embedder =
        tokio::task::spawn_blocking(move || OpenAiEmbedder::connect(&config(&base_url, "m")))
            .await
            .expect("joins")
            .expect("connects");
    let pool = BlockingPool::new(Arc::new(embedder), 2);
    let (a, b) = tokio::join!(
        pool.embed(vec!["aa".into()]),
        pool.embed(vec!["e".into(), "ii".into()])
    );
    assert_eq!(a.expect("embeds").len(), 1);
    assert_eq!(b.expect("embeds").len(), 2);
}

#[test]
fn cohere_shaped_rerank_maps_scores_back_to_candidates() {
    // Scores by document length, results sorted best first as Cohere returns them.
    let stub = stub_http::start(|path, body| {
        if path != "/v1/rerank" {
            return (404, json!({"message": "no such route"}));
        }
        let docs: Vec<String> = body["documents"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut results: Vec<_> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| json!({"index": i, "relevance_score": d.len() as f32 / 100.0}))
            .collect();
        results.sort_by(|a, b| {
            b["relevance_score"]
                .as_f64()
                .partial_cmp(&a["relevance_score"].as_f64())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        (200, json!({"id": "x", "results": results}))
    });
    let reranker = RemoteReranker::new(&config(&stub.base_url, "rerank-stub")).expect("builds");
    let texts = ["short", "a much longer window of text", "mid length"];
    let candidates: Vec<Candidate<'_>> = texts
        .iter()
        .map(|t| Candidate {
            text: t,
            retrieval_score: 0.0,
            ..Default::default()
        })
        .collect();
    let scores = reranker.score("query", &candidates).expect("scores");
    for (text, score) in texts.iter().zip(&scores) {
        assert!((score - text.len() as f32 / 100.0).abs() < 1e-6);
    }
    let requests = stub.requests.lock().expect("log").clone();
    assert_eq!(requests.len(), 2, "batches of 2");
    assert_eq!(requests[0].body["query"], "query");
    assert_eq!(requests[0].body["model"], "rerank-stub");
    assert_eq!(requests[1].body["documents"], json!(["mid length"]));
}

#[test]
fn a_rerank_reply_missing_documents_is_an_error() {
    let stub = stub_http::start(|_, _| {
        (
            200,
            json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
        )
    });
    let reranker = RemoteReranker::new(&config(&stub.base_url, "m")).expect("builds");
    let candidates = [
        Candidate {
            text: "a",
            retrieval_score: 0.0,
            ..Default::default()
        },
        Candidate {
            text: "b",
            retrieval_score: 0.0,
            ..Default::default()
        },
    ];
    let error = reranker
        .score("q", &candidates)
        .expect_err("incomplete")
        .to_string();
    assert!(error.contains("no score for document 1"), "{error}");
}
