//! The source of truth an audit compares the index with: a revision log or a listing.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use casement_events::Event;
use casement_events::revision_log::{self, LogEvent};
use serde::Deserialize;

use super::{AuditError, DocKey};

/// What the source says of one document.
#[derive(Debug, Clone)]
pub enum Expected {
    /// It exists at `revision`; `event` carries the content when the source has it.
    Present {
        revision: u64,
        event: Option<Box<Event>>,
    },
    /// It was deleted at `revision`.
    Deleted { revision: u64 },
}

impl Expected {
    pub fn revision(&self) -> u64 {
        match self {
            Self::Present { revision, .. } | Self::Deleted { revision } => *revision,
        }
    }
}

/// The source of truth: every document it knows of.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    pub documents: BTreeMap<DocKey, Expected>,
    /// What it was read from, for the report ("revision log X: N events").
    pub description: String,
    /// The documents it speaks for, by doc id prefix (a wiki's `<wiki_id>:`): the index's
    /// other documents (other sources') are neither listed nor left behind. `None`: all.
    pub scope: Option<String>,
}

/// One line of a listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListingLine {
    doc_id: String,
    revision: u64,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    deleted: bool,
}

impl Truth {
    /// Reads a revision log (its lines have `change`) or a listing, told apart by the first
    /// line.
    pub fn read(path: &Path) -> Result<Self, AuditError> {
        let fail = |message: String| AuditError::Source {
            path: path.to_owned(),
            message,
        };
        if path.is_dir() {
            return Err(fail(
                "is a directory; give a revision log (.jsonl, .jsonl.gz) or a listing of \
                 {doc_id, revision} lines"
                    .to_owned(),
            ));
        }
        let mut first = String::new();
        {
            let mut reader = revision_log::open(path).map_err(|e| fail(e.to_string()))?;
            while first.trim().is_empty() {
                first.clear();
                if reader
                    .read_line(&mut first)
                    .map_err(|e| fail(e.to_string()))?
                    == 0
                {
                    break;
                }
            }
        }
        let is_log = serde_json::from_str::<serde_json::Value>(&first)
            .ok()
            .is_some_and(|line| line.get("change").is_some());
        let name = path.display().to_string();
        if is_log {
            let (events, rejected) = revision_log::read(path).map_err(|e| fail(e.to_string()))?;
            Ok(Self::from_log(&events, rejected.len(), &name))
        } else {
            let reader = revision_log::open(path).map_err(|e| fail(e.to_string()))?;
            Self::from_listing(reader, &name).map_err(fail)
        }
    }

    /// What replaying the log leaves, by the pipeline's own rules: per document, the
    /// event with the highest revision wins, a delete over an upsert at the same revision
    /// (a tombstone fences its own revision), a later upsert over an earlier one at the same
    /// revision (planned again). Events the pipeline would reject (`rejected_lines` that
    /// are not events at all, events that do not decode) never reach the index: they are
    /// left out here too, and counted in the description.
    pub fn from_log(events: &[LogEvent], rejected_lines: usize, name: &str) -> Self {
        let mut winners: BTreeMap<DocKey, (u64, bool, Event)> = BTreeMap::new();
        let mut undecodable = 0;
        for event in events {
            let Ok(decoded) = event.to_event() else {
                undecodable += 1;
                continue;
            };
            let key = DocKey {
                tenant: None,
                doc_id: event.doc_id.clone(),
            };
            let delete = event.is_delete();
            let wins = match winners.get(&key) {
                None => true,
                Some((revision, was_delete, _)) => {
                    event.revision > *revision
                        || (event.revision == *revision && (delete || !was_delete))
                }
            };
            if wins {
                winners.insert(key, (event.revision, delete, decoded));
            }
        }
        let documents: BTreeMap<DocKey, Expected> = winners
            .into_iter()
            .map(|(key, (revision, delete, event))| {
                let expected = if delete {
                    Expected::Deleted { revision }
                } else {
                    Expected::Present {
                        revision,
                        event: Some(Box::new(event)),
                    }
                };
                (key, expected)
            })
            .collect();
        let left_out = rejected_lines + undecodable;
        Self {
            description: format!(
                "revision log {name} ({} events, {} documents{})",
                events.len(),
                documents.len(),
                if left_out > 0 {
                    format!("; {left_out} lines the pipeline would reject, left out")
                } else {
                    String::new()
                }
            ),
            documents,
            scope: None,
        }
    }

