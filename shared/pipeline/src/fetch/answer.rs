//! Reading the Action API's answer (`formatversion=2`): each revision's content, or why
//! the wiki will not give it.

use std::collections::HashMap;

use casement_text::{Format, Revision};
use serde_json::Value;

use super::{FetchError, Fetched};

/// The revisions an Action API answer (`formatversion=2`) accounts for: fetched, or gone
/// with why. Revisions it does not mention are left out (asked again).
pub(super) fn parse_revisions(json: &Value) -> HashMap<u64, Result<Fetched, FetchError>> {
    let mut answered = HashMap::new();
    let query = json.get("query").unwrap_or(&Value::Null);
    if let Some(bad) = query.get("badrevids").and_then(Value::as_object) {
        for (id, _) in bad {
            if let Ok(revision) = id.parse::<u64>() {
                answered.insert(
                    revision,
                    Err(FetchError::Gone(format!(
                        "the wiki has no revision {revision} (deleted with its page, or never existed)"
                    ))),
                );
            }
        }
    }
    let pages = array(query, "pages");
    for page in pages {
        let title = page.get("title").and_then(Value::as_str).unwrap_or("");
        let url = page
            .get("fullurl")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let script = page
            .get("editurl")
            .and_then(Value::as_str)
            .and_then(|edit| edit.split_once('?'))
            .map(|(script, _)| script.to_owned());
        let revisions = array(page, "revisions");
        for revision in revisions {
            let Some(id) = revision.get("revid").and_then(Value::as_u64) else {
                continue;
            };
            let page = Page {
                title,
                url: url.clone(),
                revision_url: script.as_ref().map(|script| format!("{script}?oldid={id}")),
            };
            answered.insert(id, revision_content(revision, id, page));
        }
    }
    answered
}

/// What names a fetched revision: its page's title and url, its own url.
struct Page<'a> {
    title: &'a str,
    url: Option<String>,
    revision_url: Option<String>,
}

fn revision_content(revision: &Value, id: u64, page: Page<'_>) -> Result<Fetched, FetchError> {
    let title = page.title;
    let main = revision
        .get("slots")
        .and_then(|slots| slots.get("main"))
        .unwrap_or(&Value::Null);
    let hidden = |key: &str| {
        revision.get(key).and_then(Value::as_bool) == Some(true)
            || main.get(key).and_then(Value::as_bool) == Some(true)
    };
    if hidden("suppressed") {
        return Err(FetchError::Gone(format!(
            "the content of revision {id} of {title:?} is suppressed"
        )));
    }
    if hidden("texthidden") {
        return Err(FetchError::Gone(format!(
            "the content of revision {id} of {title:?} is hidden (revision deleted)"
        )));
    }
    if hidden("textmissing") {
        return Err(FetchError::Gone(format!(
            "the content of revision {id} of {title:?} is missing on the wiki"
        )));
    }
    let Some(content) = main.get("content").and_then(Value::as_str) else {
        return Err(FetchError::Gone(format!(
            "the wiki gave no content for revision {id} of {title:?}"
        )));
    };
    let format = match main.get("contentmodel").and_then(Value::as_str) {
        None | Some("wikitext") => Format::Wikitext,
        Some("text") => Format::Text,
        Some(other) => {
            return Err(FetchError::Unsupported(format!(
                "revision {id} of {title:?} is {other} (wikitext and text are indexed)"
            )));
        }
    };
    Ok(Fetched {
        content: content.to_owned(),
        format,
        title: title.to_owned(),
        url: page.url,
        revision_url: page.revision_url,
    })
}

/// The revision a fetch gives: the event's document at its revision, named as the wiki
/// names the page now.
pub fn revision_of(reference: &casement_events::RevisionRef, fetched: Fetched) -> Revision {
    Revision {
        access: reference.access.clone(),
        metadata: Default::default(),
        doc_id: reference.doc_id.clone(),
        revision: reference.revision,
        title: Some(fetched.title)
            .filter(|t| !t.is_empty())
            .or_else(|| reference.title.as_ref().map(|t| t.replace('_', " "))),
        url: fetched.url.or_else(|| reference.url.clone()),
        tenant: reference.tenant.clone(),
        format: fetched.format,
        content: fetched.content,
        revision_url: fetched.revision_url,
    }
}

/// The array under `key` (none when absent or not an array).
fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The shapes of the Action API's answer (formatversion 2): content, a hidden and a
    /// suppressed revision, a missing one, another content model.
    #[test]
    fn an_answer_gives_content_or_says_why_not() {
        let answer = json!({
            "batchcomplete": true,
            "query": {
                "badrevids": {"99": {"revid": 99, "missing": true}},
                "pages": [
                    {"pageid": 7, "ns": 0, "title": "Travel policy",
                     "fullurl": "https://wiki.example/wiki/Travel_policy",
                     "editurl": "https://wiki.example/w/index.php?title=Travel_policy&action=edit",
                     "revisions": [
                        {"revid": 11, "parentid": 10, "slots": {"main": {
                            "contentmodel": "wikitext", "contentformat": "text/x-wiki",
                            "content": "Trips need approval."}}},
                        {"revid": 10, "parentid": 9, "slots": {"main": {
                            "texthidden": true}}},
                        {"revid": 9, "parentid": 0, "suppressed": true, "slots": {"main": {
                            "texthidden": true}}}
                     ]},
                    {"pageid": 8, "ns": 8, "title": "MediaWiki:Common.js",
                     "revisions": [{"revid": 12, "slots": {"main": {
                        "contentmodel": "javascript", "content": "x()"}}}]}
                ]
            }
        });
        let answered = parse_revisions(&answer);
        assert_eq!(
            answered[&11],
            Ok(Fetched {
                content: "Trips need approval.".into(),
                format: Format::Wikitext,
                title: "Travel policy".into(),
                url: Some("https://wiki.example/wiki/Travel_policy".into()),
                revision_url: Some("https://wiki.example/w/index.php?oldid=11".into()),
            })
        );
        assert!(matches!(&answered[&10], Err(FetchError::Gone(why)) if why.contains("hidden")));
        assert!(matches!(&answered[&9], Err(FetchError::Gone(why)) if why.contains("suppressed")));
        assert!(
            matches!(&answered[&99], Err(FetchError::Gone(why)) if why.contains("no revision 99"))
        );
        assert!(
            matches!(&answered[&12], Err(FetchError::Unsupported(why)) if why.contains("javascript"))
        );
        assert_eq!(answered.len(), 5);
    }
}
