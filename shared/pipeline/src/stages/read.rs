//! Read stage: the document's sentence records as the index holds them. The index is the
//! state (DESIGN.md): what the differ plans against, so a half-applied write heals.

use casement_store::Store;
use casement_text::{DocRef, SentenceRecord};

use crate::outcome::RetryStage;
use crate::processor::ProcessError;

pub async fn run<S: Store>(
    store: &S,
    doc: DocRef<'_>,
) -> Result<Vec<SentenceRecord>, ProcessError> {
    store
        .records(doc)
        .await
        .map_err(ProcessError::store(RetryStage::Read))
}
