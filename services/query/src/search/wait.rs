//! Wait stage (read-your-writes): a search with `min_revision` waits until each named
//! document's indexed revision reaches the one asked for, or answers 409.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use casement_store::Store;
use casement_text::DocRef;

use crate::error::ApiError;

/// Polls the documents' indexed revisions every 20 ms until each reaches the one asked for,
/// or answers 409 with the revision the index holds once `max_wait` has passed. The
/// documents are the request's tenant's (another tenant's document of the same id is
/// another document, never disclosed), and one the reader may not read is as one never
/// indexed (revision 0): the answer never tells its revision. `index` gives the served index at each poll: a
/// migration's swap during the wait moves the write to the new one.
pub async fn wait_for<S: Store>(
    index: impl Fn() -> std::sync::Arc<super::SearchIndex<S>>,
    wanted: &BTreeMap<String, u64>,
    tenant: Option<&str>,
    reader: &casement_text::Reader,
    max_wait: Duration,
) -> Result<(), ApiError> {
    let deadline = Instant::now() + max_wait;
    loop {
        let mut behind = None;
        let served = index();
        for (doc_id, &revision) in wanted {
            let doc = DocRef::new(tenant, doc_id);
            let state = served.store.document(doc).await.map_err(ApiError::store)?;
            let indexed = state
                .filter(|s| s.readable_by(reader))
                .map_or(0, |s| s.revision);
            if indexed < revision {
                behind = Some((doc_id, indexed, revision));
                break;
            }
        }
        match behind {
            None => return Ok(()),
            Some((doc_id, indexed, wanted)) if Instant::now() >= deadline => {
                return Err(ApiError::RevisionNotIndexed {
                    doc_id: doc_id.clone(),
                    indexed,
                    wanted,
                });
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}
