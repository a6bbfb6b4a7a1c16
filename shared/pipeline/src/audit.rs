//! Reconcile the index with a source of truth: which documents are missing, behind, ahead,
//! left behind (the source deleted them or no longer has them), or indexed at the right
//! revision with points that are not what that revision makes (the differ's plan for it is
//! not empty). The source is a revision log (each document's last event, with its content)
//! or a listing a CMS can produce (`{doc_id, revision, tenant?, deleted?}` per line: no
//! content, so only revisions are compared).
//!
//! [`audit`] only reads. [`Report::fixes`] turns the findings into the events that repair
//! them, for the caller to send through the pipeline like any other (fenced, dead-lettered,
//! counted); [`Report::check_deletions`] is the guard against a truncated source emptying
//! the index.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use casement_events::revision_log::{self, LogEvent};
use casement_events::{Change, Event, EventFormat};
use casement_store::{IndexedDocument, Store};
use prometheus::{Gauge, IntCounterVec, IntGauge, IntGaugeVec, Registry};
use serde::{Deserialize, Serialize};

use crate::metrics::Registrar;
use crate::processor::{ProcessError, Processor};

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

/// The source of truth: every document it knows of.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    pub documents: BTreeMap<DocKey, Expected>,
    /// What it was read from, for the report ("revision log X: N events").
    pub description: String,
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
         ({:.0}%, over audit.max_delete_share = {:.0}%); a truncated listing or the wrong \
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
    /// line. Any line that cannot be read fails the whole source: an audit that skipped it
    /// would report the document as left behind, and a fix would delete it.
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
        if is_log {
            let (events, rejected) = revision_log::read(path).map_err(|e| fail(e.to_string()))?;
            if let Some(line) = rejected.first() {
                return Err(fail(format!(
                    "line {} is not a revision-log event ({}); {} such lines",
                    line.line,
                    line.reason,
                    rejected.len()
                )));
            }
            Self::from_log(&events, &path.display().to_string()).map_err(fail)
        } else {
            let reader = revision_log::open(path).map_err(|e| fail(e.to_string()))?;
            Self::from_listing(reader, &path.display().to_string()).map_err(fail)
        }
    }

    /// Each document's last event in the log's order.
    pub fn from_log(events: &[LogEvent], name: &str) -> Result<Self, String> {
        let mut documents = BTreeMap::new();
        for event in events {
            let key = DocKey {
                tenant: None,
                doc_id: event.doc_id.clone(),
            };
            let expected = if event.is_delete() {
                Expected::Deleted {
                    revision: event.revision,
                }
            } else {
                let decoded = event.to_event().map_err(|rejection| {
                    format!(
                        "the event of {} at revision {} is not valid: {rejection}",
                        event.doc_id, event.revision
                    )
                })?;
                Expected::Present {
                    revision: event.revision,
                    event: Some(Box::new(decoded)),
                }
            };
            documents.insert(key, expected);
        }
        Ok(Self {
            description: format!(
                "revision log {name} ({} events, {} documents)",
                events.len(),
                documents.len()
            ),
            documents,
        })
    }

    /// `{doc_id, revision, tenant?, deleted?}` per line; a document listed twice keeps its
    /// last line.
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
        })
    }
}

