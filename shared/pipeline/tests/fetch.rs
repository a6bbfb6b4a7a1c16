//! Revisions that events only name (MediaWiki `page_change` without content, as EventBus
//! and EventStreams publish it), fetched by the real client code from a stand-in Action
//! API on loopback (`casement_testkit::wiki`) that serves the 18F Handbook's real page
//! histories as wiki revisions. The processor runs on Qdrant Edge with the real model.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use casement_events::{DecodeConfig, Event, EventFormat, decode};
use casement_inference::Embed;
use casement_pipeline::fetch::FetchConfig;
use casement_pipeline::{
    EnrichConfig, FetchError, Fetcher, Metrics, Outcome, ProcessError, Processor, Reason,
};
use casement_store::{EdgeStore, Store};
use casement_testkit::wiki::{WikiRevision, WikiStandIn, page_change, wiki_history};
use casement_testkit::{model, read_log};
use casement_text::{Format, Revision, TextConfig, plan_upsert};
use serde_json::Value;

const WIKI: &str = "handbookwiki";
const DOMAIN: &str = "handbook.wiki.example";

fn fetch_config(wiki: &WikiStandIn) -> FetchConfig {
    FetchConfig {
        api_url: wiki.api_url.clone(),
        user_agent: "CasementTest/1.0 (https://casement.example/ops; ops@casement.example)".into(),
        requests_per_second: 50.0,
        ..FetchConfig::default()
    }
}

/// The processor on a fresh Edge store in `dir`, with no fetcher.
fn processor_without_fetch(dir: &std::path::Path, metrics: &Metrics) -> Processor<EdgeStore> {
    let store = casement_testkit::open_store(dir, model().dimension());
    casement_testkit::processor(store, model(), &EnrichConfig::default(), metrics)
}

fn processor(dir: &std::path::Path, wiki: &WikiStandIn, metrics: &Metrics) -> Processor<EdgeStore> {
    processor_without_fetch(dir, metrics)
        .with_fetcher(Fetcher::start(&fetch_config(wiki), metrics.fetch.clone()).expect("fetcher"))
}

/// The 18F sample (2,025 real revisions) as a wiki's history.
fn history() -> Vec<WikiRevision> {
    wiki_history(&read_log(&casement_testkit::data(
        "revisions/18f-handbook/sample.jsonl",
    )))
}

/// A page created with some length to it.
fn long_page(history: &[WikiRevision]) -> &WikiRevision {
    history
        .iter()
        .find(|r| r.kind == "create" && r.content.len() > 600)
        .expect("a long page")
}

fn event(json: &Value) -> Event {
    let bytes = serde_json::to_vec(json).expect("json");
    let config = DecodeConfig {
        format: EventFormat::Mediawiki,
        ..DecodeConfig::default()
    };
    decode(Some(&bytes), None, &config).expect("a page_change decodes")
}

fn change(kind: &str, revision: &WikiRevision) -> Event {
    event(&page_change(
        WIKI,
        DOMAIN,
        kind,
        revision,
        "2026-11-25T06:00:00Z",
    ))
}

fn doc_id(revision: &WikiRevision) -> String {
    format!("{WIKI}:{}", revision.page_id)
}

/// The records a fresh index would hold for `revision` under `title`.
fn rebuild(revision: &WikiRevision, title: &str) -> Vec<casement_text::SentenceRecord> {
    let revision = Revision {
        metadata: Default::default(),
        doc_id: doc_id(revision),
        revision: revision.rev_id,
        title: Some(title.to_owned()),
        url: Some(format!(
            "https://wiki.example/wiki/{}",
            title.replace(' ', "_")
        )),
        tenant: None,
        format: Format::Wikitext,
        content: revision.content.clone(),
    };
    let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
    let mut records = plan.embed;
    records.sort_by_key(|r| r.id);
    records
}

async fn stored(
    processor: &Processor<EdgeStore>,
    doc_id: &str,
) -> Vec<casement_text::SentenceRecord> {
    let mut records = processor.store.records(doc_id).await.expect("records");
    records.sort_by_key(|r| r.id);
    records
}

fn counter(metrics: &Metrics, name: &str, outcome: &str) -> u64 {
    let vec = if name == "requests" {
        &metrics.fetch.requests
    } else {
        &metrics.fetch.revisions
    };
    vec.with_label_values(&[outcome]).get()
}

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

async fn futures_join<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::with_capacity(handles.len());
    for handle in handles {
        outputs.push(handle.await.expect("task"));
    }
    outputs
}

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
            ..record
        })
        .collect();
    assert_eq!(stored(&processor, &doc).await, expected);
}
