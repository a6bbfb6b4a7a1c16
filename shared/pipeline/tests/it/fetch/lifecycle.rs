//! A page's whole life on a wiki, fetched through the stand-in Action API.

use std::time::{Duration, Instant};

use casement_pipeline::{FetchError, Metrics, Outcome, ProcessError, Reason};
use casement_store::Store;
use casement_testkit::wiki::{WikiRevision, WikiStandIn, page_change};
use serde_json::Value;

use super::support::*;

/// A page's life on a wiki: created, moved, deleted, undeleted, throttled, its text hidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_deletes_undeletes_throttling_and_hidden_revisions() {
    let wiki = WikiStandIn::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = Metrics::new();
    let processor = processor(dir.path(), &wiki, &metrics);
    let history = history();
    let first = long_page(&history);
    let doc = doc_id(first);
    wiki.publish(first);
    processor
        .process(&change("create", first))
        .await
        .expect("create");
    assert_eq!(stored(&processor, &doc).await, rebuild(first, &first.title));

    // A move makes a null revision under the new title: same document, new title and url.
    let moved = WikiRevision {
        rev_id: 900_001,
        title: format!("{} (archived)", first.title),
        ..first.clone()
    };
    wiki.publish(&moved);
    processor
        .process(&change("move", &moved))
        .await
        .expect("move");
    let state = processor
        .store
        .document(doc.as_str())
        .await
        .expect("state")
        .expect("indexed");
    assert_eq!(state.title, moved.title);
    assert_eq!(
        state.url.as_deref(),
        Some(
            format!(
                "https://wiki.example/wiki/{}",
                moved.title.replace(' ', "_")
            )
            .as_str()
        )
    );
    assert_eq!(
        stored(&processor, &doc).await,
        rebuild(&moved, &moved.title)
    );

    // An event older than what is indexed, or at its revision (a redelivery), fetches
    // nothing.
    let asked = wiki.requests().len();
    for old in [first, &moved] {
        let outcome = processor
            .process(&change("edit", old))
            .await
            .expect("stale");
        assert!(matches!(outcome, Outcome::Stale { .. }), "{outcome:?}");
    }
    assert_eq!(wiki.requests().len(), asked, "a stale event fetched");

    // Deleted, then undeleted at the same revision: back in the index.
    wiki.delete_page(moved.page_id);
    let outcome = processor
        .process(&change("delete", &moved))
        .await
        .expect("delete");
    assert!(matches!(outcome, Outcome::Deleted(_)), "{outcome:?}");
    assert!(stored(&processor, &doc).await.is_empty());
    wiki.undelete_page(moved.page_id);
    let outcome = processor
        .process(&change("undelete", &moved))
        .await
        .expect("undelete");
    assert!(matches!(outcome, Outcome::Applied(_)), "{outcome:?}");
    assert_eq!(
        stored(&processor, &doc).await,
        rebuild(&moved, &moved.title)
    );
    // A plain edit event at the deleted revision would not have: only an undelete restores.

    // Throttled twice (429, Retry-After: 1): the edit waits and goes through.
    let edited = WikiRevision {
        rev_id: 900_002,
        content: format!(
            "{}\n\nA paragraph added in a throttled period.",
            moved.content
        ),
        ..moved.clone()
    };
    wiki.publish(&edited);
    wiki.throttle(2);
    let started = Instant::now();
    processor
        .process(&change("edit", &edited))
        .await
        .expect("throttled edit");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "Retry-After honoured"
    );
    assert_eq!(counter(&metrics, "requests", "throttled"), 2);
    assert_eq!(
        stored(&processor, &doc).await,
        rebuild(&edited, &edited.title)
    );

    // A revision whose text was hidden before it was fetched: gone, dead-lettered with why.
    let hidden = WikiRevision {
        rev_id: 900_003,
        content: "Text that was revision-deleted.".into(),
        ..edited.clone()
    };
    wiki.publish(&hidden);
    wiki.hide(hidden.rev_id);
    let error = processor
        .process(&change("edit", &hidden))
        .await
        .expect_err("hidden");
    assert!(
        matches!(&error, ProcessError::Fetch(FetchError::Gone(why)) if why.contains("hidden")),
        "{error}"
    );
    assert!(!error.is_transient());
    assert_eq!(error.reason(), Reason::Gone);
    assert_eq!(
        stored(&processor, &doc).await,
        rebuild(&edited, &edited.title)
    );

    // Hiding the current revision's content removes the page from answers.
    let mut visibility = page_change(
        WIKI,
        DOMAIN,
        "visibility_change",
        &edited,
        "2026-11-25T06:01:00Z",
    );
    visibility["revision"]["is_content_visible"] = Value::Bool(false);
    let outcome = processor
        .process(&event(&visibility))
        .await
        .expect("hidden");
    assert!(matches!(outcome, Outcome::Deleted(_)), "{outcome:?}");
    assert!(stored(&processor, &doc).await.is_empty());
    assert_eq!(counter(&metrics, "revisions", "gone"), 1);
}
