//! Reconcile the index with a source of truth ([`Truth`]: a revision log, or a listing a
//! CMS can produce): which documents are missing, behind, ahead, left behind (the source
//! deleted them or does not list them), or indexed at the right revision with points that
//! are not what that revision makes (the differ's plan for it is not empty).
//!
//! [`audit`] only reads. [`Report::fixes`] turns the findings into the events that repair
//! them, for the caller to send through the pipeline like any other (fenced,
//! dead-lettered, counted); [`Report::check_deletions`] is the guard against a truncated
//! source emptying the index.

mod classify;
mod config;
mod metrics;
mod truth;

pub use classify::audit;
pub use config::AuditConfig;
pub use metrics::{AuditMetrics, FixOutcome, RunOutcome};
pub use truth::{Expected, Truth};

use std::path::PathBuf;

use casement_events::{Change, Event};
use serde::Serialize;

use crate::processor::ProcessError;

/// A document: its id within its tenant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct DocKey {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub doc_id: String,
}

impl std::fmt::Display for DocKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tenant {
            Some(tenant) => write!(f, "{tenant}/{}", self.doc_id),
            None => f.write_str(&self.doc_id),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{path}: {message}")]
    Source { path: PathBuf, message: String },
    #[error("{0}")]
    Process(#[from] ProcessError),
    #[error("store: {0}")]
    Store(#[from] casement_store::Error),
    /// The fix would delete more of the index than the configured share.
    #[error(
        "refusing to fix: it would delete {deletions} of the index's {indexed} documents \
         ({:.1}%, over audit.max_delete_share = {:.1}%); a truncated listing or the wrong \
         source would empty the index. Check the source, or run again with --force",
        share * 100.0,
        max_share * 100.0
    )]
    MassDeletion {
        deletions: usize,
        indexed: usize,
        share: f64,
        max_share: f64,
    },
}

/// What is wrong with one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The source has it; the index has no live state for it (nothing, a tombstone older
    /// than the source's revision, or sentence points without a state).
    Missing,
    /// Indexed at an older revision than the source's.
    Behind,
    /// Indexed (or deleted) at a newer revision than the source's: the source is behind,
    /// or wrong. Reported, never "fixed" backwards.
    Ahead,
    /// In the index, and deleted in the source or not listed by it.
    Orphaned,
    /// At the source's revision, but its points are not what that revision makes.
    Mismatched,
}

impl Kind {
    pub const ALL: [Self; 5] = [
        Self::Missing,
        Self::Behind,
        Self::Ahead,
        Self::Orphaned,
        Self::Mismatched,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Behind => "behind",
            Self::Ahead => "ahead",
            Self::Orphaned => "orphaned",
            Self::Mismatched => "mismatched",
        }
    }
}

/// The event that repairs a finding.
#[derive(Debug, Clone)]
struct Fix {
    event: Event,
    /// A delete of a document the source does not list (rather than one it deleted).
    unlisted: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: Kind,
    #[serde(flatten)]
    pub doc: DocKey,
    /// The live revision in the index, if any.
    pub indexed_revision: Option<u64>,
    /// The source's revision (of the document or of its deletion), if it lists it.
    pub source_revision: Option<u64>,
    /// Sentence points the index holds for it.
    pub points: u64,
    /// In words: what differs, and why there is no repair when there is none.
    pub detail: String,
    #[serde(skip)]
    fix: Option<Fix>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub source: String,
    pub source_documents: usize,
    /// Live documents in the index.
    pub indexed_documents: usize,
    pub indexed_points: u64,
    /// Documents at the source's revision whose points were compared with its content.
    pub content_checked: usize,
    /// Documents at the source's revision that a listing cannot check (no content).
    pub revision_only: usize,
    pub findings: Vec<Finding>,
    pub seconds: f64,
}

impl Report {
    pub fn count(&self, kind: Kind) -> usize {
        self.findings.iter().filter(|f| f.kind == kind).count()
    }

    pub fn is_consistent(&self) -> bool {
        self.findings.is_empty()
    }

