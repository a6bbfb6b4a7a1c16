//! The audit itself: each document of the source against what the index holds of it, and
//! the index's documents the source does not list.

use std::collections::BTreeMap;
use std::time::Instant;

use casement_events::{Change, Event, EventFormat};
use casement_store::{IndexedDocument, Store};
use casement_text::DocumentState;

use super::{AuditError, DocKey, Expected, Finding, Fix, Kind, Report, Truth};
use crate::processor::Processor;

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
        let in_index = Indexed::of(indexed.get(key));
        let finding = match expected {
            Expected::Present { revision, event } => {
                present(
                    processor,
                    &in_index,
                    *revision,
                    event.as_deref(),
                    &mut report,
                )
                .await?
            }
            Expected::Deleted { revision } => deleted(&in_index, key, *revision),
        };
        if let Some((kind, detail, fix)) = finding {
            report.findings.push(Finding {
                kind,
                doc: key.clone(),
                indexed_revision: in_index.live.map(|s| s.revision),
                source_revision: Some(expected.revision()),
                points: in_index.points,
                detail,
                fix,
            });
        }
    }
    for (key, document) in &indexed {
        if truth.documents.contains_key(key)
            || truth
                .scope
                .as_deref()
                .is_some_and(|prefix| !key.doc_id.starts_with(prefix))
        {
            continue;
        }
        let in_index = Indexed::of(Some(document));
        if in_index.live.is_none() && in_index.points == 0 {
            continue; // A tombstone: nothing to remove.
        }
        let (detail, fix) = match (in_index.live, in_index.tombstone) {
            (Some(state), _) => (
                format!(
                    "not listed by the source; the index holds it at revision {} ({} points)",
                    state.revision, in_index.points
                ),
                // Deleted at the indexed revision, as a CMS delete that does not say its
                // revision is: a newer revision the CMS sends later still applies.
                Some(delete(key, state.revision, true)),
            ),
            (None, Some(tombstone)) => (stray_points(&in_index, tombstone), None),
            (None, None) => (
                format!(
                    "not listed by the source; {} sentence points without a document state",
                    in_index.points
                ),
                // Its tombstone is at revision 0, which fences nothing a CMS sends.
                Some(delete(key, 0, true)),
            ),
        };
        report.findings.push(Finding {
            kind: Kind::Orphaned,
            doc: key.clone(),
            indexed_revision: in_index.live.map(|s| s.revision),
            source_revision: None,
            points: in_index.points,
            detail,
            fix,
        });
    }
    report
        .findings
        .sort_by(|a, b| (a.kind, &a.doc).cmp(&(b.kind, &b.doc)));
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// What the index holds of one document.
struct Indexed<'a> {
    live: Option<&'a DocumentState>,
    tombstone: Option<&'a DocumentState>,
    points: u64,
}

impl<'a> Indexed<'a> {
    fn of(document: Option<&'a IndexedDocument>) -> Self {
        let state = document.and_then(|d| d.state.as_ref());
        Self {
            live: state.filter(|s| !s.deleted),
            tombstone: state.filter(|s| s.deleted),
            points: document.map_or(0, |d| d.points),
        }
    }
}

type Classified = Option<(Kind, String, Option<Fix>)>;

/// A document the source has at `revision`.
async fn present<S: Store>(
    processor: &Processor<S>,
    in_index: &Indexed<'_>,
    revision: u64,
    event: Option<&Event>,
    report: &mut Report,
) -> Result<Classified, AuditError> {
    let upsert = event.map(|event| Fix {
        event: event.clone(),
        unlisted: false,
    });
    let Some(state) = in_index.live else {
        return Ok(Some(match in_index.tombstone {
            Some(tombstone) if tombstone.revision > revision => (
                Kind::Ahead,
                format!(
                    "deleted in the index at revision {}, after the source's revision {revision}",
                    tombstone.revision
                ),
                None,
            ),
            Some(tombstone) if tombstone.revision == revision => (
                Kind::Missing,
                format!(
                    "deleted in the index at revision {revision}, the source's own: only an undelete (a restore) of that revision brings it back"
                ),
                // A source that says the page is back (a wiki's listing) restores it.
                upsert.filter(|fix| fix.event.restores()),
            ),
            Some(tombstone) => (
                Kind::Missing,
                format!(
                    "deleted in the index at revision {}; the source has revision {revision}",
                    tombstone.revision
                ),
                upsert,
            ),
            None if in_index.points > 0 => (
                Kind::Missing,
                format!(
                    "{} sentence points without a document state; the source has revision {revision}",
                    in_index.points
                ),
                upsert,
            ),
            None => (
                Kind::Missing,
                format!("not in the index; the source has revision {revision}"),
                upsert,
            ),
        }));
    };
    if state.revision < revision {
        let detail = format!(
            "indexed at revision {}, the source has {revision}",
            state.revision
        );
        return Ok(Some((Kind::Behind, detail, upsert)));
    }
    if state.revision > revision {
        let detail = format!(
            "indexed at revision {}, newer than the source's {revision}",
            state.revision
        );
        return Ok(Some((Kind::Ahead, detail, None)));
    }
    let Some(Event {
        change: Change::Upsert(content) | Change::Restore(content),
        ..
    }) = event
    else {
        report.revision_only += 1;
        return Ok(None);
    };
    report.content_checked += 1;
    let plan = boxed(processor.plan_revision(content)).await?;
    if plan.is_noop() && plan.document == *state {
        return Ok(None);
    }
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
    Ok(Some((Kind::Mismatched, detail, upsert)))
}

/// A document the source deleted at `revision`.
fn deleted(in_index: &Indexed<'_>, key: &DocKey, revision: u64) -> Classified {
    match (in_index.live, in_index.tombstone) {
        (Some(state), _) if state.revision > revision => Some((
            Kind::Ahead,
            format!(
                "indexed at revision {}, newer than the source's deletion at {revision}",
                state.revision
            ),
            None,
        )),
        (Some(state), _) => Some((
            Kind::Orphaned,
            format!(
                "deleted in the source at revision {revision}; the index holds it at revision {} ({} points)",
                state.revision, in_index.points
            ),
            Some(delete(key, revision, false)),
        )),
        (None, Some(tombstone)) if in_index.points > 0 => {
            Some((Kind::Orphaned, stray_points(in_index, tombstone), None))
        }
        (None, None) if in_index.points > 0 => Some((
            Kind::Orphaned,
            format!(
                "deleted in the source at revision {revision}; {} sentence points without a document state",
                in_index.points
            ),
            Some(delete(key, revision, false)),
        )),
        _ => None,
    }
}

/// Points left beside a tombstone: no event can remove them (a delete at or below the
/// tombstone's revision is stale), so they are reported for a rebuild.
fn stray_points(in_index: &Indexed<'_>, tombstone: &DocumentState) -> String {
    format!(
        "{} sentence points left beside its tombstone at revision {}: no event removes them (stale at or below that revision); rebuild the index to drop them",
        in_index.points, tombstone.revision
    )
}

pub(super) fn delete(key: &DocKey, revision: u64, unlisted: bool) -> Fix {
    Fix {
        event: Event {
            change: Change::Delete {
                doc_id: key.doc_id.clone(),
                tenant: key.tenant.clone(),
                revision: Some(revision),
            },
            format: EventFormat::Native,
        },
        unlisted,
    }
}

/// A future boxed as `Send`: spawning an audit otherwise hits the compiler's higher-ranked
/// `Send` limitation (rust-lang/rust#100013) on the store's nested futures.
fn boxed<'a, T>(
    future: impl std::future::Future<Output = T> + Send + 'a,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>> {
    Box::pin(future)
}
