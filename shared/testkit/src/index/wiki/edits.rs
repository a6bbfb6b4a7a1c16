//! The stand-in wiki edited as its users would: saves, deletions, restores, moves and
//! protections, each recorded in its recent changes (and its log) as MediaWiki records
//! them, and the clock and retention those changes are kept by.

use serde_json::{Value, json};

use super::WikiRevision;
use super::api::WikiStandIn;

impl WikiStandIn {
    /// Saves `content` as a new revision of page `page_id` (created when new) under
    /// `title` in `namespace`, as an edit or a creation in the recent changes.
    pub fn edit(&self, page_id: u64, namespace: i64, title: &str, content: &str) -> WikiRevision {
        self.with(|wiki| {
            let next = wiki.revisions.keys().max().copied().unwrap_or(999) + 1;
            let old = wiki.last_revision(page_id);
            let new = !wiki.titles.contains_key(&page_id);
            wiki.revisions.insert(next, (page_id, content.to_owned()));
            wiki.titles.insert(page_id, title.to_owned());
            wiki.namespaces.insert(page_id, namespace);
            let (kind, change) = if new {
                ("create", "new")
            } else {
                ("edit", "edit")
            };
            wiki.record(json!({"type": change, "ns": namespace, "title": title,
                "pageid": page_id, "revid": next, "old_revid": old.unwrap_or(0),
                "oldlen": 0, "newlen": content.len()}));
            WikiRevision {
                page_id,
                rev_id: next,
                title: title.to_owned(),
                content: content.to_owned(),
                kind,
            }
        })
    }

    /// Records a log entry for the page; with `null_revision`, first saves a revision of
    /// the same text (as MediaWiki does for a move or a protection), named by the entry's
    /// `revid`.
    fn log(
        &self,
        page_id: u64,
        logtype: &str,
        logaction: &str,
        extra: Value,
        null_revision: bool,
    ) -> Option<WikiRevision> {
        self.with(|wiki| {
            let title = wiki.titles.get(&page_id).cloned().unwrap_or_default();
            let namespace = wiki.namespaces.get(&page_id).copied().unwrap_or(0);
            let saved = null_revision
                .then(|| {
                    let last = wiki.last_revision(page_id)?;
                    let content = wiki.revisions.get(&last)?.1.clone();
                    let next = wiki.revisions.keys().max().copied().unwrap_or(999) + 1;
                    wiki.revisions.insert(next, (page_id, content.clone()));
                    Some((next, content))
                })
                .flatten();
            let logid = wiki.logs.len() as u64 + 1;
            // A deletion's recent change names no page (`pageid` 0, as MediaWiki's do:
            // the page is gone); the log keeps its id (`logpage`).
            let listed = if logtype == "delete" && logaction == "delete" {
                0
            } else {
                page_id
            };
            let mut change = json!({"type": "log", "ns": namespace, "title": title,
                "pageid": listed, "revid": saved.as_ref().map_or(0, |(rev, _)| *rev),
                "old_revid": 0, "logid": logid, "logtype": logtype, "logaction": logaction,
                "logparams": {}});
            if let (Some(change), Value::Object(extra)) = (change.as_object_mut(), extra) {
                change.extend(extra);
            }
            let rcid = wiki.record(change);
            let timestamp = wiki
                .changes
                .iter()
                .rev()
                .find(|c| c.get("rcid").and_then(Value::as_u64) == Some(rcid))
                .and_then(|c| c.get("timestamp").cloned())
                .unwrap_or(Value::Null);
            wiki.logs
                .push(json!({"logid": logid, "ns": namespace, "title": title,
                "pageid": listed, "logpage": page_id,
                "type": logtype, "action": logaction, "timestamp": timestamp}));
            saved.map(|(rev_id, content)| WikiRevision {
                page_id,
                rev_id,
                title,
                content,
                kind: "edit",
            })
        })
    }

    /// Deletes a page, with its delete log entry.
    pub fn delete(&self, page_id: u64) {
        self.log(page_id, "delete", "delete", json!({}), false);
        self.delete_page(page_id);
    }

    /// Restores a deleted page with its revisions, with its log entry.
    pub fn restore(&self, page_id: u64) {
        self.undelete_page(page_id);
        self.log(page_id, "delete", "restore", json!({}), false);
    }

    /// Moves a page to `title` in `namespace`, with its log entry (which names the old
    /// title and the new one) and its null revision, returned (under the new title).
    pub fn rename(&self, page_id: u64, namespace: i64, title: &str) -> WikiRevision {
        let null = self
            .log(
                page_id,
                "move",
                "move",
                json!({"logparams": {"target_ns": namespace, "target_title": title}}),
                true,
            )
            .expect("a page to move");
        self.with(|wiki| {
            wiki.titles.insert(page_id, title.to_owned());
            wiki.namespaces.insert(page_id, namespace);
        });
        WikiRevision {
            title: title.to_owned(),
            ..null
        }
    }

    /// Protects a page: a log entry and a null revision (returned); the text is the same.
    pub fn protect(&self, page_id: u64) -> WikiRevision {
        self.log(
            page_id,
            "protect",
            "protect",
            json!({"logparams": {"description": "[edit=sysop] (indefinite)"}}),
            true,
        )
        .expect("a page to protect")
    }

    /// Forgets the recent changes up to and including `rcid`, as `$wgRCMaxAge` does.
    pub fn forget_changes_through(&self, rcid: u64) {
        self.with(|wiki| wiki.horizon = rcid + 1);
    }

    /// The newest change's rcid.
    pub fn last_rcid(&self) -> u64 {
        self.with(|wiki| wiki.next_rcid)
    }

    /// Stops the clock at `seconds` since the epoch (`None`: the real clock again), so
    /// that changes share a second.
    pub fn freeze_clock(&self, seconds: Option<i64>) {
        self.with(|wiki| wiki.clock = seconds);
    }

    /// The wiki's clock now, in seconds since the epoch.
    pub fn now(&self) -> i64 {
        self.with(|wiki| wiki.now())
    }
}