/// What is wrong with one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The source has it; the index has no live state for it (nothing, a tombstone, or
    /// sentence points without a state).
    Missing,
    /// Indexed at an older revision than the source's.
    Behind,
    /// Indexed at a newer revision than the source's (the source is behind, or wrong):
    /// reported, never "fixed" backwards.
    Ahead,
    /// In the index, and deleted in the source or absent from it.
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

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: Kind,
    #[serde(flatten)]
    pub doc: DocKey,
    /// The live revision in the index, if any.
    pub indexed_revision: Option<u64>,
    /// The source's revision (of the document or of its deletion), if it has one.
    pub source_revision: Option<u64>,
    /// Sentence points the index holds for it.
    pub points: u64,
    /// In words: what differs.
    pub detail: String,
    /// The event that repairs it, if the source allows one.
    #[serde(skip)]
    fix: Option<Event>,
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
    /// behind or mismatched document (a listing has none: reported only), a delete for an
    /// orphaned one. Ahead documents are left as they are.
    pub fn fixes(&self) -> Vec<Event> {
        self.findings.iter().filter_map(|f| f.fix.clone()).collect()
    }

    /// Findings the source gives no way to repair.
    pub fn unfixable(&self) -> usize {
        self.findings.iter().filter(|f| f.fix.is_none()).count()
    }

    /// Refuses a fix that would delete more than `max_share` of the live documents.
    pub fn check_deletions(&self, max_share: f64) -> Result<(), AuditError> {
        let deletions = self
            .findings
            .iter()
            .filter(|f| f.kind == Kind::Orphaned && f.indexed_revision.is_some())
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

/// Compares the index with `truth`. Reads only.
pub async fn audit<S: Store>(
    processor: &Processor<S>,
    truth: &Truth,
) -> Result<Report, AuditError> {
    let started = Instant::now();
    let indexed: BTreeMap<DocKey, IndexedDocument> = boxed(processor.store.documents())
        .await?
        .into_iter()
        .map(|d| {
            let key = DocKey {
                tenant: d.tenant.clone(),
                doc_id: d.doc_id.clone(),
            };
            (key, d)
        })
        .collect();
    let mut report = Report {
        source: truth.description.clone(),
        source_documents: truth.documents.len(),
        indexed_documents: indexed.values().filter(|d| d.is_live()).count(),
        indexed_points: indexed.values().map(|d| d.points).sum(),
        content_checked: 0,
        revision_only: 0,
        findings: Vec::new(),
        seconds: 0.0,
    };
    for (key, expected) in &truth.documents {
        let in_index = indexed.get(key);
        let live = in_index
            .and_then(|d| d.state.as_ref())
            .filter(|s| !s.deleted);
        let points = in_index.map_or(0, |d| d.points);
        let finding = |kind, source_revision, detail: String, fix: Option<Event>| Finding {
            kind,
            doc: key.clone(),
            indexed_revision: live.map(|s| s.revision),
            source_revision,
            points,
            detail,
            fix,
        };
        match expected {
            Expected::Present { revision, event } => {
                let fix = event.as_deref().cloned();
                let Some(state) = live else {
                    let how = match in_index.and_then(|d| d.state.as_ref()) {
                        Some(tombstone) => {
                            format!("deleted in the index at revision {}", tombstone.revision)
                        }
                        None if points > 0 => {
                            format!("{points} sentence points without a document state")
                        }
                        None => "not in the index".to_owned(),
                    };
                    let detail = format!("{how}; the source has revision {revision}");
                    report
                        .findings
                        .push(finding(Kind::Missing, Some(*revision), detail, fix));
                    continue;
                };
                if state.revision < *revision {
                    let detail = format!(
                        "indexed at revision {}, the source has {revision}",
                        state.revision
                    );
                    report
                        .findings
                        .push(finding(Kind::Behind, Some(*revision), detail, fix));
                } else if state.revision > *revision {
                    let detail = format!(
                        "indexed at revision {}, newer than the source's {revision}",
                        state.revision
                    );
                    report
                        .findings
                        .push(finding(Kind::Ahead, Some(*revision), detail, None));
                } else if let Some(Event {
                    change: Change::Upsert(content) | Change::Restore(content),
                    ..
                }) = event.as_deref()
                {
                    report.content_checked += 1;
                    let plan = boxed(processor.plan_revision(content)).await?;
                    if !plan.is_noop() || plan.document != *state {
                        let mut parts = Vec::new();
                        for (n, what) in [
                            (plan.embed.len(), "to embed"),
                            (plan.update_payload.len(), "payloads to update"),
                            (plan.delete.len(), "points to delete"),
                        ] {
                            if n > 0 {
                                parts.push(format!("{n} {what}"));
                            }
                        }
                        if plan.document != *state {
                            parts.push("its document state differs".to_owned());
                        }
                        let detail = format!(
                            "at revision {revision}, but its points are not what it makes: {}",
                            parts.join(", ")
                        );
                        report.findings.push(finding(
                            Kind::Mismatched,
                            Some(*revision),
                            detail,
                            fix,
                        ));
                    }
                } else {
                    report.revision_only += 1;
                }
            }
            Expected::Deleted { revision } => {
                if let Some(state) = live.filter(|s| s.revision > *revision) {
                    let detail = format!(
                        "indexed at revision {}, newer than the source's deletion at {revision}",
                        state.revision
                    );
                    report
                        .findings
                        .push(finding(Kind::Ahead, Some(*revision), detail, None));
                } else if live.is_some() || points > 0 {
                    let detail = format!(
                        "deleted in the source at revision {revision}; the index holds {points} of its points{}",
                        live.map(|s| format!(" at revision {}", s.revision))
                            .unwrap_or_default()
                    );
                    let fix = delete_event(key, Some(*revision));
                    report.findings.push(finding(
                        Kind::Orphaned,
                        Some(*revision),
                        detail,
                        Some(fix),
                    ));
                }
            }
        }
    }
    for (key, document) in &indexed {
        if truth.documents.contains_key(key) || (!document.is_live() && document.points == 0) {
            continue;
        }
        let live = document.state.as_ref().filter(|s| !s.deleted);
        let detail = format!(
            "not in the source; the index holds {} points{}",
            document.points,
            live.map(|s| format!(" at revision {}", s.revision))
                .unwrap_or_default()
        );
        // Deleted at the indexed revision (a delete that does not say its revision), so
        // the tombstone fences nothing newer the CMS may still send.
        let revision = live.map(|s| s.revision).unwrap_or_default();
        report.findings.push(Finding {
            kind: Kind::Orphaned,
            doc: key.clone(),
            indexed_revision: live.map(|s| s.revision),
            source_revision: None,
            points: document.points,
            detail,
            fix: Some(delete_event(key, Some(revision))),
        });
    }
    report
        .findings
        .sort_by(|a, b| (a.kind, &a.doc).cmp(&(b.kind, &b.doc)));
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// A future boxed as `Send`: spawning an audit otherwise hits the compiler's higher-ranked
/// `Send` limitation (rust-lang/rust#100013) on the store's nested futures.
fn boxed<'a, T>(
    future: impl std::future::Future<Output = T> + Send + 'a,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>> {
    Box::pin(future)
}

fn delete_event(key: &DocKey, revision: Option<u64>) -> Event {
    Event {
        change: Change::Delete {
            doc_id: key.doc_id.clone(),
            tenant: key.tenant.clone(),
            revision,
        },
        format: EventFormat::Native,
    }
}

/// `casement_audit_*`: the last audit's findings, registered only where audits run.
#[derive(Debug, Clone)]
pub struct AuditMetrics {
    pub findings: IntGaugeVec,
    pub source_documents: IntGauge,
    pub indexed_documents: IntGauge,
    pub last_run: Gauge,
    pub duration: Gauge,
    pub runs: IntCounterVec,
    pub fixes: IntCounterVec,
}

impl AuditMetrics {
    pub fn new(registry: &Registry) -> Self {
        let r = Registrar(registry);
        Self {
            findings: r.gauges(
                "casement_audit_documents",
                "Last audit: documents found wrong, by finding.",
                "finding",
                &Kind::ALL.map(Kind::as_str),
            ),
            source_documents: r.gauge(
                "casement_audit_source_documents",
                "Last audit: documents the source of truth lists.",
            ),
            indexed_documents: r.gauge(
                "casement_audit_indexed_documents",
                "Last audit: live documents in the index.",
            ),
            last_run: r.seconds(
                "casement_audit_last_run_timestamp_seconds",
                "Unix time the last audit finished (0: none yet).",
            ),
            duration: r.seconds(
                "casement_audit_last_run_duration_seconds",
                "How long the last audit took.",
            ),
            runs: r.counters(
                "casement_audit_runs_total",
                "Audits by outcome.",
                "outcome",
                &["consistent", "inconsistent", "error"],
            ),
            fixes: r.counters(
                "casement_audit_fixes_total",
                "Repair events an audit sent through the pipeline, or refused by the mass-deletion guard.",
                "outcome",
                &["sent", "refused"],
            ),
        }
    }

    pub fn record(&self, report: &Report) {
        for kind in Kind::ALL {
            self.findings
                .with_label_values(&[kind.as_str()])
                .set(report.count(kind) as i64);
        }
        self.source_documents.set(report.source_documents as i64);
        self.indexed_documents.set(report.indexed_documents as i64);
        self.duration.set(report.seconds);
        self.last_run.set(crate::now_ms() as f64 / 1000.0);
        let outcome = if report.is_consistent() {
            "consistent"
        } else {
            "inconsistent"
        };
        self.runs.with_label_values(&[outcome]).inc();
    }

    pub fn failed(&self) {
        self.runs.with_label_values(&["error"]).inc();
    }
}

/// `[audit]`: the guard of `casement audit --fix`, and the audit `casement run` repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// The largest share of the index's live documents a fix may delete without
    /// `--force` (a truncated listing must not empty the index).
    pub max_delete_share: f64,
    /// A revision log or listing that `casement run` audits the index against, read
    /// again at every run (empty: no periodic audit).
    pub source: PathBuf,
    /// Seconds between the periodic audits (the first once the replay is indexed).
    pub interval_secs: u64,
    /// Send the periodic audit's repairs through the pipeline (past the guard), instead
    /// of only reporting them.
    pub fix: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            max_delete_share: 0.10,
            source: PathBuf::new(),
            interval_secs: 3600,
            fix: false,
        }
    }
}

