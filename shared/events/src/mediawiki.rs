//! MediaWiki `mediawiki.page_change` (schema 1.x): `create`, `edit`, `move` and `undelete`
//! upsert the page from `revision.content_slots.main.content_body` (an event without it is
//! rejected: the stream must be configured to carry content); `delete` deletes it;
//! `visibility_change` is not an edit of the text and is rejected as unsupported.
//!
//! The document id is `<wiki_id>:<page_id>` (stable across moves); the revision is
//! `revision.rev_id`.

use casement_text::{Format, Revision};
use serde_json::Value;

use crate::{Change, Event, EventFormat, Rejection, reject};

fn text<'a>(json: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(json, |v, key| v.get(key))?.as_str()
}

fn number(json: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(json, |v, key| v.get(key))?.as_u64()
}

pub(crate) fn decode(json: Value) -> Result<Event, Rejection> {
    let kind = text(&json, &["page_change_kind"])
        .ok_or_else(|| reject("schema", "not a page_change event (no page_change_kind)"))?;
    let wiki = text(&json, &["wiki_id"]).ok_or_else(|| reject("schema", "no wiki_id"))?;
    let page_id =
        number(&json, &["page", "page_id"]).ok_or_else(|| reject("schema", "no page.page_id"))?;
    let rev_id = number(&json, &["revision", "rev_id"])
        .ok_or_else(|| reject("schema", "no revision.rev_id"))?;
    let doc_id = format!("{wiki}:{page_id}");
    let change = match kind {
        "create" | "edit" | "move" | "undelete" => {
            let content = text(
                &json,
                &["revision", "content_slots", "main", "content_body"],
            )
            .ok_or_else(|| {
                reject(
                    "no_content",
                    format!(
                        "page_change {kind} of {doc_id} rev {rev_id} has no \
                             revision.content_slots.main.content_body"
                    ),
                )
            })?;
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
            Change::Upsert(Revision {
                metadata: Default::default(),
                doc_id,
                revision: rev_id,
                title: text(&json, &["page", "page_title"]).map(|t| t.replace('_', " ")),
                url: text(&json, &["meta", "uri"]).map(str::to_owned),
                tenant: None,
                format,
                content: content.to_owned(),
            })
        }
        "delete" => Change::Delete {
            doc_id,
            tenant: None,
            revision: Some(rev_id),
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
