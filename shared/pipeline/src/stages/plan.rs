//! Plan stage: the operations that turn the indexed records into the target state (embed,
//! payload update, delete, unchanged; `casement_text::plan_segmented` / `plan_delete`).

use casement_text::{
    ChangePlan, DocRef, DocumentState, Section, SegmentedRevision, SentenceRecord, TextConfig,
    build_records_with, plan_delete, plan_segmented,
};

use super::enrich::Contexts;

/// The plan of an upsert. `whole_documents` is the benchmarks' ablation: every sentence
/// re-embedded, as an indexer without a differ would (the points written are the same).
pub fn upsert(
    current: &[SentenceRecord],
    segmented: &SegmentedRevision,
    config: &TextConfig,
    contexts: &Contexts,
    whole_documents: bool,
) -> ChangePlan {
    let context_of = |section: &Section| contexts.get(&section.id).cloned().unwrap_or_default();
    let mut plan = plan_segmented(current, segmented, config, context_of);
    if whole_documents {
        plan.embed = build_records_with(segmented, config, context_of);
        plan.update_payload.clear();
        plan.unchanged = 0;
    }
    plan
}

/// The plan of a delete at `revision`; the tombstone keeps the indexed state's title, url
/// and tenant.
pub fn delete(
    current: &[SentenceRecord],
    indexed: Option<&DocumentState>,
    doc: DocRef<'_>,
    revision: u64,
) -> ChangePlan {
    plan_delete(current, indexed, doc, revision)
}
