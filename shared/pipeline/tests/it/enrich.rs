//! LLM enrichment through the real `async-openai` client against an OpenAI-compatible stub
//! server on localhost: one call per changed section; contexts reused from the cache and,
//! after a restart, from the index payload; a failing endpoint falls back to the structural
//! preamble and is counted. Needs `make models` (the embedding runs for real).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use casement_events::{Change, Event, EventFormat};
use casement_inference::Embed;
use casement_pipeline::Metrics;
use casement_pipeline::Outcome;
use casement_pipeline::{EnrichConfig, EnrichMode, LlmConfig};
use casement_store::Store;
use casement_testkit::model;
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Stub {
    calls: Arc<AtomicUsize>,
    fail: Arc<AtomicBool>,
}

async fn completions(State(stub): State<Stub>, Json(body): Json<Value>) -> Response {
    stub.calls.fetch_add(1, Ordering::SeqCst);
    if stub.fail.load(Ordering::SeqCst) {
        let error = json!({"error": {"message": "overloaded", "type": "server_error", "param": null, "code": null}});
        return (StatusCode::BAD_GATEWAY, Json(error)).into_response();
    }
    let prompt = body["messages"][1]["content"].as_str().unwrap_or_default();
    let path = prompt
        .split("<section_path>")
        .nth(1)
        .and_then(|rest| rest.split("</section_path>").next())
        .unwrap_or_default();
    Json(json!({
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": format!("From the router manual, section {path}.")}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}
    }))
    .into_response()
}

fn upsert(revision: u64, a: &str, b: &str) -> Event {
    Event {
        change: Change::Upsert(casement_text::Revision {
            access: None,
            metadata: Default::default(),
            doc_id: "kb/router".into(),
            revision,
            title: Some("Router manual".into()),
            url: None,
            tenant: None,
            format: casement_text::Format::Markdown,
            content: format!("# Router manual\n\n## Reset\n\n{a}\n\n## Pairing\n\n{b}\n"),
            revision_url: None,
        }),
        format: EventFormat::Native,
    }
}

/// Section heading → (context, context_source) of its records.
async fn contexts<S: Store>(store: &S) -> BTreeMap<String, (String, String)> {
    store
        .records("kb/router")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.section_path.join(" > "), (r.context, r.context_source)))
        .collect()
}

/// The stub on a port of its own, and the LLM enrichment that asks it.
async fn start_stub() -> (Stub, EnrichConfig) {
    let stub = Stub::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(stub.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let enrich = EnrichConfig {
        mode: EnrichMode::Llm,
        llm: LlmConfig {
            base_url: format!("http://{address}/v1"),
            model: "stub-model".into(),
            api_key: "test-key".into(),
            ..LlmConfig::default()
        },
    };
    (stub, enrich)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_contexts_are_called_once_per_changed_section_cached_and_fall_back() {
    let (stub, enrich) = start_stub().await;
    let dir = tempfile::tempdir().unwrap();
    let store = casement_testkit::open_store(dir.path(), model().dimension());
    let metrics = Metrics::new();
    let processor = casement_testkit::processor(store.clone(), model(), &enrich, &metrics);
    let calls = || stub.calls.load(Ordering::SeqCst);
    let reset = "Hold the button for ten seconds. The light blinks twice.";
    let pairing = "Press both buttons to pair. The light turns blue.";

    let applied = processor.process(&upsert(1, reset, pairing)).await.unwrap();
    assert!(matches!(applied, Outcome::Applied(_)));
    assert_eq!(calls(), 2, "one call per section with sentences");
    let got = contexts(&store).await;
    let source = "llm:stub-model:v1".to_owned();
    assert_eq!(
        got["Router manual > Reset"],
        (
            "From the router manual, section Router manual > Reset.".to_owned(),
            source.clone()
        )
    );
    assert_eq!(got["Router manual > Pairing"].1, source);

    // Only the edited section is sent again.
    let edited = "Press both buttons for five seconds to pair. The light turns blue.";
    processor.process(&upsert(2, reset, edited)).await.unwrap();
    assert_eq!(calls(), 3);

    // A restart (fresh caches) pays only for the section that changed: the unchanged one's
    // context comes from the index payload.
    let restarted = casement_testkit::processor(store.clone(), model(), &enrich, &metrics);
    let reset2 = "Hold the button for twenty seconds. The light blinks twice.";
    restarted.process(&upsert(3, reset2, edited)).await.unwrap();
    assert_eq!(calls(), 4);
    let hits = metrics.enrichment_cache.with_label_values(&["hit"]).get();
    let misses = metrics.enrichment_cache.with_label_values(&["miss"]).get();
    assert_eq!(
        (hits, misses),
        (2, 4),
        "hits: section unchanged at revisions 2 and 3"
    );

    // The endpoint fails: the structural preamble is used, the failure counted, the event applied.
    stub.fail.store(true, Ordering::SeqCst);
    let edited_again = "Press both buttons for ten seconds to pair. The light turns blue.";
    let outcome = restarted
        .process(&upsert(4, reset2, edited_again))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Applied(_)));
    assert!(calls() >= 5);
    assert_eq!(metrics.llm_failures.get(), 1);
    let got = contexts(&store).await;
    assert_eq!(
        got["Router manual > Pairing"],
        (
            "Router manual > Pairing".to_owned(),
            "structural".to_owned()
        )
    );
    assert_eq!(
        got["Router manual > Reset"].1, source,
        "the other section keeps its LLM context"
    );
}

/// A model migration's copy keeps the contexts the LLM wrote (the same model and prompt
/// version: no call), and asks again under another prompt version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_keeps_llm_contexts_of_the_same_prompt() {
    let (stub, enrich) = start_stub().await;
    let calls = || stub.calls.load(Ordering::SeqCst);
    let dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
    let source = casement_testkit::open_store(dirs[0].path(), model().dimension());
    let metrics = Metrics::new();
    casement_testkit::processor(source.clone(), model(), &enrich, &metrics)
        .process(&upsert(
            1,
            "Hold the button. It blinks.",
            "Press both. It is blue.",
        ))
        .await
        .unwrap();
    assert_eq!(calls(), 2);

    let migrate = |dir: &std::path::Path, enrich: &EnrichConfig| {
        let target = casement_testkit::open_store(dir, model().dimension());
        casement_pipeline::migrate::Migration {
            source: source.clone(),
            target: Arc::new(casement_testkit::processor(
                target,
                model(),
                enrich,
                &Metrics::new(),
            )),
            concurrency: 2,
            sync_every: 64,
            stop_after: None,
            reuse_vectors: false,
            over_tombstones: true,
        }
    };
    let same = migrate(dirs[1].path(), &enrich);
    let pass = same.pass(&()).await.unwrap();
    assert_eq!((pass.copied, pass.embedded > 0), (1, true));
    assert_eq!(calls(), 2, "the same prompt: the stored contexts are kept");
    assert_eq!(contexts(&same.target.store).await, contexts(&source).await);

    let mut other = enrich.clone();
    other.llm.prompt_version = "v2".into();
    let asked = migrate(dirs[2].path(), &other);
    asked.pass(&()).await.unwrap();
    assert_eq!(
        calls(),
        4,
        "another prompt version: asked again, once per section"
    );
    assert!(
        contexts(&asked.target.store)
            .await
            .values()
            .all(|(_, source)| source == "llm:stub-model:v2")
    );
}
