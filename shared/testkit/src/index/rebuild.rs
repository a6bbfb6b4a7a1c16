//! Invariant 1 against a real store: what a stream of events left equals indexing only each
//! document's final revision from scratch.

use std::collections::BTreeMap;

use casement_events::revision_log::LogEvent;
use casement_inference::{Embed, cosine};
use casement_store::Store;
use casement_text::{SentenceRecord, TextConfig, plan_upsert};

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
    assert_equals_rebuild_with(store, events, check_vectors, &*super::model()).await;
}

/// [`assert_equals_rebuild`] with vectors from `model` (an index built with another).
pub async fn assert_equals_rebuild_with<S: Store>(
    store: &S,
    events: &[LogEvent],
    check_vectors: usize,
    model: &dyn Embed,
) {
    let report = rebuild_differences_with(store, events, check_vectors, model).await;
    assert!(
        report.differences.is_empty(),
        "{} differences from the rebuild, the first:\n{}",
        report.differences.len(),
        report
            .differences
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(report.vectors > 0 || check_vectors == 0);
}

/// What [`rebuild_differences`] compared, and every difference it found.
#[derive(Debug, Default)]
pub struct RebuildReport {
    pub documents: usize,
    pub tombstones: usize,
    pub records: usize,
    pub vectors: usize,
    pub differences: Vec<String>,
}

/// Compares the store with indexing only each document's final revision (see
/// [`assert_equals_rebuild`]) and lists every difference: document state (revision,
/// tombstone, sentence count), records (ids and payloads), vectors.
pub async fn rebuild_differences<S: Store>(
    store: &S,
    events: &[LogEvent],
    check_vectors: usize,
) -> RebuildReport {
    rebuild_differences_with(store, events, check_vectors, &*super::model()).await
}

/// [`rebuild_differences`] with vectors from `model`.
pub async fn rebuild_differences_with<S: Store>(
    store: &S,
    events: &[LogEvent],
    check_vectors: usize,
    model: &dyn Embed,
) -> RebuildReport {
    let mut report = RebuildReport::default();
    for (doc_id, event) in final_events(events) {
        report.documents += 1;
        let mut stored = store.records(&doc_id).await.expect("records");
        stored.sort_by_key(|r| r.id);
        let Some(state) = store.document(&doc_id).await.expect("document") else {
            report.differences.push(format!(
                "{doc_id}: no document state (final: {} at {})",
                event.change, event.revision
            ));
            continue;
        };
        if state.revision != event.revision {
            report.differences.push(format!(
                "{doc_id}: indexed revision {}, final {}",
                state.revision, event.revision
            ));
        }
        if event.is_delete() {
            report.tombstones += 1;
            if !state.deleted || !stored.is_empty() {
                report.differences.push(format!(
                    "{doc_id}: deleted in the log; tombstone {}, {} points",
                    state.deleted,
                    stored.len()
                ));
            }
            continue;
        }
        if state.deleted {
            report
                .differences
                .push(format!("{doc_id}: a tombstone, but live in the log"));
        }
        let revision = event.to_revision().expect("revision");
        let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
        let mut rebuild = plan.embed;
        rebuild.sort_by_key(|r| r.id);
        report.records += stored.len();
        if stored != rebuild {
            report.differences.push(format!(
                "{doc_id}: {} records, the rebuild {}; first differing: {}",
                stored.len(),
                rebuild.len(),
                stored
                    .iter()
                    .zip(&rebuild)
                    .find(|(a, b)| a != b)
                    .map_or_else(|| "none".to_owned(), |(a, b)| record_difference(a, b))
            ));
            continue;
        }
        if state.sentence_count != rebuild.len() {
            report.differences.push(format!(
                "{doc_id}: state counts {} sentences, {} records",
                state.sentence_count,
                rebuild.len()
            ));
        }
        let sampled: Vec<_> = stored.iter().step_by(check_vectors.max(1)).collect();
        if sampled.is_empty() || check_vectors == 0 {
            continue;
        }
        let ids: Vec<_> = sampled.iter().map(|r| r.id).collect();
        let got = store.dense_vectors(&ids).await.expect("vectors");
        let inputs: Vec<String> = sampled.iter().map(|r| r.embedding_input()).collect();
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let want = model.embed(&refs).expect("embed");
        for (id, want) in ids.iter().zip(&want) {
            match got.get(id) {
                Some(got) if cosine(got, want) > 0.9999 => report.vectors += 1,
                got => report.differences.push(format!(
                    "{doc_id} {id}: vector differs (cosine {:?})",
                    got.map(|g| cosine(g, want))
                )),
            }
        }
    }
    report
}

/// The fields in which two records differ, each as stored → rebuilt.
fn record_difference(stored: &SentenceRecord, rebuilt: &SentenceRecord) -> String {
    let fields = |r: &SentenceRecord| match serde_json::to_value(r) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (a, b) = (fields(stored), fields(rebuilt));
    let differing: Vec<String> = a
        .iter()
        .filter(|(key, value)| b.get(*key) != Some(*value))
        .map(|(key, value)| {
            format!(
                "{key}: {value} → {}",
                b.get(key).unwrap_or(&serde_json::Value::Null)
            )
        })
        .collect();
    format!(
        "{} {:?}: {}",
        stored.id,
        stored.sentence,
        differing.join("; ")
    )
}