    /// The events that repair what the source allows: its final upsert for a missing,
    /// behind or mismatched document (a listing has none), a delete for an orphaned one
    /// (for one the source does not list, only with `delete_unlisted`). Ahead documents
    /// are left as they are.
    pub fn fixes(&self, delete_unlisted: bool) -> Vec<Event> {
        self.repairs(delete_unlisted)
            .map(|(_, fix)| fix.event.clone())
            .collect()
    }

    /// Findings [`Report::fixes`] has no event for.
    pub fn unfixable(&self, delete_unlisted: bool) -> usize {
        self.findings.len() - self.repairs(delete_unlisted).count()
    }

    fn repairs(&self, delete_unlisted: bool) -> impl Iterator<Item = (&Finding, &Fix)> {
        self.findings.iter().filter_map(move |finding| {
            let fix = finding.fix.as_ref()?;
            (delete_unlisted || !fix.unlisted).then_some((finding, fix))
        })
    }

    /// Refuses fixes that would delete more than `max_share` of the live documents.
    pub fn check_deletions(&self, max_share: f64, delete_unlisted: bool) -> Result<(), AuditError> {
        let deletions = self
            .repairs(delete_unlisted)
            .filter(|(finding, fix)| {
                finding.indexed_revision.is_some()
                    && matches!(fix.event.change, Change::Delete { .. })
            })
            .count();
        let indexed = self.indexed_documents;
        let share = deletions as f64 / indexed.max(1) as f64;
        if deletions > 0 && share > max_share {
            return Err(AuditError::MassDeletion {
                deletions,
                indexed,
                share,
                max_share,
            });
        }
        Ok(())
    }

    /// The report for people: one line of figures, then each kind with up to `list`
    /// documents.
    pub fn text(&self, list: usize) -> String {
        let mut out = format!(
            "audit: {} against the index ({} documents, {} sentences) in {:.1} s\n",
            self.source, self.indexed_documents, self.indexed_points, self.seconds
        );
        for kind in Kind::ALL {
            let found: Vec<&Finding> = self.findings.iter().filter(|f| f.kind == kind).collect();
            out.push_str(&format!("  {:<11} {}\n", kind.as_str(), found.len()));
            for finding in found.iter().take(list) {
                out.push_str(&format!("      {}: {}\n", finding.doc, finding.detail));
            }
            if found.len() > list {
                out.push_str(&format!("      ... and {} more\n", found.len() - list));
            }
        }
        let verdict = if self.is_consistent() {
            "consistent"
        } else {
            "NOT consistent"
        };
        out.push_str(&format!(
            "{verdict}: {} documents' points compared with their revision's content, {} checked by revision only\n",
            self.content_checked, self.revision_only
        ));
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use classify::delete;

    #[test]
    fn the_guard_counts_only_deletions_of_live_documents_it_would_send() {
        let orphan = |indexed_revision: Option<u64>, unlisted| Finding {
            kind: Kind::Orphaned,
            doc: DocKey {
                tenant: None,
                doc_id: "x".into(),
            },
            indexed_revision,
            source_revision: None,
            points: 3,
            detail: String::new(),
            fix: Some(delete(
                &DocKey {
                    tenant: None,
                    doc_id: "x".into(),
                },
                indexed_revision.unwrap_or(0),
                unlisted,
            )),
        };
        let mut report = Report {
            source: String::new(),
            source_documents: 10,
            indexed_documents: 10,
            indexed_points: 100,
            content_checked: 0,
            revision_only: 0,
            findings: vec![orphan(Some(1), false), orphan(None, false)],
            seconds: 0.0,
        };
        // One live document of ten: 10%, at the limit.
        assert!(report.check_deletions(0.10, true).is_ok());
        report.findings.push(orphan(Some(2), true));
        let refused = report.check_deletions(0.10, true).unwrap_err().to_string();
        assert!(
            refused.starts_with(
                "refusing to fix: it would delete 2 of the index's 10 documents (20.0%"
            ),
            "{refused}"
        );
        // Without deleting unlisted documents, the second is not sent: within the guard.
        assert!(report.check_deletions(0.10, false).is_ok());
        assert_eq!(report.fixes(false).len(), 2);
        assert_eq!(report.unfixable(false), 1);
        assert_eq!(report.fixes(true).len(), 3);
    }
}
