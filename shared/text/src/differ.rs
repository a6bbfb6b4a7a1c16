//! Revision differ: the indexed sentence records of a document + a new revision → the
//! `ChangePlan` that turns the first into what indexing the revision from scratch stores.
//!
//! The plan depends only on the records actually in the index (DESIGN.md: the index is the
//! state), so a plan applied twice, or cut off and planned again, converges.

use std::collections::HashMap;

use uuid::Uuid;

use crate::config::TextConfig;
use crate::document::{DocRef, DocumentState};
use crate::error::Result;
use crate::records::{SentenceRecord, build_records, build_records_with};
use crate::revision::Revision;
use crate::segmenter::{KnownSection, KnownSections, Section, SegmentedRevision, segment_reusing};

/// The operations that bring one document to one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangePlan {
    pub doc_id: String,
    pub revision: u64,
    /// New points, and points whose embedding input changed: these need a vector.
    pub embed: Vec<SentenceRecord>,
    /// Points whose vector stays and whose payload (offsets, window, position) changes.
    pub update_payload: Vec<SentenceRecord>,
    pub delete: Vec<Uuid>,
    /// Points that stay as they are (but for the revision stamp).
    pub unchanged: usize,
    /// Written last: marks the document as being at `revision`.
    pub document: DocumentState,
    /// Sections whose sentence boundaries were taken from the index, not re-segmented.
    pub reused_sections: usize,
    /// Written even over a tombstone at the same revision: an undelete, which brings back
    /// a document deleted at the revision it restores ([`crate::fence_restoring`]).
    pub restore: bool,
}

/// One write, in the order a store applies them (see [`ChangePlan::operations`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation<'a> {
    Upsert(&'a SentenceRecord),
    SetPayload(&'a SentenceRecord),
    Delete(Uuid),
    /// Set `revision` and `revision_url` on every point of the document.
    StampRevision {
        doc_id: &'a str,
        revision: u64,
        revision_url: Option<&'a str>,
    },
    PutDocument(&'a DocumentState),
}

impl ChangePlan {
    /// The planned document's identity (its id within its tenant).
    pub fn doc_ref(&self) -> DocRef<'_> {
        DocRef::new(self.document.tenant.as_deref(), &self.doc_id)
    }

    /// Nothing to write but the revision stamp and the document state.
    pub fn is_noop(&self) -> bool {
        self.embed.is_empty() && self.update_payload.is_empty() && self.delete.is_empty()
    }

    /// Write order: new content first (so a cut-off write leaves old and new text, never a
    /// hole), then payload moves, then deletes, then the stamp, then the document state.
    pub fn operations(&self) -> impl Iterator<Item = Operation<'_>> {
        self.embed
            .iter()
            .map(Operation::Upsert)
            .chain(self.update_payload.iter().map(Operation::SetPayload))
            .chain(self.delete.iter().copied().map(Operation::Delete))
            .chain(std::iter::once(Operation::StampRevision {
                doc_id: &self.doc_id,
                revision: self.revision,
                revision_url: self.document.revision_url.as_deref(),
            }))
            .chain(std::iter::once(Operation::PutDocument(&self.document)))
    }
}

/// Plans an upsert of `revision` over the document's `current` records (as read from the
/// index). Call it only after the fence said [`crate::Fence::Apply`].
pub fn plan_upsert(
    current: &[SentenceRecord],
    revision: &Revision,
    config: &TextConfig,
) -> Result<(ChangePlan, SegmentedRevision)> {
    let segmented = segment_against(current, revision, config)?;
    let target = build_records(&segmented, config);
    let plan = diff_records(current, target, &segmented);
    Ok((plan, segmented))
}

/// The first half of [`plan_upsert`], for callers that enrich sections before planning:
/// segments `revision`, reusing the sentence boundaries of sections the index already has.
pub fn segment_against(
    current: &[SentenceRecord],
    revision: &Revision,
    config: &TextConfig,
) -> Result<SegmentedRevision> {
    segment_reusing(revision, config, &known_sections(current))
}

/// The second half: plans `segmented` over `current` with one enrichment context per
/// section, given as `(context, context_source)` by `context_of`.
pub fn plan_segmented(
    current: &[SentenceRecord],
    segmented: &SegmentedRevision,
    config: &TextConfig,
    context_of: impl Fn(&Section) -> (String, String),
) -> ChangePlan {
    let target = build_records_with(segmented, config, context_of);
    diff_records(current, target, segmented)
}

