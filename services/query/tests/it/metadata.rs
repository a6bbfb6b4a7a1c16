//! Event metadata end to end: stored with every point by the indexer's stages, returned
//! with each window, filterable on the keys of `store.indexed_metadata` (others refused
//! with a 422 that names the allowed ones), and rewritten without re-embedding when only
//! the metadata changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use casement_events::Change;
use casement_query::QueryConfig;
use casement_store::{EdgeStore, StoreConfig};
use casement_text::Format;
use serde_json::{Value, json};
use support::*;

/// Three different pages about refunds, one per team.
fn page(doc_id: &str) -> &'static str {
    match doc_id {
        "billing-refunds" => {
            "# Refunds\n\nA refund is paid back to the card used for the order within five working days. Orders paid by invoice are refunded by bank transfer.\n"
        }
        "support-refunds" => {
            "# Handling refund requests\n\nWhen a customer asks for a refund, check the order number first. Support agents can approve a refund of up to 50 euros themselves.\n"
        }
        _ => {
            "# Gift cards\n\nGift cards are never refunded. An unused gift card can be exchanged for store credit once.\n"
        }
    }
}

fn event(doc_id: &str, revision: u64, metadata: Value) -> casement_events::Event {
    let mut event = upsert(
        doc_id,
        revision,
        doc_id,
        None,
        Format::Markdown,
        page(doc_id),
    );
    if let Change::Upsert(r) = &mut event.change {
        r.metadata = metadata.as_object().cloned().unwrap_or_default();
    }
    event
}

fn docs(answer: &Value) -> Vec<String> {
    let mut docs: Vec<String> = answer["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .map(|w| w["doc_id"].as_str().unwrap().to_owned())
        .collect();
    docs.sort();
    docs.dedup();
    docs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_returned_and_filtered_on_declared_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let mut store_config = StoreConfig::default();
    store_config.edge.path = dir.path().join("index");
    store_config.indexed_metadata = vec!["team".into(), "tier".into()];
    let store = EdgeStore::open(&store_config, model.dimension()).unwrap();
    let indexer = indexer(store.clone(), model);
    for e in [
        event(
            "billing-refunds",
            1,
            json!({"team": "billing", "tier": 2, "owner": {"name": "Ana"}}),
        ),
        event(
            "support-refunds",
            1,
            json!({"team": ["support", "docs"], "tier": 1}),
        ),
        event("plain-refunds", 1, Value::Null),
    ] {
        indexer.process(&e).await.expect("indexed");
    }
    let config = QueryConfig {
        store: store_config,
        ..QueryConfig::default()
    };
    let served = serve(config, store.clone()).await;
    let base = served.base.as_str();
    let search = |extra: Value| {
        let mut body = json!({"query": "refund", "top_k": 10});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        async move { post(base, None, body).await }
    };

    // Every window carries its document's metadata, as given ({} when none).
    let (status, all) = search(json!({})).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        docs(&all),
        ["billing-refunds", "plain-refunds", "support-refunds"]
    );
    for window in all["windows"].as_array().unwrap() {
        let expected = match window["doc_id"].as_str().unwrap() {
            "billing-refunds" => json!({"team": "billing", "tier": 2, "owner": {"name": "Ana"}}),
            "support-refunds" => json!({"team": ["support", "docs"], "tier": 1}),
            _ => json!({}),
        };
        assert_eq!(window["metadata"], expected, "{window}");
    }

    for (filter, expected) in [
        (json!({"team": "billing"}), vec!["billing-refunds"]),
        (json!({"team": "docs"}), vec!["support-refunds"]),
        (
            json!({"team": ["billing", "support"]}),
            vec!["billing-refunds", "support-refunds"],
        ),
        (json!({"tier": 1}), vec!["support-refunds"]),
        (
            json!({"tier": [1, 2]}),
            vec!["billing-refunds", "support-refunds"],
        ),
        (json!({"team": "billing", "tier": 1}), vec![]),
    ] {
        let (status, answer) = search(json!({ "metadata": filter })).await;
        assert_eq!(status, 200, "{filter}: {answer}");
        assert_eq!(docs(&answer), expected, "{filter}");
    }

    // Only declared keys, only scalar values or arrays of one kind.
    for (filter, message) in [
        (
            json!({"owner": "Ana"}),
            "metadata.owner: not a filterable key; these are: team, tier",
        ),
        (json!({"team": {"a": 1}}), "metadata.team: give a string"),
        (json!({"team": []}), "metadata.team: give a string"),
        (json!({"tier": [1, "two"]}), "metadata.tier: give a string"),
        (json!({"tier": 1.5}), "metadata.tier: give a string"),
    ] {
        let (status, answer) = search(json!({ "metadata": filter })).await;
        assert_eq!(status, 422, "{filter}: {answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{filter}: {text}");
    }

    // New metadata, same text: payloads rewritten, nothing embedded; the filter follows.
    let outcome = indexer
        .process(&event("billing-refunds", 2, json!({"team": "finance"})))
        .await
        .expect("indexed");
    let casement_pipeline::Outcome::Applied(decisions) = outcome else {
        panic!("not applied: {outcome:?}")
    };
    assert_eq!(
        decisions.embedded, 0,
        "a metadata change re-embedded: {decisions:?}"
    );
    assert!(decisions.payload_updated > 0, "{decisions:?}");
    let (_, answer) = search(json!({"metadata": {"team": "finance"}})).await;
    assert_eq!(docs(&answer), ["billing-refunds"]);
    let (_, answer) = search(json!({"metadata": {"team": "billing"}})).await;
    assert!(docs(&answer).is_empty(), "{answer}");
}
