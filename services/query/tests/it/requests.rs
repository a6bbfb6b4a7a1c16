//! The query service's answers to everything but a good search: missing keys, each kind of
//! bad request (4xx with a message), read-your-writes (`min_revision`), `/metrics` against
//! docs/metrics.md, `/readyz`, `/openapi.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;

use casement_query::QueryConfig;
use casement_query::config::ApiKey;
use casement_text::Format;
use serde_json::{Value, json};
use support::*;

const ACME: &str = "acme-key-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_4xx_with_a_message_and_metrics_are_documented() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let article = &squad_articles(1)[0];
    indexer(store.clone(), model)
        .process(&upsert(
            "squad-0",
            1,
            &article.title,
            Some("acme"),
            Format::Text,
            &article.text,
        ))
        .await
        .unwrap();
    let mut config = QueryConfig::default();
    config.auth.keys = vec![ApiKey {
        groups: None,
        token: ACME.into(),
        tenant: Some("acme".into()),
        name: None,
    }];
    golden_set_in_process(&dir, &config, &store).await;
    let served = serve(config, store).await;
    let base = served.base.as_str();
    let client = reqwest::Client::new();
    // 401 without a key or with an unknown one.
    let (status, body) = post(base, None, json!({"query": "Super Bowl"})).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");
    assert_eq!(
        post(base, Some("not-a-key-0123456789"), json!({"query": "x"}))
            .await
            .0,
        401
    );

    let (status, body) = post(base, Some(ACME), json!({"query": "Who won Super Bowl 50?"})).await;
    assert_eq!(status, 200, "{body}");
    assert!(!windows(&body).is_empty());

    // Bad requests: 4xx with a message saying what was wrong.
    let long = "x".repeat(2_001);
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"query": ""}), 422, "query must not be empty"),
        (json!({"query": long}), 422, "2001 characters"),
        (json!({"query": "x", "top_k": 0}), 422, "top_k = 0"),
        (json!({"query": "x", "top_k": 51}), 422, "top_k = 51"),
        (
            json!({"query": "x", "window_radius": 9}),
            422,
            "indexed radius 3",
        ),
        (
            json!({"query": "x", "token_budget": 0}),
            422,
            "token_budget = 0 must be between 1 and 4000",
        ),
        (
            json!({"query": "x", "token_budget": 4001}),
            422,
            "token_budget = 4001",
        ),
        (
            json!({"query": "x", "doc_ids": (0..101).map(|i| i.to_string()).collect::<Vec<_>>()}),
            422,
            "101 entries",
        ),
        (
            json!({"query": "x", "colour": "red"}),
            422,
            "unknown field `colour`",
        ),
        (json!({"query": 7}), 422, "invalid type"),
        (
            json!({"query": "x", "top_k": "five"}),
            422,
            "top_k: invalid type: string \"five\", expected a non-negative integer",
        ),
        (
            json!({"query": "x", "doc_ids": {"a": 1}}),
            422,
            "doc_ids: invalid type: object, expected an array",
        ),
        (json!({"top_k": 3}), 422, "missing field `query`"),
    ];
    for (body, status, message) in cases {
        let (got, answer) = post(base, Some(ACME), body.clone()).await;
        assert_eq!(got, status, "{body} → {answer}");
        let text = answer["error"]["message"].as_str().unwrap_or_default();
        for internal in [
            "u32",
            "usize",
            "struct ",
            "SearchRequest",
            "Failed to deserialize",
        ] {
            assert!(!text.contains(internal), "{internal}: {body} → {answer}");
        }
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains(message),
            "{body} → {answer}"
        );
    }
    let (status, answer) = raw(
        base,
        ACME,
        Some("application/json"),
        b"{\"query\": ".to_vec(),
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("malformed_request")),
        "{answer}"
    );
    let (status, answer) = raw(base, ACME, None, b"{\"query\": \"x\"}".to_vec()).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (415, Some("unsupported_media_type"))
    );
    let huge = serde_json::to_vec(&json!({"query": "x", "tenant": "y".repeat(70_000)})).unwrap();
    let (status, answer) = raw(base, ACME, Some("application/json"), huge).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (413, Some("body_too_large")),
        "{answer}"
    );
    let response = client
        .get(format!("{base}/v1/search"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 405);
    let response = client
        .get(format!("{base}/v2/nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    // Every documented query metric is served, and the merge decisions were counted.
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let documented: Vec<String> = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/metrics.md"
    ))
    .unwrap()
    .lines()
    .filter_map(|l| l.strip_prefix("| `"))
    .filter_map(|rest| rest.split('`').next())
    .filter(|name| name.starts_with("casement_query_") || *name == "casement_index_replaced")
    .map(str::to_owned)
    .collect();
    assert!(documented.len() >= 8, "{documented:?}");
    let served_names: BTreeSet<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("# TYPE "))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(
        served_names,
        documented.iter().map(String::as_str).collect(),
        "served vs docs/metrics.md"
    );
    // Label values too: stage and merge decision serve exactly the documented values.
    casement_testkit::metrics_doc::assert_served_as_documented(&metrics, &["casement_query_"], &[]);
    let kept = metrics
        .lines()
        .find(|l| l.starts_with("casement_query_merge_decisions_total{decision=\"kept\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    assert!(kept >= 1.0, "kept = {kept}");
    assert!(metrics.contains("casement_query_requests_total{route=\"/v1/search\",status=\"422\"}"));
    // The 4xx above are timed apart from the answered searches.
    assert!(metrics.lines().any(|l| l.starts_with(
        "casement_query_request_duration_seconds_count{route=\"/v1/search\",status_class=\"4xx\"}"
    ) && !l.ends_with(" 0")));
    assert_eq!(
        client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    let openapi: Value = client
        .get(format!("{base}/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The repository's document, with this deployment's limits (here the defaults).
    assert_eq!(
        openapi,
        serde_json::from_str::<Value>(casement_query::OPENAPI).unwrap()
    );
    let mut tight = QueryConfig::default();
    tight.limits.max_top_k = 7;
    let served: Value = serde_json::from_str(&casement_query::http::openapi(&tight)).unwrap();
    assert_eq!(
        served["components"]["schemas"]["SearchRequest"]["properties"]["top_k"]["maximum"],
        7
    );
}

/// The service's own golden-set runner over the same index: a case passes (its tenant's
/// document, with its text), one fails; the gauges hold the run and are documented; a
/// golden file broken after start makes a run an `error` that leaves the gauges alone.
async fn golden_set_in_process(
    dir: &tempfile::TempDir,
    config: &QueryConfig,
    store: &casement_store::EdgeStore,
) {
    let golden = dir.path().join("golden.jsonl");
    std::fs::write(
        &golden,
        concat!(
            r#"{"id": "afc", "query": "Which NFL team represented the AFC at Super Bowl 50?", "doc_id": "squad-0", "tenant": "acme", "text": "Denver  broncos"}"#,
            "\n",
            r#"{"id": "gone", "query": "Which NFL team represented the AFC at Super Bowl 50?", "doc_id": "squad-9", "tenant": "acme"}"#,
            "\n",
        ),
    )
    .unwrap();
    let mut config = config.clone();
    config.eval.golden = golden.clone();
    let (model, _) = models().await;
    let app = casement_query::service::app(
        config,
        store.clone(),
        model,
        None,
        casement_query::Metrics::new(),
    );
    let registry = &app.metrics.registry;
    let evaluator = casement_query::eval::Evaluator::new(&app, registry).expect("golden set set");
    let report = evaluator.run().await.unwrap();
    assert_eq!(
        (report.queries, report.failures),
        (2, 1),
        "{}",
        report.render()
    );
    assert!(report.cases[0].passed(), "{}", report.render());
    assert!(report.render().contains("FAIL gone (line 2)"));
    let metrics = casement_service::render(registry);
    casement_testkit::metrics_doc::assert_served_as_documented(&metrics, &["casement_eval_"], &[]);
    for series in [
        "casement_eval_queries 2",
        "casement_eval_failures 1",
        "casement_eval_recall 0.5",
        "casement_eval_runs_total{outcome=\"failed\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == series), "{series}:\n{metrics}");
    }
    let mrr = metrics
        .lines()
        .find_map(|l| l.strip_prefix("casement_eval_mrr "))
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(mrr, Some(report.mrr), "{metrics}");
    // Golden searches are not user traffic.
    assert!(
        !metrics.contains("casement_query_returned_windows_count 1"),
        "{metrics}"
    );
    std::fs::write(&golden, "{\"query\": \"q\"}\n").unwrap();
    let error = evaluator.run().await.unwrap_err().to_string();
    assert!(error.contains("line 1: missing field `doc_id`"), "{error}");
    let metrics = casement_service::render(registry);
    assert!(
        metrics
            .lines()
            .any(|l| l == "casement_eval_runs_total{outcome=\"error\"} 1")
    );
    assert!(
        metrics.lines().any(|l| l == "casement_eval_queries 2"),
        "{metrics}"
    );
}

/// Read-your-writes: a search with `min_revision` waits for a revision written while it
/// waits, then sees it; one that is never written gets 409 with the indexed revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_revision_waits_for_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let indexer = indexer(store.clone(), model);
    let page = |code: &str| {
        format!(
            "# Launch\n\nThe launch window opens at dawn.\n\nThe launch code is {code}. Keep it secret.\n"
        )
    };
    indexer
        .process(&upsert(
            "launch",
            1,
            "Launch",
            None,
            Format::Markdown,
            &page("AMBER-OWL"),
        ))
        .await
        .unwrap();
    let mut config = QueryConfig::default();
    config.limits.max_wait_ms = 3_000;
    let served = serve(config, store.clone()).await;
    let base = served.base.clone();

    let waiting = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let answer = post(
            &base,
            None,
            json!({"query": "What is the launch code?", "min_revision": {"launch": 2}}),
        )
        .await;
        (answer, started.elapsed())
    });
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "the search did not wait");
    indexer
        .process(&upsert(
            "launch",
            2,
            "Launch",
            None,
            Format::Markdown,
            &page("PURPLE-FALCON"),
        ))
        .await
        .unwrap();
    let ((status, body), waited) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(waited.as_millis() >= 400);
    let found = windows(&body);
    assert!(found.iter().all(|w| w["revision"] == 2), "{body}");
    assert!(
        found
            .iter()
            .any(|w| w["text"].as_str().unwrap().contains("PURPLE-FALCON"))
    );
    assert!(
        !found
            .iter()
            .any(|w| w["text"].as_str().unwrap().contains("AMBER-OWL"))
    );

    let (status, body) = post(
        &served.base,
        None,
        json!({"query": "launch", "min_revision": {"launch": 9}}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "revision_not_indexed");
    assert_eq!(body["error"]["indexed_revision"], 2);
    assert_eq!(body["error"]["doc_id"], "launch");

    // The request deadline bounds everything, a min_revision wait included: 504.
    let mut config = QueryConfig::default();
    config.limits.request_timeout_ms = 300;
    let hurried = serve(config, store).await;
    let started = std::time::Instant::now();
    let (status, body) = post(
        &hurried.base,
        None,
        json!({"query": "launch code", "min_revision": {"launch": 9}}),
    )
    .await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "timeout");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("300 ms")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}
