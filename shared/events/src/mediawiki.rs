//! MediaWiki `mediawiki.page_change` (schema 1.x), as EventBus publishes it to Kafka and
//! EventStreams serves it:
//! - `create`, `edit`, `move` and `undelete` upsert the page: from
//!   `revision.content_slots.main.content_body` when the event carries it, otherwise as a
//!   revision to fetch from the wiki ([`Change::Fetch`], once the fence lets it through);
//!   an undelete may bring back the document deleted at its revision (`Change::Restore`,
//!   or a restoring fetch);
//! - `delete` deletes it (at `revision.rev_id`, or without one at the revision indexed);
//!   so does an edit that turns the page into a redirect (a redirect
//!   has nothing to answer with);
//! - `visibility_change` (emitted for a page's current revision) deletes the document
//!   when the revision's content is hidden or suppressed, and fetches it again when it is
//!   visible again.
//!
//! The document id is `<wiki_id>:<page_id>` (stable across moves); the revision is
//! `revision.rev_id`.

use casement_text::{Format, Revision};
use serde_json::Value;

use crate::{AccessConfig, Change, Event, EventFormat, Rejection, RevisionRef, reject};

fn text<'a>(json: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(json, |v, key| v.get(key))?.as_str()
}

fn number(json: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(json, |v, key| v.get(key))?.as_u64()
}

fn flag(json: &Value, path: &[&str]) -> Option<bool> {
    path.iter().try_fold(json, |v, key| v.get(key))?.as_bool()
}

pub(crate) fn decode(json: Value, access: &AccessConfig) -> Result<Event, Rejection> {
    let kind = text(&json, &["page_change_kind"])
        .ok_or_else(|| reject("schema", "not a page_change event (no page_change_kind)"))?;
    let wiki = text(&json, &["wiki_id"]).ok_or_else(|| reject("schema", "no wiki_id"))?;
    let page_id =
        number(&json, &["page", "page_id"]).ok_or_else(|| reject("schema", "no page.page_id"))?;
    // A delete may leave the revision out (a polled wiki's delete log names none): it
    // applies at the revision indexed.
    let deleting = kind == "delete";
    let rev_id = match number(&json, &["revision", "rev_id"]) {
        Some(rev_id) => rev_id,
        None if deleting => 0,
        None => return Err(reject("schema", "no revision.rev_id")),
    };
    let doc_id = format!("{wiki}:{page_id}");
    // A namespace restricted to groups (`[access.mediawiki_namespaces]`): a move into
    // or out of one changes the page's access with the move's own event.
    let access = json
        .get("page")
        .and_then(|p| p.get("namespace_id"))
        .and_then(Value::as_i64)
        .and_then(|namespace| access.namespace(namespace));
    let delete = || Change::Delete {
        doc_id: doc_id.clone(),
        tenant: None,
        revision: (rev_id > 0).then_some(rev_id),
    };
    let fetch = |restore: bool| {
        Change::Fetch(RevisionRef {
            doc_id: doc_id.clone(),
            tenant: None,
            revision: rev_id,
            domain: text(&json, &["meta", "domain"]).unwrap_or(wiki).to_owned(),
            title: text(&json, &["page", "page_title"]).map(str::to_owned),
            url: text(&json, &["meta", "uri"]).map(str::to_owned),
            access: access.clone(),
            restore,
        })
    };
    let redirect = flag(&json, &["page", "is_redirect"]) == Some(true);
    let change = match kind {
        "create" | "edit" | "move" | "undelete" if redirect => delete(),
        "create" | "edit" | "move" | "undelete" => {
            let Some(content) = text(
                &json,
                &["revision", "content_slots", "main", "content_body"],
            ) else {
                return Ok(Event {
                    change: fetch(kind == "undelete"),
                    format: EventFormat::Mediawiki,
                });
            };
            let model = text(
                &json,
                &["revision", "content_slots", "main", "content_model"],
            );
            let format = match model {
                None | Some("wikitext") => Format::Wikitext,
                Some("text") => Format::Text,
                Some(other) => {
                    return Err(reject(
                        "unsupported",
                        format!("content model {other:?} (wikitext and text are indexed)"),
                    ));
                }
            };
            let revision = Revision {
                access: access.clone(),
                metadata: Default::default(),
                doc_id,
                revision: rev_id,
                title: text(&json, &["page", "page_title"]).map(|t| t.replace('_', " ")),
                url: text(&json, &["meta", "uri"]).map(str::to_owned),
                tenant: None,
                format,
                content: content.to_owned(),
                revision_url: None,
            };
            if kind == "undelete" {
                Change::Restore(revision)
            } else {
                Change::Upsert(revision)
            }
        }
        "delete" => delete(),
        "visibility_change" => match flag(&json, &["revision", "is_content_visible"]) {
            Some(false) => delete(),
            _ if redirect => delete(),
            _ => fetch(true),
        },
        other => {
            return Err(reject(
                "unsupported",
                format!("page_change_kind {other:?} does not change the text"),
            ));
        }
    };
    Ok(Event {
        change,
        format: EventFormat::Mediawiki,
    })
}
