//! Fence stage: is the event newer than what the index holds for its document (invariant
//! 4)? Reads the document's state (or tombstone) and applies `casement_text::fence`.

use casement_events::Event;
use casement_store::Store;
use casement_text::{DocumentState, Fence};

use crate::outcome::RetryStage;
use crate::processor::ProcessError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fenced {
    /// Go on, at this revision, over the indexed state (none for a new document).
    Apply {
        revision: u64,
        indexed: Option<DocumentState>,
    },
    /// Not newer than the indexed revision (or the tombstone): nothing to write.
    Stale { indexed_revision: u64 },
}

pub async fn run<S: Store>(store: &S, event: &Event) -> Result<Fenced, ProcessError> {
    let indexed = store
        .document(event.doc_ref())
        .await
        .map_err(ProcessError::store(RetryStage::Fence))?;
    // A delete without a revision (a Debezium tombstone) applies at the indexed one; of a
    // document never indexed, it has nothing to delete and leaves no tombstone (one with a
    // revision does: it fences an older upsert that arrives late).
    let revision = match (event.revision(), &indexed) {
        (Some(revision), _) => revision,
        (None, Some(state)) => state.revision,
        (None, None) => {
            return Ok(Fenced::Stale {
                indexed_revision: 0,
            });
        }
    };
    Ok(
        match casement_text::fence_restoring(indexed.as_ref(), revision, event.restores()) {
            Fence::Stale { indexed_revision } => Fenced::Stale { indexed_revision },
            Fence::Apply => Fenced::Apply { revision, indexed },
        },
    )
}
