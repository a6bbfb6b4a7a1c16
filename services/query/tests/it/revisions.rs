//! Atomic revisions for readers, over HTTP: an answer never mixes two revisions of a page
//! while it is being rewritten (the query service's `search/current.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;

use casement_query::QueryConfig;
use casement_text::Format;
use serde_json::json;
use support::*;

/// A bot must never be shown two revisions of a page at once: searches run without pause
/// while one document is rewritten 200 times (every revision changes its "edition"
/// sentences and moves others), and every answer holds one revision per document, each
/// window's text from the revision it is labelled with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_during_a_stream_of_edits_see_one_revision_per_document() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let dimension = model.dimension();
    let store = open_store(dir.path(), dimension);
    let indexer = indexer(store.clone(), model);
    // Every other revision adds a sentence at the top of each section, so every sentence
    // after it moves: dozens of payload updates, written one by one, per revision.
    let content = |r: u64| {
        let extra = if r.is_multiple_of(2) {
            "Keep the receipt for your records. "
        } else {
            ""
        };
        let steps = |what: &str| {
            (1..=30)
                .map(|i| format!("Step {i} of the {what} checks light number {i}. "))
                .collect::<String>()
        };
        format!(
            "# Router guide\n\n## Reset\n\n{extra}This is edition {r} of the reset steps. {}\n\n\
             ## Pairing\n\n{extra}This is edition {r} of the pairing steps. {}\n",
            steps("reset"),
            steps("pairing")
        )
    };
    let doc = |r: u64| {
        upsert(
            "kb/router",
            r,
            "Router guide",
            None,
            Format::Markdown,
            &content(r),
        )
    };
    indexer.process(&doc(1)).await.unwrap();
    let served = serve(QueryConfig::default(), store).await;
    let base = served.base.clone();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut searchers = Vec::new();
    for query in [
        "reset button edition",
        "pair the router edition",
        "light blinks",
    ] {
        let (base, stop) = (base.clone(), stop.clone());
        searchers.push(tokio::spawn(async move {
            let mut answers = 0;
            let mut revisions_seen = BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = json!({"query": query, "top_k": 5, "rerank": false});
                let (status, answer) = post(&base, None, body).await;
                assert_eq!(status, 200, "{answer}");
                let windows = answer["windows"].as_array().unwrap();
                let revisions: BTreeSet<u64> = windows
                    .iter()
                    .map(|w| w["revision"].as_u64().unwrap())
                    .collect();
                assert!(
                    revisions.len() <= 1,
                    "two revisions in one answer: {answer}"
                );
                for w in windows {
                    let revision = w["revision"].as_u64().unwrap();
                    let text = w["text"].as_str().unwrap();
                    for (i, _) in text.match_indices("edition ") {
                        let number: String = text[i + 8..]
                            .chars()
                            .take_while(char::is_ascii_digit)
                            .collect();
                        assert_eq!(
                            number,
                            revision.to_string(),
                            "text of another revision: {w}"
                        );
                    }
                }
                revisions_seen.extend(revisions);
                answers += 1;
            }
            (answers, revisions_seen.len())
        }));
    }
    for r in 2..=200 {
        indexer.process(&doc(r)).await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for searcher in searchers {
        let (answers, revisions) = searcher.await.unwrap();
        assert!(revisions > 1, "the searches ran during the edits");
        total += answers;
    }
    eprintln!("{total} answers during 199 rewrites, each with one revision per document");
    assert!(total >= 50, "{total} answers");
    // Every handle closed (the server's store probe stops on its own) before the directory
    // goes: opening the index again succeeds only then.
    drop((served, indexer));
    let mut store_config = casement_store::StoreConfig::default();
    store_config.edge.path = dir.path().join("index");
    casement_testkit::eventually(
        std::time::Duration::from_secs(10),
        "the index closes",
        || {
            let config = store_config.clone();
            async move { casement_store::EdgeStore::open(&config, dimension).is_ok() }
        },
    )
    .await;
}
