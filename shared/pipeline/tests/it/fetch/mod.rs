//! Revisions that events only name (MediaWiki `page_change` without content, as EventBus
//! and EventStreams publish it), fetched by the real client code from a stand-in Action
//! API on loopback (`casement_testkit::wiki`) that serves the 18F Handbook's real page
//! histories as wiki revisions. The processor runs on Qdrant Edge with the real model.

mod hostile;
mod lifecycle;
mod support;

use std::collections::BTreeMap;

use casement_pipeline::{Fetcher, Metrics, Outcome, Reason};
use casement_testkit::wiki::{WikiRevision, WikiStandIn, page_change};
use serde_json::Value;

use support::*;

/// The first 300 revisions of the 18F history (the 2,025-event sample) as a wiki's edits, each published and then
/// announced without content: every page in the index equals a rebuild of its latest
/// revision, and the user agent of the configuration is what the wiki saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_announced_without_content_is_fetched_and_equals_a_rebuild() {
    let wiki = WikiStandIn::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = Metrics::new();
    let processor = processor(dir.path(), &wiki, &metrics);
    let history: Vec<WikiRevision> = history().into_iter().take(300).collect();
    let mut latest: BTreeMap<u64, &WikiRevision> = BTreeMap::new();
    let mut deleted = 0;
    for revision in &history {
        if revision.kind == "delete" {
            wiki.delete_page(revision.page_id);
            deleted += 1;
        } else {
            wiki.publish(revision);
        }
        let outcome = processor
            .process(&change(revision.kind, revision))
            .await
            .unwrap_or_else(|e| panic!("{} rev {}: {e}", doc_id(revision), revision.rev_id));
        assert!(
            matches!(outcome, Outcome::Applied(_) | Outcome::Deleted(_)),
            "{outcome:?}"
        );
        latest.insert(revision.page_id, revision);
    }
    for revision in latest.values() {
        let records = stored(&processor, &doc_id(revision)).await;
        if revision.kind == "delete" {
            assert!(records.is_empty(), "{} deleted", doc_id(revision));
        } else {
            assert_eq!(
                records,
                rebuild(revision, &revision.title),
                "{}",
                doc_id(revision)
            );
        }
    }
    let fetched = history.len() - deleted;
    assert_eq!(counter(&metrics, "revisions", "fetched"), fetched as u64);
    assert_eq!(wiki.requests().len(), fetched, "one request per lone event");
    assert_eq!(
        wiki.user_agents().into_iter().collect::<Vec<_>>(),
        vec![fetch_config(&wiki).user_agent]
    );
}

/// Many lanes asking at once share requests (up to `batch_size` revisions each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fetches_are_batched() {
    let wiki = WikiStandIn::start().await;
    let history = history();
    let revisions: Vec<&WikiRevision> = history
        .iter()
        .filter(|r| r.kind != "delete")
        .take(120)
        .collect();
    for revision in &revisions {
        wiki.publish(revision);
    }
    let metrics = Metrics::new();
    let fetcher = Fetcher::start(&fetch_config(&wiki), metrics.fetch.clone())
        .expect("fetcher")
        .expect("configured");
    let answers = futures_join(revisions.iter().map(|r| {
        let fetcher = fetcher.clone();
        let rev_id = r.rev_id;
        async move { fetcher.fetch(DOMAIN, rev_id).await }
    }))
    .await;
    for (revision, answer) in revisions.iter().zip(answers) {
        assert_eq!(answer.expect("fetched").content, revision.content);
    }
    let requests = wiki.requests();
    assert!(
        requests.len() <= 4 && requests.iter().all(|r| r.len() <= 50),
        "120 revisions in {} requests of {:?}",
        requests.len(),
        requests.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

/// Without `[fetch] api_url`, an event without content is dead-lettered as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_api_an_event_without_content_is_no_content() {
    let dir = tempfile::tempdir().expect("temp dir");
    let processor = processor_without_fetch(dir.path(), &Metrics::new());
    let history = history();
    let error = processor
        .process(&change("create", &history[0]))
        .await
        .expect_err("nothing to fetch with");
    assert_eq!(error.reason(), Reason::NoContent);
    assert!(!error.is_transient());
    assert!(error.to_string().contains("fetch.api_url"), "{error}");
}

/// An undelete that carries its content (a stream configured with content) restores the
/// page deleted at its revision too; a plain edit at that revision does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undelete_with_its_content_restores_the_page() {
    let dir = tempfile::tempdir().expect("temp dir");
    let processor = processor_without_fetch(dir.path(), &Metrics::new());
    let history = history();
    let page = long_page(&history);
    let with_content = |kind: &str| {
        let mut json = page_change(WIKI, DOMAIN, kind, page, "2026-11-25T06:00:00Z");
        json["revision"]["content_slots"]["main"]["content_body"] =
            Value::String(page.content.clone());
        event(&json)
    };
    let doc = doc_id(page);
    processor
        .process(&with_content("create"))
        .await
        .expect("create");
    processor
        .process(&change("delete", page))
        .await
        .expect("delete");
    assert!(stored(&processor, &doc).await.is_empty());
    let outcome = processor
        .process(&with_content("edit"))
        .await
        .expect("edit");
    assert!(matches!(outcome, Outcome::Stale { .. }), "{outcome:?}");
    let outcome = processor
        .process(&with_content("undelete"))
        .await
        .expect("undelete");
    assert!(matches!(outcome, Outcome::Applied(_)), "{outcome:?}");
    // The event's own title and no url (no fetch named the page): otherwise a rebuild.
    let expected: Vec<_> = rebuild(page, &page.title)
        .into_iter()
        .map(|record| casement_text::SentenceRecord {
            url: None,
            revision_url: None,
            ..record
        })
        .collect();
    assert_eq!(stored(&processor, &doc).await, expected);
}
