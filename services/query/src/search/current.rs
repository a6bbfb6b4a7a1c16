//! Current-revision stage: a document's hits are shown only at the revision its state
//! point says is indexed, so an answer never holds windows of one document at two
//! revisions.
//!
//! A revision is written as several engine operations (new points, payload updates,
//! deletes, the revision stamp, then the document state: `ChangePlan::operations`). Every
//! sentence point carries the revision it belongs to, and the state point is written last,
//! so it moves from one complete revision to the next in one step. While a revision is
//! being written, its new and updated points are at the new revision and hidden; the old
//! revision's points still in place are shown. Between the stamp and the state write (one
//! engine call), the document has no visible hits at all: absent for a moment, never mixed.
//!
//! The state point also says who may read the document: a hit whose document the reader
//! may not read is dropped here too. The store's filter already left out the points of
//! such documents; this holds while a change of access is being written (the points
//! rewritten one operation at a time, the state last).

use std::collections::HashMap;

use casement_store::{Hit, Store};
use casement_text::DocRef;

use crate::error::ApiError;

/// The hits whose revision is their document's indexed one, in order, and how many were
/// hidden (a revision being written, or a document deleted since the search).
pub async fn current_only<S: Store>(
    store: &S,
    hits: Vec<Hit>,
    reader: &casement_text::Reader,
) -> Result<(Vec<Hit>, usize), ApiError> {
    let mut documents: Vec<DocRef<'_>> = hits.iter().map(|h| h.record.doc_ref()).collect();
    documents.sort_unstable();
    documents.dedup();
    let mut indexed: HashMap<(Option<String>, String), u64> = HashMap::new();
    for doc in documents {
        let state = store.document(doc).await.map_err(ApiError::store)?;
        if let Some(state) = state.filter(|s| !s.deleted && s.readable_by(reader)) {
            indexed.insert((state.tenant, state.doc_id), state.revision);
        }
    }
    let before = hits.len();
    let current: Vec<Hit> = hits
        .into_iter()
        .filter(|hit| {
            let key = (hit.record.tenant.clone(), hit.record.doc_id.clone());
            indexed.get(&key) == Some(&hit.record.revision)
        })
        .collect();
    let hidden = before - current.len();
    Ok((current, hidden))
}
