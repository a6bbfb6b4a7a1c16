//! Invariant 1 against a real store: what a stream of events left equals indexing only each
//! document's final revision from scratch.

use std::collections::BTreeMap;

use casement_events::revision_log::LogEvent;
use casement_inference::{Embed, cosine};
use casement_store::Store;
use casement_text::{TextConfig, plan_upsert};

/// The final event of each document.
pub fn final_events(events: &[LogEvent]) -> BTreeMap<String, LogEvent> {
    let mut last = BTreeMap::new();
    for event in events {
        last.insert(event.doc_id.clone(), event.clone());
    }
    last
}

/// The store holds exactly what indexing only each document's final revision stores: the
/// same records (ids, payloads), document states, and vectors equal to a fresh embedding of
/// each record's embedding input (`check_vectors`: all, or every n-th record).
pub async fn assert_equals_rebuild<S: Store>(store: &S, events: &[LogEvent], check_vectors: usize) {
    let model = super::model();
    let mut vectors_checked = 0;
    for (doc_id, event) in final_events(events) {
        let mut stored = store.records(&doc_id).await.expect("records");
        stored.sort_by_key(|r| r.id);
        let state = store
            .document(&doc_id)
            .await
            .expect("document")
            .unwrap_or_else(|| {
                panic!(
                    "{doc_id}: no document state (final: {} at {})",
                    event.change, event.revision
                )
            });
        assert_eq!(state.revision, event.revision, "{doc_id}: indexed revision");
        if event.is_delete() {
            assert!(state.deleted, "{doc_id}: tombstone");
            assert!(
                stored.is_empty(),
                "{doc_id}: deleted, yet {} points",
                stored.len()
            );
            continue;
        }
        assert!(!state.deleted, "{doc_id}");
        let revision = event.to_revision().expect("revision");
        let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
        let mut rebuild = plan.embed;
        rebuild.sort_by_key(|r| r.id);
        assert_eq!(stored.len(), rebuild.len(), "{doc_id}: point count");
        assert_eq!(stored, rebuild, "{doc_id}: records equal the rebuild");
        assert_eq!(state.sentence_count as usize, rebuild.len(), "{doc_id}");
        let ids: Vec<_> = stored
            .iter()
            .map(|r| r.id)
            .step_by(check_vectors.max(1))
            .collect();
        if ids.is_empty() {
            continue;
        }
        let got = store.dense_vectors(&ids).await.expect("vectors");
        let inputs: Vec<String> = stored
            .iter()
            .step_by(check_vectors.max(1))
            .map(|r| r.embedding_input())
            .collect();
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let want = model.embed(&refs).expect("embed");
        for (id, want) in ids.iter().zip(&want) {
            let similarity = cosine(&got[id], want);
            assert!(
                similarity > 0.9999,
                "{doc_id} {id}: vector differs (cosine {similarity})"
            );
            vectors_checked += 1;
        }
    }
    assert!(vectors_checked > 0 || check_vectors == 0);
}
