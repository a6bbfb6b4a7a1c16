//! What a recent change stands for: the page a log event names (from the log when the
//! change names none), the pages log events need as they are now, and the `page_change`
//! events a stream would have sent for each change.

use std::collections::HashMap;

use casement_pipeline::QueryError;
use serde_json::{Value, json};

use super::{Mark, PollSource, Wiki};
use crate::sources::mediawiki::MediawikiConfig;

/// Names the page of each log event whose recent change names none (`pageid` 0: a
/// deletion's, on MediaWiki, since the page is gone) from the log itself, whose
/// `logpage` keeps the id the action was on: one `list=logevents` request per such change,
/// of its title at its second, matched by `logid`. One the log cannot name is left out
/// (and logged): `casement audit --wiki` finds what it leaves behind.
pub(super) async fn name_pages(
    source: &PollSource,
    changes: &mut [(Mark, Value)],
) -> Result<(), QueryError> {
    for (_, change) in changes.iter_mut() {
        if log_of(change).is_none() || change.get("pageid").and_then(Value::as_u64) != Some(0) {
            continue;
        }
        let text = |key: &str| {
            change
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (title, at) = (text("title"), text("timestamp"));
        let logid = change.get("logid").and_then(Value::as_u64);
        let answer = source
            .fetcher
            .query(
                &source.domain,
                &[
                    ("list", "logevents".to_owned()),
                    ("letitle", title.clone()),
                    ("lestart", at.clone()),
                    ("leend", at.clone()),
                    ("leprop", "ids|type|title|timestamp".to_owned()),
                    ("lelimit", "50".to_owned()),
                ],
            )
            .await?;
        let (logtype, logaction) = log_of(change).unwrap_or_default();
        let page = answer
            .pointer("/query/logevents")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|entry| match logid {
                Some(id) => entry.get("logid").and_then(Value::as_u64) == Some(id),
                None => {
                    entry.get("type").and_then(Value::as_str) == Some(logtype)
                        && entry.get("action").and_then(Value::as_str) == Some(logaction)
                }
            })
            .and_then(|entry| entry.get("logpage")?.as_u64())
            .filter(|id| *id > 0);
        match page {
            Some(id) => change["pageid"] = json!(id),
            None => tracing::warn!(
                %title, timestamp = %at, ?logid,
                "a log event names no page and the log does not either: left out \
                 (casement audit --wiki finds what it leaves behind)"
            ),
        }
    }
    Ok(())
}

/// A page as it is now: what a log event needs to name its revision.
#[derive(Debug, Clone)]
pub(super) struct Page {
    last_revision: u64,
    namespace: i64,
    title: String,
    redirect: bool,
    /// The current revision's text is hidden (revision deletion).
    hidden: bool,
}

/// The pages that log events among `changes` name (restored, moved, a revision's
/// visibility changed), as they are now, in one request per 50.
pub(super) async fn lookup(
    source: &PollSource,
    changes: &[(Mark, Value)],
) -> Result<HashMap<u64, Page>, QueryError> {
    let mut wanted: Vec<u64> = changes
        .iter()
        .filter(|(_, change)| {
            matches!(
                log_of(change),
                Some(
                    ("delete", "restore")
                        | ("move" | "protect", _)
                        | ("delete" | "suppress", "revision")
                )
            )
        })
        .filter_map(|(_, change)| change.get("pageid")?.as_u64())
        .filter(|id| *id > 0)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut pages = HashMap::new();
    for ids in wanted.chunks(50) {
        let ids = ids.iter().map(u64::to_string).collect::<Vec<_>>().join("|");
        let answer = source
            .fetcher
            .query(
                &source.domain,
                &[
                    ("prop", "info|revisions".to_owned()),
                    ("rvprop", "ids|sha1".to_owned()),
                    ("pageids", ids),
                ],
            )
            .await?;
        for page in answer
            .pointer("/query/pages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(id), Some(last_revision)) = (
                page.get("pageid").and_then(Value::as_u64),
                page.get("lastrevid").and_then(Value::as_u64),
            ) else {
                continue; // Missing: deleted again since.
            };
            let revision = page.pointer("/revisions/0");
            pages.insert(
                id,
                Page {
                    last_revision,
                    namespace: page.get("ns").and_then(Value::as_i64).unwrap_or(0),
                    title: page
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    redirect: page.get("redirect").and_then(Value::as_bool) == Some(true),
                    hidden: revision
                        .and_then(|r| r.get("sha1hidden"))
                        .and_then(Value::as_bool)
                        == Some(true),
                },
            );
        }
    }
    Ok(pages)
}