    /// `{doc_id, revision, tenant?, deleted?}` per line; a document listed twice keeps its
    /// last line. Any line that cannot be read fails the whole listing: an audit that
    /// skipped it would report the document as absent, and a fix would delete it.
    pub fn from_listing(reader: impl BufRead, name: &str) -> Result<Self, String> {
        let mut documents = BTreeMap::new();
        for (index, line) in reader.lines().enumerate() {
            let line = line.map_err(|e| e.to_string())?;
            if line.trim().is_empty() {
                continue;
            }
            let entry: ListingLine = serde_json::from_str(&line).map_err(|e| {
                format!(
                    "line {}: {e} (a listing line is {{\"doc_id\": ..., \"revision\": ..., \
                     \"tenant\"?: ..., \"deleted\"?: bool}}; a revision log's lines have \"change\")",
                    index + 1
                )
            })?;
            // The same limits as an event's: a line the pipeline could never index would make
            // an audit report the index wrong (and a fix write what it cannot hold).
            let limits = if entry.doc_id.is_empty() {
                Some("doc_id is empty".to_owned())
            } else if entry.doc_id.len() > casement_events::MAX_ID_BYTES {
                Some(format!(
                    "doc_id is over {} bytes",
                    casement_events::MAX_ID_BYTES
                ))
            } else if entry.revision > casement_events::MAX_REVISION {
                Some(format!("revision {} is over 2^63 - 1", entry.revision))
            } else if entry.doc_id.chars().any(char::is_control)
                || entry
                    .tenant
                    .as_deref()
                    .is_some_and(|t| t.chars().any(char::is_control))
            {
                Some("doc_id or tenant holds a control character".to_owned())
            } else {
                None
            };
            if let Some(problem) = limits {
                return Err(format!("line {}: {problem}", index + 1));
            }
            let expected = if entry.deleted {
                Expected::Deleted {
                    revision: entry.revision,
                }
            } else {
                Expected::Present {
                    revision: entry.revision,
                    event: None,
                }
            };
            let key = DocKey {
                tenant: entry.tenant.filter(|t| !t.is_empty()),
                doc_id: entry.doc_id,
            };
            documents.insert(key, expected);
        }
        Ok(Self {
            description: format!("listing {name} ({} documents)", documents.len()),
            documents,
            scope: None,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn key(tenant: Option<&str>, doc_id: &str) -> DocKey {
        DocKey {
            tenant: tenant.map(str::to_owned),
            doc_id: doc_id.to_owned(),
        }
    }

    /// A listing line no event could carry (an empty id, a revision the store cannot hold)
    /// fails the listing, naming the line.
    #[test]
    fn a_listing_line_past_the_event_limits_is_refused() {
        for (line, problem) in [
            ("{\"doc_id\": \"\", \"revision\": 3}", "doc_id is empty"),
            (
                "{\"doc_id\": \"a\", \"revision\": 9223372036854775808}",
                "over 2^63 - 1",
            ),
            (
                "{\"doc_id\": \"a\\nb\", \"revision\": 1}",
                "control character",
            ),
        ] {
            let listing = format!("{{\"doc_id\": \"ok\", \"revision\": 1}}\n{line}\n");
            let error = Truth::from_listing(listing.as_bytes(), "l").unwrap_err();
            assert!(
                error.starts_with("line 2: ") && error.contains(problem),
                "{error}"
            );
        }
    }

    #[test]
    fn a_listing_reads_tenants_and_deletions_and_stops_at_a_bad_line() {
        let listing = "{\"doc_id\": \"a\", \"revision\": 3}\n\n\
                       {\"doc_id\": \"b\", \"revision\": 7, \"tenant\": \"acme\", \"deleted\": true}\n";
        let truth = Truth::from_listing(listing.as_bytes(), "l.jsonl").unwrap();
        assert_eq!(truth.description, "listing l.jsonl (2 documents)");
        assert!(matches!(
            truth.documents[&key(None, "a")],
            Expected::Present {
                revision: 3,
                event: None
            }
        ));
        assert!(matches!(
            truth.documents[&key(Some("acme"), "b")],
            Expected::Deleted { revision: 7 }
        ));
        let error = Truth::from_listing(
            "{\"doc_id\": \"a\", \"revision\": 3}\n{\"doc_id\": \"b\"}\n".as_bytes(),
            "l",
        )
        .unwrap_err();
        assert!(
            error.starts_with("line 2: missing field `revision`"),
            "{error}"
        );
    }

    #[test]
    fn a_log_folds_by_the_fence_rules() {
        let event = |doc: &str, revision: u64, change: &str, content: &str| LogEvent {
            access: None,
            doc_id: doc.into(),
            revision,
            title: None,
            format: "markdown".into(),
            content: content.into(),
            change: change.into(),
            path: None,
            seq: None,
            timestamp: None,
        };
        let events = [
            // Out of order: revision 3 stays.
            event("a", 3, "update", "# A\n\nThree.\n"),
            event("a", 2, "update", "# A\n\nTwo.\n"),
            // A delete and an upsert at one revision: deleted.
            event("b", 4, "delete", ""),
            event("b", 4, "update", "# B\n\nBack?\n"),
            // An upsert again at its revision: the later content.
            event("c", 1, "update", "# C\n\nFirst.\n"),
            event("c", 1, "update", "# C\n\nSecond.\n"),
            // Not decodable (unknown format): left out, the earlier revision stays.
            event("d", 1, "update", "# D\n\nOne.\n"),
            LogEvent {
                format: "docx".into(),
                ..event("d", 2, "update", "binary")
            },
        ];
        let truth = Truth::from_log(&events, 1, "x.jsonl");
        let content = |doc: &str| match &truth.documents[&key(None, doc)] {
            Expected::Present {
                revision,
                event: Some(event),
            } => match &event.change {
                casement_events::Change::Upsert(r) => (*revision, r.content.clone()),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        assert_eq!(content("a"), (3, "# A\n\nThree.\n".to_owned()));
        assert!(matches!(
            truth.documents[&key(None, "b")],
            Expected::Deleted { revision: 4 }
        ));
        assert_eq!(content("c"), (1, "# C\n\nSecond.\n".to_owned()));
        assert_eq!(content("d"), (1, "# D\n\nOne.\n".to_owned()));
        assert_eq!(
            truth.description,
            "revision log x.jsonl (8 events, 4 documents; 2 lines the pipeline would reject, left out)"
        );
    }
}
