//! Stand-ins for a MediaWiki on loopback, for tests and benchmarks that cannot reach a
//! wiki: its Action API ([`WikiStandIn`]) and an EventStreams endpoint of its changes
//! ([`StreamStandIn`]), fed with real page histories ([`wiki_history`]) and the
//! `page_change` events that announce them ([`page_change`]). They are not MediaWiki and
//! claim no more than the shapes of its answers, which follow its documentation.

mod api;
mod changes;
mod edits;
mod stream;

use std::collections::HashMap;

use casement_events::revision_log::LogEvent;
use serde_json::{Value, json};

pub use api::WikiStandIn;
pub use stream::StreamStandIn;

/// One revision of a wiki page, as the stand-in serves it and a `page_change` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiRevision {
    pub page_id: u64,
    pub rev_id: u64,
    pub title: String,
    pub content: String,
    /// The page_change kind that made it: create, edit or delete.
    pub kind: &'static str,
}

/// The revision log as a wiki's history: a page id per document (in order of first
/// appearance), a revision id per event, numbered across the wiki from 1000 in log order
/// (a wiki's revision ids grow over all its pages). Deletes keep the page's last revision.
pub fn wiki_history(events: &[LogEvent]) -> Vec<WikiRevision> {
    let mut pages: HashMap<&str, u64> = HashMap::new();
    let mut last: HashMap<u64, WikiRevision> = HashMap::new();
    let mut history = Vec::with_capacity(events.len());
    for (i, event) in events.iter().enumerate() {
        let next_page = pages.len() as u64 + 1;
        let page_id = *pages.entry(event.doc_id.as_str()).or_insert(next_page);
        let title = event
            .title
            .clone()
            .unwrap_or_else(|| event.doc_id.rsplit('/').next().unwrap_or("Page").to_owned());
        let revision = if event.is_delete() {
            let Some(previous) = last.get(&page_id) else {
                continue;
            };
            WikiRevision {
                kind: "delete",
                ..previous.clone()
            }
        } else {
            WikiRevision {
                page_id,
                rev_id: 1000 + i as u64,
                title,
                content: event.content.clone(),
                kind: if last.contains_key(&page_id) {
                    "edit"
                } else {
                    "create"
                },
            }
        };
        last.insert(page_id, revision.clone());
        history.push(revision);
    }
    history
}

/// A `mediawiki.page_change` event (schema 1.2.0) without content, as EventBus publishes
/// it, for `revision` of the wiki `wiki_id` at `domain`.
pub fn page_change(
    wiki_id: &str,
    domain: &str,
    kind: &str,
    revision: &WikiRevision,
    dt: &str,
) -> Value {
    json!({
        "$schema": "/mediawiki/page/change/1.2.0",
        "meta": {"stream": "mediawiki.page_change.v1", "domain": domain, "dt": dt,
                 "id": format!("{wiki_id}-{}-{kind}", revision.rev_id)},
        "dt": dt,
        "wiki_id": wiki_id,
        "page_change_kind": kind,
        "changelog_kind": if kind == "delete" { "delete" } else { "update" },
        "page": {"page_id": revision.page_id, "page_title": revision.title.replace(' ', "_"),
                 "namespace_id": 0, "is_redirect": false},
        "revision": {"rev_id": revision.rev_id, "rev_dt": dt, "is_content_visible": true,
                     "content_slots": {"main": {"slot_role": "main",
                                                "content_model": "wikitext"}}}
    })
}