/// Plans the deletion of document `doc`: every point goes, a tombstone stays with the
/// last title and url. Those come from the indexed state `indexed` when there is one (the
/// state outlives the points: a delete cut off after its points were removed is replanned
/// from no records, and must not erase them), else from the records.
pub fn plan_delete(
    current: &[SentenceRecord],
    indexed: Option<&DocumentState>,
    doc: DocRef<'_>,
    revision: u64,
) -> ChangePlan {
    let (title, url, access) = match (indexed, current.first()) {
        (Some(state), _) => (state.title.clone(), state.url.clone(), state.access()),
        (None, Some(r)) => (r.title.clone(), r.url.clone(), r.access()),
        (None, None) => (String::new(), None, crate::Access::deny()),
    };
    let (doc_id, tenant) = (doc.doc_id, doc.tenant.map(str::to_owned));
    ChangePlan {
        doc_id: doc_id.to_owned(),
        revision,
        embed: Vec::new(),
        update_payload: Vec::new(),
        delete: current.iter().map(|r| r.id).collect(),
        unchanged: 0,
        document: DocumentState {
            doc_id: doc_id.to_owned(),
            revision,
            deleted: true,
            title,
            url,
            revision_url: None,
            tenant,
            sentence_count: 0,
            section_count: 0,
            public: access.public,
            access_groups: access.groups,
        },
        reused_sections: 0,
        restore: false,
    }
}

fn diff_records(
    current: &[SentenceRecord],
    target: Vec<SentenceRecord>,
    segmented: &SegmentedRevision,
) -> ChangePlan {
    let by_id: HashMap<Uuid, &SentenceRecord> = current.iter().map(|r| (r.id, r)).collect();
    let mut plan = ChangePlan {
        doc_id: segmented.doc_id.clone(),
        revision: segmented.revision,
        embed: Vec::new(),
        update_payload: Vec::new(),
        delete: Vec::new(),
        unchanged: 0,
        document: DocumentState {
            doc_id: segmented.doc_id.clone(),
            revision: segmented.revision,
            deleted: false,
            title: segmented.title.clone(),
            url: segmented.url.clone(),
            revision_url: segmented.revision_url.clone(),
            tenant: segmented.tenant.clone(),
            sentence_count: target.len(),
            section_count: segmented.sections.len(),
            public: segmented.access.public,
            access_groups: segmented.access.groups.clone(),
        },
        reused_sections: segmented.reused_sections,
        restore: false,
    };
    let mut kept = std::collections::HashSet::with_capacity(target.len());
    for record in target {
        kept.insert(record.id);
        match by_id.get(&record.id) {
            Some(existing) if existing.embed_hash == record.embed_hash => {
                if existing.same_payload_except_revision(&record) {
                    plan.unchanged += 1;
                } else {
                    plan.update_payload.push(record);
                }
            }
            _ => plan.embed.push(record),
        }
    }
    plan.delete = current
        .iter()
        .map(|r| r.id)
        .filter(|id| !kept.contains(id))
        .collect();
    plan.delete.sort_unstable();
    plan.delete.dedup();
    plan
}

/// Sections of the index whose records are complete and consistent, with each sentence's
/// text and character offset from the section start. A section cut off by a partial write
/// (missing or mixed records) is left out, so it is segmented again.
fn known_sections(current: &[SentenceRecord]) -> KnownSections<'_> {
    let mut by_section: HashMap<&str, Vec<&SentenceRecord>> = HashMap::new();
    for record in current {
        by_section
            .entry(&record.section_id)
            .or_default()
            .push(record);
    }
    let mut known = KnownSections::new();
    for (section_id, mut records) in by_section {
        records.sort_by_key(|r| r.position.index);
        let first = records[0];
        let complete = records.len() == first.position.count as usize
            && records.iter().enumerate().all(|(i, r)| {
                r.position.index as usize == i
                    && r.section_hash == first.section_hash
                    && r.position.count == first.position.count
                    && r.section_char_start == first.section_char_start
                    && r.char_start >= r.section_char_start
            });
        if complete {
            let sentences = records
                .iter()
                .map(|r| (r.char_start - r.section_char_start, r.sentence.as_str()))
                .collect();
            known.insert(
                section_id,
                KnownSection {
                    content_hash: &first.section_hash,
                    sentences,
                },
            );
        }
    }
    known
}
