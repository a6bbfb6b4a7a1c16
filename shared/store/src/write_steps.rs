//! The write order, planned once for both backends: a plan and its vectors → the steps a
//! store executes, one engine call each, in order.
//!
//! Invariant: the steps are [`ChangePlan::operations`] in their order (upserts, payload
//! updates, deletes, revision stamp, document state), only grouped: consecutive upserts
//! into batches of [`UPSERT_BATCH`], consecutive deletes into one step. Nothing is moved
//! across anything else, so a write cut off after any step holds a prefix of the
//! operations, and it heals when the same revision is planned again against what the store
//! returns (see the crate docs). The backends (`edge/write.rs`, `server/write.rs`) only
//! carry the steps out.

use std::collections::HashMap;

use casement_text::{ChangePlan, DocRef, DocumentState, Operation, SentenceRecord};
use uuid::Uuid;

use crate::error::{Error, Result};

/// Sentence points per upsert step (one engine update, so one WAL record on Qdrant Edge and
/// one request to a server).
pub(crate) const UPSERT_BATCH: usize = 256;

/// One write, as a backend executes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WriteStep<'a> {
    /// Sentence points with their dense vectors; at most [`UPSERT_BATCH`].
    Upsert(Vec<(&'a SentenceRecord, &'a [f32])>),
    /// The payload of one existing point. Only on an existing point: a payload update must
    /// never create one.
    SetPayload(&'a SentenceRecord),
    /// Points to delete, all in one step.
    Delete(Vec<Uuid>),
    /// Set `revision` and `revision_url` on every sentence point of the document.
    StampRevision {
        doc: DocRef<'a>,
        revision: u64,
        revision_url: Option<&'a str>,
    },
    /// The document state (its own point, no vectors).
    PutDocument(&'a DocumentState),
}

/// The steps that write the first `count` operations of `plan`, with `vectors[i]` the dense
/// embedding of `plan.embed[i]`. Fails, before any step is planned, when the vectors do not
/// match the plan or the store's `dimension`.
pub(crate) fn write_steps<'a>(
    plan: &'a ChangePlan,
    vectors: &'a [Vec<f32>],
    dimension: usize,
    count: usize,
) -> Result<Vec<WriteStep<'a>>> {
    check_vectors(plan, vectors, dimension)?;
    let dense: HashMap<Uuid, &[f32]> = plan
        .embed
        .iter()
        .zip(vectors)
        .map(|(record, vector)| (record.id, vector.as_slice()))
        .collect();
    let mut steps = Vec::new();
    for operation in plan.operations().take(count) {
        match operation {
            Operation::Upsert(record) => {
                let point = (record, dense[&record.id]);
                match steps.last_mut() {
                    Some(WriteStep::Upsert(batch)) if batch.len() < UPSERT_BATCH => {
                        batch.push(point);
                    }
                    _ => steps.push(WriteStep::Upsert(vec![point])),
                }
            }
            Operation::SetPayload(record) => steps.push(WriteStep::SetPayload(record)),
            Operation::Delete(id) => match steps.last_mut() {
                Some(WriteStep::Delete(ids)) => ids.push(id),
                _ => steps.push(WriteStep::Delete(vec![id])),
            },
            Operation::StampRevision {
                doc_id,
                revision,
                revision_url,
            } => {
                let doc = DocRef::new(plan.document.tenant.as_deref(), doc_id);
                steps.push(WriteStep::StampRevision {
                    doc,
                    revision,
                    revision_url,
                });
            }
            Operation::PutDocument(state) => steps.push(WriteStep::PutDocument(state)),
        }
    }
    Ok(steps)
}

/// Checks a plan's vectors before anything is written.
fn check_vectors(plan: &ChangePlan, vectors: &[Vec<f32>], dimension: usize) -> Result<()> {
    if vectors.len() != plan.embed.len() {
        return Err(Error::VectorCount {
            doc_id: plan.doc_id.clone(),
            records: plan.embed.len(),
            vectors: vectors.len(),
        });
    }
    if let Some(bad) = vectors.iter().find(|v| v.len() != dimension) {
        return Err(Error::Dimension {
            expected: dimension,
            got: bad.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
