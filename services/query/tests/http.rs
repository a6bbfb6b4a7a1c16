//! The query service end to end over HTTP: a Qdrant Edge store indexed from real text
//! (SQuAD v1.1 dev articles for tenant `acme`, 18F Handbook pages for tenant `globex`) by
//! the indexer's own stages with the real models.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeSet, HashSet};

use casement_query::QueryConfig;
use casement_query::config::ApiKey;
use casement_store::{HybridQuery, QueryFilter, Store};
use casement_text::Format;
use serde_json::{Value, json};
use support::*;

const ACME: &str = "acme-key-0123456789abcdef";
const GLOBEX: &str = "globex-key-0123456789abcdef";
const ADMIN: &str = "admin-key-0123456789abcdef";
const IDENTIFIER: &str = "QX-7741-ZETA";

async fn post(base: &str, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(format!("{base}/v1/search")).json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn raw(base: &str, key: &str, content_type: Option<&str>, body: Vec<u8>) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/search"))
        .bearer_auth(key)
        .body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await.expect("request");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// Checks what every answer must hold, and returns its windows.
fn windows(answer: &Value) -> Vec<Value> {
    let windows = answer["windows"].as_array().expect("windows").clone();
    let mut sentences = HashSet::new();
    for w in &windows {
        let text: Vec<char> = w["text"].as_str().unwrap().chars().collect();
        let start = w["char_start"].as_u64().unwrap() as usize;
        assert_eq!(text.len(), w["char_end"].as_u64().unwrap() as usize - start);
        for m in w["matches"].as_array().unwrap() {
            let (ms, me) = (m["char_start"].as_u64().unwrap() as usize, m["char_end"].as_u64().unwrap() as usize);
            // The matched sentence sits in the window at its character range.
            let inside: String = text[ms - start..me - start].iter().collect();
            assert_eq!(inside, m["sentence"].as_str().unwrap());
            assert!(
                sentences.insert((w["doc_id"].as_str().unwrap().to_owned(), ms)),
                "a sentence is in the answer twice"
            );
        }
    }
    windows
}

fn config() -> QueryConfig {
    let mut config = QueryConfig::default();
    config.auth.keys = vec![
        ApiKey { token: ACME.into(), tenant: Some("acme".into()) },
        ApiKey { token: GLOBEX.into(), tenant: Some("globex".into()) },
        ApiKey { token: ADMIN.into(), tenant: None },
    ];
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let indexer = indexer(store.clone(), model);
    let articles = squad_articles(4);
    for (i, article) in articles.iter().enumerate() {
        let event = upsert(&format!("squad-{i}"), 1, &article.title, Some("acme"), Format::Text, &article.text);
        indexer.process(&event).await.expect("index article");
    }
    let runbook = format!(
        "# Sync agent runbook\n\nThe sync agent copies pages to the index.\n\nTo reset the sync agent, run the purge command with shard {IDENTIFIER} and wait for the green light. Then check the dashboard.\n"
    );
    indexer
        .process(&upsert("acme-runbook", 1, "Runbook", Some("acme"), Format::Markdown, &runbook))
        .await
        .unwrap();
    let pages = handbook_pages(10);
    for page in &pages {
        let mut page = page.clone();
        page.tenant = Some("globex".into());
        let event = casement_events::Event {
            change: casement_events::Change::Upsert(page),
            event_time_ms: None,
            format: casement_events::EventFormat::Native,
        };
        indexer.process(&event).await.expect("index page");
    }
    let served = serve(config(), store.clone()).await;
    let base = served.base.as_str();

    // 401 without a key or with an unknown one.
    let (status, body) = post(base, None, json!({"query": "Super Bowl"})).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");
    assert_eq!(post(base, Some("not-a-key-0123456789"), json!({"query": "x"})).await.0, 401);

    // A question whose answer sentence is known.
    let (status, body) = post(base, Some(ACME), json!({"query": "Which NFL team represented the AFC at Super Bowl 50?", "timings": true})).await;
    assert_eq!(status, 200, "{body}");
    let found = windows(&body);
    let answer = found
        .iter()
        .find(|w| w["text"].as_str().unwrap().contains("Denver Broncos"))
        .unwrap_or_else(|| panic!("no window with the answer: {body}"));
    assert_eq!(answer["title"], "Super_Bowl_50");
    assert!(body["timings_ms"]["total"].as_f64().unwrap() > 0.0);

    // Answer recall over the indexed articles' questions.
    let titles: Vec<&str> = articles.iter().map(|a| a.title.as_str()).collect();
    let questions = squad_questions(&titles);
    let sample: Vec<_> = questions.iter().step_by(questions.len() / 60).take(60).collect();
    let mut hits = 0;
    for (_, question, answer) in &sample {
        let (status, body) = post(base, Some(ACME), json!({"query": question, "top_k": 5})).await;
        assert_eq!(status, 200, "{body}");
        if windows(&body).iter().any(|w| w["text"].as_str().unwrap().contains(answer.as_str())) {
            hits += 1;
        }
    }
    let recall = hits as f64 / sample.len() as f64;
    println!("answer in the top 5 windows: {hits}/{} = {recall:.2}", sample.len());
    assert!(recall >= 0.75, "answer recall@5 {recall:.2}");

    // An exact identifier is found, through the BM25 channel.
    let (status, body) = post(base, Some(ACME), json!({"query": IDENTIFIER})).await;
    assert_eq!(status, 200, "{body}");
    assert!(windows(&body)[0]["text"].as_str().unwrap().contains(IDENTIFIER));
    let (embedder, _) = models().await;
    let dense = embedder.embed(&[IDENTIFIER]).unwrap().remove(0);
    let ranked = store
        .query(&HybridQuery { dense, text: IDENTIFIER.into(), limit: 1, candidates: 100, filter: QueryFilter::default(), channel_ranks: true })
        .await
        .unwrap();
    assert!(ranked[0].record.sentence.contains(IDENTIFIER));
    assert_eq!(ranked[0].sparse_rank, Some(1), "{:?}", ranked[0]);

    // Tenant isolation: a bound key sees only its tenant, and cannot ask for another.
    let handbook_question = pages[0].content.lines().find(|l| l.len() > 60 && !l.starts_with('#')).unwrap().to_owned();
    for (key, tenant) in [(ACME, "acme"), (GLOBEX, "globex")] {
        let (status, body) = post(base, Some(key), json!({"query": handbook_question, "top_k": 10})).await;
        assert_eq!(status, 200, "{body}");
        let seen: BTreeSet<String> = windows(&body).iter().map(|w| w["tenant"].as_str().unwrap().to_owned()).collect();
        assert_eq!(seen, BTreeSet::from([tenant.to_owned()]));
    }
    let (status, body) = post(base, Some(ACME), json!({"query": "handbook", "tenant": "globex"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("forbidden")));
    let (status, body) = post(base, Some(ADMIN), json!({"query": handbook_question, "tenant": "globex"})).await;
    assert_eq!(status, 200);
    assert!(windows(&body).iter().all(|w| w["tenant"] == "globex"));
    let client = reqwest::Client::new();
    let doc = |key: &str, id: &str| client.get(format!("{base}/v1/documents/{}", id.replace('/', "%2F"))).bearer_auth(key.to_owned()).send();
    assert_eq!(doc(ACME, &pages[0].doc_id).await.unwrap().status().as_u16(), 404);
    let info: Value = doc(ADMIN, &pages[0].doc_id).await.unwrap().json().await.unwrap();
    assert_eq!(info["revision"].as_u64(), Some(pages[0].revision), "{info}");
    assert!(info["sentence_count"].as_u64().unwrap() > 10 && !info["sections"].as_array().unwrap().is_empty());
    assert_eq!(doc(ADMIN, "no-such-document").await.unwrap().status().as_u16(), 404);

    // Rerank: the configured reranker orders the windows, scores monotone.
    let (status, body) = post(base, Some(ACME), json!({"query": "Who won Super Bowl 50?", "rerank": true, "top_k": 8})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["reranker"].as_str().unwrap().starts_with("rescoring:"));
    let scores: Vec<f64> = windows(&body).iter().map(|w| w["scores"]["rerank"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|p| p[0] >= p[1]), "{scores:?}");

    // A smaller window radius: each window is its matched sentences and what lies between.
    let (_, wide) = post(base, Some(ACME), json!({"query": "Levi's Stadium", "top_k": 3})).await;
    let (status, narrow) = post(base, Some(ACME), json!({"query": "Levi's Stadium", "top_k": 3, "window_radius": 0})).await;
    assert_eq!(status, 200, "{narrow}");
    for w in windows(&narrow) {
        let matches = w["matches"].as_array().unwrap();
        assert_eq!(w["char_start"], matches[0]["char_start"]);
        assert_eq!(w["char_end"], matches[matches.len() - 1]["char_end"]);
    }
    let length = |b: &Value| windows(b).iter().map(|w| w["text"].as_str().unwrap().len()).sum::<usize>();
    assert!(length(&narrow) < length(&wide));

    // Bad requests: 4xx with a message saying what was wrong.
    let long = "x".repeat(2_001);
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"query": ""}), 422, "query must not be empty"),
        (json!({"query": long}), 422, "2001 characters"),
        (json!({"query": "x", "top_k": 0}), 422, "top_k = 0"),
        (json!({"query": "x", "top_k": 51}), 422, "top_k = 51"),
        (json!({"query": "x", "window_radius": 9}), 422, "indexed radius 3"),
        (json!({"query": "x", "doc_ids": (0..101).map(|i| i.to_string()).collect::<Vec<_>>()}), 422, "101 entries"),
        (json!({"query": "x", "colour": "red"}), 422, "unknown field `colour`"),
        (json!({"query": 7}), 422, "invalid type"),
        (json!({"top_k": 3}), 422, "missing field `query`"),
    ];
    for (body, status, message) in cases {
        let (got, answer) = post(base, Some(ACME), body.clone()).await;
        assert_eq!(got, status, "{body} → {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(message), "{body} → {answer}");
    }
    let (status, answer) = raw(base, ACME, Some("application/json"), b"{\"query\": ".to_vec()).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("malformed_request")), "{answer}");
    let (status, answer) = raw(base, ACME, None, b"{\"query\": \"x\"}".to_vec()).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (415, Some("unsupported_media_type")));
    let huge = serde_json::to_vec(&json!({"query": "x", "tenant": "y".repeat(70_000)})).unwrap();
    let (status, answer) = raw(base, ACME, Some("application/json"), huge).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (413, Some("body_too_large")), "{answer}");
    let response = client.get(format!("{base}/v1/search")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 405);
    let response = client.get(format!("{base}/v2/nothing")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 404);

    // Every documented query metric is served, and the merge decisions were counted.
    let metrics = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    let documented: Vec<String> = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .filter(|name| name.starts_with("casement_query_"))
        .map(str::to_owned)
        .collect();
    assert!(documented.len() >= 7, "{documented:?}");
    let served_names: BTreeSet<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("# TYPE "))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(served_names, documented.iter().map(String::as_str).collect(), "served vs docs/metrics.md");
    let kept = metrics
        .lines()
        .find(|l| l.starts_with("casement_query_merge_decisions_total{decision=\"kept\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    assert!(kept > 60.0, "kept = {kept}");
    assert!(metrics.contains("casement_query_requests_total{route=\"/v1/search\",status=\"422\"}"));
    assert_eq!(client.get(format!("{base}/readyz")).send().await.unwrap().status().as_u16(), 200);
    let openapi: Value = client.get(format!("{base}/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(openapi, serde_json::from_str::<Value>(casement_query::OPENAPI).unwrap());
}

/// Read-your-writes: a search with `min_revision` waits for a revision written while it
/// waits, then sees it; one that is never written gets 409 with the indexed revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_revision_waits_for_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let indexer = indexer(store.clone(), model);
    let page = |code: &str| format!("# Launch\n\nThe launch window opens at dawn.\n\nThe launch code is {code}. Keep it secret.\n");
    indexer.process(&upsert("launch", 1, "Launch", None, Format::Markdown, &page("AMBER-OWL"))).await.unwrap();
    let mut config = QueryConfig::default();
    config.limits.max_wait_ms = 3_000;
    let served = serve(config, store.clone()).await;
    let base = served.base.clone();

    let waiting = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let answer = post(&base, None, json!({"query": "What is the launch code?", "min_revision": {"launch": 2}})).await;
        (answer, started.elapsed())
    });
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "the search did not wait");
    indexer.process(&upsert("launch", 2, "Launch", None, Format::Markdown, &page("PURPLE-FALCON"))).await.unwrap();
    let ((status, body), waited) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(waited.as_millis() >= 400);
    let found = windows(&body);
    assert!(found.iter().all(|w| w["revision"] == 2), "{body}");
    assert!(found.iter().any(|w| w["text"].as_str().unwrap().contains("PURPLE-FALCON")));
    assert!(!found.iter().any(|w| w["text"].as_str().unwrap().contains("AMBER-OWL")));

    let (status, body) = post(&served.base, None, json!({"query": "launch", "min_revision": {"launch": 9}})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "revision_not_indexed");
    assert_eq!(body["error"]["indexed_revision"], 2);
    assert_eq!(body["error"]["doc_id"], "launch");
}
