//! Helpers of the fetch tests: the stand-in wiki's configuration, processors, events
//! built from the 18F history, the rebuilt records of a revision, counters.

use casement_events::{DecodeConfig, Event, EventFormat, decode};
use casement_inference::Embed;
use casement_pipeline::fetch::FetchConfig;
use casement_pipeline::{EnrichConfig, Fetcher, Metrics, Processor};
use casement_store::{EdgeStore, Store};
use casement_testkit::wiki::{WikiRevision, WikiStandIn, page_change, wiki_history};
use casement_testkit::{model, read_log};
use casement_text::{Format, Revision, TextConfig, plan_upsert};
use serde_json::Value;

pub const WIKI: &str = "handbookwiki";
pub const DOMAIN: &str = "handbook.wiki.example";

pub fn fetch_config(wiki: &WikiStandIn) -> FetchConfig {
    FetchConfig {
        api_url: wiki.api_url.clone(),
        user_agent: "CasementTest/1.0 (https://casement.example/ops; ops@casement.example)".into(),
        requests_per_second: 50.0,
        ..FetchConfig::default()
    }
}

/// The processor on a fresh Edge store in `dir`, with no fetcher.
pub fn processor_without_fetch(dir: &std::path::Path, metrics: &Metrics) -> Processor<EdgeStore> {
    let store = casement_testkit::open_store(dir, model().dimension());
    casement_testkit::processor(store, model(), &EnrichConfig::default(), metrics)
}

pub fn processor(
    dir: &std::path::Path,
    wiki: &WikiStandIn,
    metrics: &Metrics,
) -> Processor<EdgeStore> {
    processor_without_fetch(dir, metrics)
        .with_fetcher(Fetcher::start(&fetch_config(wiki), metrics.fetch.clone()).expect("fetcher"))
}

/// The 18F sample (2,025 real revisions) as a wiki's history.
pub fn history() -> Vec<WikiRevision> {
    wiki_history(&read_log(&casement_testkit::data(
        "revisions/18f-handbook/sample.jsonl",
    )))
}

/// A page created with some length to it.
pub fn long_page(history: &[WikiRevision]) -> &WikiRevision {
    history
        .iter()
        .find(|r| r.kind == "create" && r.content.len() > 600)
        .expect("a long page")
}

pub fn event(json: &Value) -> Event {
    let bytes = serde_json::to_vec(json).expect("json");
    let config = DecodeConfig {
        format: EventFormat::Mediawiki,
        ..DecodeConfig::default()
    };
    decode(Some(&bytes), None, &config).expect("a page_change decodes")
}

pub fn change(kind: &str, revision: &WikiRevision) -> Event {
    event(&page_change(
        WIKI,
        DOMAIN,
        kind,
        revision,
        "2026-11-25T06:00:00Z",
    ))
}

pub fn doc_id(revision: &WikiRevision) -> String {
    format!("{WIKI}:{}", revision.page_id)
}

/// The records a fresh index would hold for `revision` under `title`.
pub fn rebuild(revision: &WikiRevision, title: &str) -> Vec<casement_text::SentenceRecord> {
    let revision = Revision {
        access: None,
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
        revision_url: Some(format!(
            "https://wiki.example/w/index.php?oldid={}",
            revision.rev_id
        )),
    };
    let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
    let mut records = plan.embed;
    records.sort_by_key(|r| r.id);
    records
}

pub async fn stored(
    processor: &Processor<EdgeStore>,
    doc_id: &str,
) -> Vec<casement_text::SentenceRecord> {
    let mut records = processor.store.records(doc_id).await.expect("records");
    records.sort_by_key(|r| r.id);
    records
}

pub fn counter(metrics: &Metrics, name: &str, outcome: &str) -> u64 {
    let vec = if name == "requests" {
        &metrics.fetch.requests
    } else {
        &metrics.fetch.revisions
    };
    vec.with_label_values(&[outcome]).get()
}

pub async fn futures_join<F: std::future::Future + Send + 'static>(
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