fn log_of(change: &Value) -> Option<(&str, &str)> {
    if change.get("type").and_then(Value::as_str) != Some("log") {
        return None;
    }
    Some((
        change.get("logtype")?.as_str()?,
        change.get("logaction")?.as_str()?,
    ))
}

/// The `page_change` events a recent change stands for (none for what changes no text).
pub(super) fn events(
    config: &MediawikiConfig,
    wiki: &Wiki,
    domain: &str,
    change: &Value,
    pages: &HashMap<u64, Page>,
) -> Vec<Value> {
    // No page named (a deletion the log could not name either): nothing to send.
    let Some(page_id) = change
        .get("pageid")
        .and_then(Value::as_u64)
        .filter(|id| *id > 0)
    else {
        return Vec::new();
    };
    let dt = change
        .get("timestamp")
        .and_then(Value::as_str)
        .unwrap_or("");
    let title = change.get("title").and_then(Value::as_str).unwrap_or("");
    let namespace = change.get("ns").and_then(Value::as_i64).unwrap_or(0);
    let redirect = change
        .get("redirect")
        .is_some_and(|r| r.as_bool() != Some(false));
    let event =
        |kind: &str, title: &str, namespace: i64, redirect: bool, revision: Option<Value>| {
            let mut event = json!({
                "$schema": "/mediawiki/page/change/1.2.0",
                "meta": {"stream": "casement.recentchanges", "domain": domain, "dt": dt},
                "dt": dt,
                "wiki_id": wiki.wiki_id,
                "page_change_kind": kind,
                "changelog_kind": if kind == "delete" { "delete" } else { "update" },
                "page": {"page_id": page_id, "page_title": title.replace(' ', "_"),
                         "namespace_id": namespace, "is_redirect": redirect},
            });
            if let Some(revision) = revision {
                event["revision"] = revision;
            }
            event
        };
    let revision = |rev_id: u64, visible: bool| {
        Some(json!({"rev_id": rev_id, "rev_dt": dt, "is_content_visible": visible}))
    };
    match change.get("type").and_then(Value::as_str) {
        Some(kind @ ("edit" | "new")) => {
            let Some(rev_id) = change.get("revid").and_then(Value::as_u64) else {
                return Vec::new();
            };
            let kind = if kind == "new" { "create" } else { "edit" };
            vec![event(
                kind,
                title,
                namespace,
                redirect,
                revision(rev_id, true),
            )]
        }
        Some("log") => match log_of(change) {
            Some(("delete", "delete" | "delete_redir" | "delete_redir2")) => {
                vec![event("delete", title, namespace, false, None)]
            }
            Some(("delete", "restore")) => pages.get(&page_id).map_or_else(Vec::new, |page| {
                vec![event(
                    "undelete",
                    &page.title,
                    page.namespace,
                    page.redirect,
                    revision(page.last_revision, true),
                )]
            }),
            Some(("move", _)) => {
                let Some(page) = pages.get(&page_id) else {
                    return Vec::new();
                };
                let moved = event(
                    "move",
                    &page.title,
                    page.namespace,
                    page.redirect,
                    revision(page.last_revision, true),
                );
                // Out of the namespaces indexed: the document goes (a move in, or
                // within, fetches the page under its new title).
                if !config.wants(&moved)
                    && config.wants(&event("move", title, namespace, false, None))
                {
                    vec![event("delete", &page.title, page.namespace, false, None)]
                } else {
                    vec![moved]
                }
            }
            // Protection changes no text, but adds a null revision: indexed as an edit, so
            // that the index stays at the page's revision (nothing is embedded).
            Some(("protect", _)) => pages.get(&page_id).map_or_else(Vec::new, |page| {
                vec![event(
                    "edit",
                    &page.title,
                    page.namespace,
                    page.redirect,
                    revision(page.last_revision, true),
                )]
            }),
            Some(("delete" | "suppress", "revision")) => {
                pages.get(&page_id).map_or_else(Vec::new, |page| {
                    vec![event(
                        "visibility_change",
                        &page.title,
                        page.namespace,
                        page.redirect,
                        revision(page.last_revision, !page.hidden),
                    )]
                })
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MediawikiConfig {
        MediawikiConfig {
            api_url: "http://wiki.test/w/api.php".into(),
            ..MediawikiConfig::default()
        }
    }

    #[test]
    fn recent_changes_become_page_change_events() {
        let wiki = Wiki {
            wiki_id: "acmewiki".into(),
        };
        let pages = HashMap::from([(
            7,
            Page {
                last_revision: 90,
                namespace: 4,
                title: "Project:Leave policy".into(),
                redirect: false,
                hidden: false,
            },
        )]);
        let events = |change: Value| events(&config(), &wiki, "wiki.test", &change, &pages);
        let edit = events(json!({"type": "edit", "pageid": 7, "revid": 88, "ns": 0,
            "title": "Leave policy", "timestamp": "2026-11-29T03:58:15Z", "rcid": 5}));
        assert_eq!(edit[0]["page_change_kind"], "edit");
        assert_eq!(edit[0]["revision"]["rev_id"], 88);
        assert_eq!(edit[0]["wiki_id"], "acmewiki");
        assert_eq!(edit[0]["page"]["page_title"], "Leave_policy");
        let delete = events(
            json!({"type": "log", "logtype": "delete", "logaction": "delete",
            "pageid": 7, "ns": 0, "title": "Leave policy", "timestamp": "2026-11-29T03:58:15Z"}),
        );
        assert_eq!(delete[0]["page_change_kind"], "delete");
        assert!(delete[0].get("revision").is_none());
        // A move from the articles to the project namespace, which is not indexed: a delete.
        let moved = events(
            json!({"type": "log", "logtype": "move", "logaction": "move",
            "pageid": 7, "ns": 0, "title": "Leave policy", "timestamp": "2026-11-29T03:58:15Z"}),
        );
        assert_eq!(moved[0]["page_change_kind"], "delete");
        let restored = events(
            json!({"type": "log", "logtype": "delete", "logaction": "restore",
            "pageid": 7, "ns": 0, "title": "Leave policy", "timestamp": "2026-11-29T03:58:15Z"}),
        );
        assert_eq!(restored[0]["page_change_kind"], "undelete");
        assert_eq!(restored[0]["revision"]["rev_id"], 90);
        let protected = events(
            json!({"type": "log", "logtype": "protect", "logaction": "protect",
            "pageid": 7, "ns": 0, "title": "Leave policy", "timestamp": "2026-11-29T03:58:15Z"}),
        );
        assert_eq!(protected[0]["page_change_kind"], "edit");
        assert_eq!(protected[0]["revision"]["rev_id"], 90);
        let uploaded = events(
            json!({"type": "log", "logtype": "upload", "logaction": "upload",
            "pageid": 7, "ns": 6, "title": "File:X.png", "timestamp": "2026-11-29T03:58:15Z"}),
        );
        assert!(uploaded.is_empty());
        // A deletion whose page neither the change nor the log names: nothing is sent
        // (a delete of page 0 would delete nothing and hide the miss).
        let unnamed = events(
            json!({"type": "log", "logtype": "delete", "logaction": "delete",
            "pageid": 0, "ns": 0, "title": "Leave policy", "timestamp": "2026-11-29T03:58:15Z"}),
        );
        assert!(unnamed.is_empty());
    }
}
