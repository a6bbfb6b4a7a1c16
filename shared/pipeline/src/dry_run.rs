//! `dry-run`: replays a revision log through the real fence, segmenter and
//! differ into an in-memory index and reports, per event, what the indexer would write.
//! Nothing is embedded and nothing is stored; it shows the incremental plan.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use casement_text::{ChangePlan, Fence, MemoryIndex, TextConfig, fence, plan_delete, plan_upsert};

use casement_events::{DecodeConfig, revision_log};

/// What a dry run reads of a service's config.
#[derive(Debug, Clone, Copy)]
pub struct DryRunConfig<'a> {
    pub text: &'a TextConfig,
    pub events: &'a DecodeConfig,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub events: usize,
    pub applied: usize,
    pub stale: usize,
    pub rejected: usize,
    pub deleted: usize,
    /// Sentences the incremental plans send to the embedding model.
    pub embedded: usize,
    /// Sentences that re-indexing every revision from scratch would embed.
    pub embedded_from_scratch: usize,
    pub payload_updates: usize,
    pub documents: usize,
    pub points: usize,
}

pub fn run(
    config: DryRunConfig<'_>,
    input: &Path,
    out: &mut dyn Write,
    per_event: bool,
) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let (events, rejected_lines) = revision_log::read(input)
        .map_err(|e| anyhow::anyhow!("cannot read revision log {}: {e}", input.display()))?;
    let mut summary = Summary {
        events: events.len() + rejected_lines.len(),
        rejected: rejected_lines.len(),
        ..Summary::default()
    };
    for line in &rejected_lines {
        writeln!(out, "rejected line {}: {}", line.line, line.reason)?;
    }
    let mut index = MemoryIndex::new();
    for event in &events {
        let outcome = match fence(index.document(&event.doc_id), event.revision) {
            Fence::Stale { indexed_revision } => {
                summary.stale += 1;
                format!("stale (indexed revision {indexed_revision})")
            }
            Fence::Apply => match plan_event(&index, event, config) {
                Ok(plan) => {
                    summary.applied += 1;
                    summary.embedded += plan.embed.len();
                    summary.payload_updates += plan.update_payload.len();
                    summary.embedded_from_scratch += plan.document.sentence_count;
                    summary.deleted += usize::from(plan.document.deleted);
                    index.apply(&plan);
                    describe(&plan)
                }
                Err(reason) => {
                    summary.rejected += 1;
                    format!("rejected: {reason}")
                }
            },
        };
        if per_event {
            writeln!(
                out,
                "{:<60} r{:<4} {:<14} {outcome}",
                truncate(&event.doc_id, 60),
                event.revision,
                event.change
            )?;
        }
    }
    let live: Vec<_> = events
        .iter()
        .map(|e| e.doc_id.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|d| index.document(d).is_some_and(|s| !s.deleted))
        .collect();
    summary.documents = live.len();
    summary.points = index.point_count();
    writeln!(out)?;
    if let Some(doc_id) = live.first() {
        show_points(out, &index, doc_id, config.text)?;
    }
    writeln!(
        out,
        "{} events: {} applied, {} stale, {} rejected, {} deletes; {} documents, {} sentence points",
        summary.events,
        summary.applied,
        summary.stale,
        summary.rejected,
        summary.deleted,
        summary.documents,
        summary.points
    )?;
    writeln!(
        out,
        "sentences embedded: {} incremental vs {} re-indexing every revision ({:.1}x less); {} payload-only updates; {:.2} s",
        summary.embedded,
        summary.embedded_from_scratch,
        summary.embedded_from_scratch as f64 / summary.embedded.max(1) as f64,
        summary.payload_updates,
        started.elapsed().as_secs_f64()
    )?;
    Ok(summary)
}

fn plan_event(
    index: &MemoryIndex,
    event: &revision_log::LogEvent,
    config: DryRunConfig<'_>,
) -> Result<ChangePlan, String> {
    let current = index.records(&event.doc_id);
    if event.is_delete() {
        return Ok(plan_delete(
            &current,
            index.document(&event.doc_id),
            (&event.doc_id).into(),
            event.revision,
        ));
    }
    if event.content.len() > config.events.max_event_bytes {
        return Err(format!(
            "content is {} bytes, over max_event_bytes = {}",
            event.content.len(),
            config.events.max_event_bytes
        ));
    }
    let revision = event.to_revision().map_err(|e| e.to_string())?;
    plan_upsert(&current, &revision, config.text)
        .map(|(plan, _)| plan)
        .map_err(|e| e.to_string())
}

fn describe(plan: &ChangePlan) -> String {
    if plan.document.deleted {
        return format!("delete {} points, tombstone", plan.delete.len());
    }
    format!(
        "embed {:>3}  payload {:>3}  delete {:>3}  unchanged {:>3}  ({} of {} sections not re-segmented)",
        plan.embed.len(),
        plan.update_payload.len(),
        plan.delete.len(),
        plan.unchanged,
        plan.reused_sections,
        plan.document.section_count
    )
}

fn show_points(
    out: &mut dyn Write,
    index: &MemoryIndex,
    doc_id: &str,
    text: &TextConfig,
) -> std::io::Result<()> {
    let mut records = index.records(doc_id);
    records.sort_by_key(|r| (r.position.section, r.position.index));
    writeln!(
        out,
        "What the index holds for {doc_id} (window radius {}), first points:",
        text.window_radius
    )?;
    for record in records.iter().take(3) {
        writeln!(
            out,
            "  point {}  section {:?}  chars {}..{}",
            record.id, record.section_path, record.char_start, record.char_end
        )?;
        writeln!(out, "    sentence: {}", truncate(&record.sentence, 110))?;
        writeln!(out, "    context:  {}", truncate(&record.context, 110))?;
        writeln!(
            out,
            "    window:   {}",
            truncate(&record.window.replace('\n', " "), 110)
        )?;
    }
    writeln!(out)
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(max_chars - 1).collect::<String>())
    }
}