impl AuditConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.max_delete_share) {
            return Err(format!(
                "audit.max_delete_share = {} must be between 0 and 1 (a share of the index's documents)",
                self.max_delete_share
            ));
        }
        if self.interval_secs == 0 {
            return Err("audit.interval_secs must be at least 1".into());
        }
        if self.fix && !self.enabled() {
            return Err("audit.fix needs audit.source".into());
        }
        Ok(())
    }

    /// A periodic audit is configured.
    pub fn enabled(&self) -> bool {
        !self.source.as_os_str().is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_reads_tenants_and_deletions_and_stops_at_a_bad_line() {
        let listing = "{\"doc_id\": \"a\", \"revision\": 3}\n\n\
                       {\"doc_id\": \"b\", \"revision\": 7, \"tenant\": \"acme\", \"deleted\": true}\n";
        let truth = Truth::from_listing(listing.as_bytes(), "l.jsonl").unwrap();
        assert_eq!(truth.description, "listing l.jsonl (2 documents)");
        let a = DocKey {
            tenant: None,
            doc_id: "a".into(),
        };
        let b = DocKey {
            tenant: Some("acme".into()),
            doc_id: "b".into(),
        };
        assert!(matches!(
            truth.documents[&a],
            Expected::Present {
                revision: 3,
                event: None
            }
        ));
        assert!(matches!(
            truth.documents[&b],
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
    fn the_guard_counts_only_deletions_of_live_documents() {
        let orphan = |indexed_revision| Finding {
            kind: Kind::Orphaned,
            doc: DocKey {
                tenant: None,
                doc_id: "x".into(),
            },
            indexed_revision,
            source_revision: None,
            points: 3,
            detail: String::new(),
            fix: None,
        };
        let mut report = Report {
            source: String::new(),
            source_documents: 10,
            indexed_documents: 10,
            indexed_points: 100,
            content_checked: 0,
            revision_only: 0,
            findings: vec![orphan(Some(1)), orphan(None)],
            seconds: 0.0,
        };
        // One live document of ten: 10%, at the limit.
        assert!(report.check_deletions(0.10).is_ok());
        report.findings.push(orphan(Some(2)));
        let refused = report.check_deletions(0.10).unwrap_err().to_string();
        assert!(
            refused
                .starts_with("refusing to fix: it would delete 2 of the index's 10 documents (20%"),
            "{refused}"
        );
    }
}
