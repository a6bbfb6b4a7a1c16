//! `SOAK_CLEAN=1`: the killed run's index against a clean run's, record by record.

use std::collections::BTreeSet;

use casement_events::revision_log::LogEvent;
use casement_store::{EdgeStore, Store};

/// The clean run's index against the killed run's, record by record (`SOAK_CLEAN=1`).
pub async fn compare_indexes(a: &EdgeStore, b: &EdgeStore, events: &[LogEvent]) -> Vec<String> {
    let ids: BTreeSet<&str> = events.iter().map(|e| e.doc_id.as_str()).collect();
    let mut differences = Vec::new();
    for &doc_id in &ids {
        let state_a = a.document(doc_id).await.unwrap();
        let state_b = b.document(doc_id).await.unwrap();
        if state_a != state_b {
            differences.push(format!(
                "{doc_id}: document state differs\n  clean:  {state_a:?}\n  killed: {state_b:?}"
            ));
        }
        let records_a = sorted_records(a, doc_id).await;
        let records_b = sorted_records(b, doc_id).await;
        if records_a != records_b {
            differences.push(format!(
                "{doc_id}: records differ (clean {}, killed {})\n{}",
                records_a.len(),
                records_b.len(),
                describe_record_difference(&records_a, &records_b)
            ));
        }
    }
    differences
}

async fn sorted_records(store: &EdgeStore, doc_id: &str) -> Vec<casement_text::SentenceRecord> {
    let mut records = store.records(doc_id).await.unwrap();
    records.sort_by_key(|r| r.id);
    records
}

fn describe_record_difference(
    a: &[casement_text::SentenceRecord],
    b: &[casement_text::SentenceRecord],
) -> String {
    let ids_a: BTreeSet<_> = a.iter().map(|r| r.id).collect();
    let ids_b: BTreeSet<_> = b.iter().map(|r| r.id).collect();
    let mut lines = Vec::new();
    for r in a.iter().filter(|r| !ids_b.contains(&r.id)).take(3) {
        lines.push(format!("  only clean:  r{} {:?}", r.revision, r.sentence));
    }
    for r in b.iter().filter(|r| !ids_a.contains(&r.id)).take(3) {
        lines.push(format!("  only killed: r{} {:?}", r.revision, r.sentence));
    }
    let differing = a
        .iter()
        .filter_map(|ra| Some((ra, b.iter().find(|rb| rb.id == ra.id)?)))
        .filter(|(ra, rb)| ra != rb);
    for (ra, rb) in differing.take(2) {
        lines.push(format!("  clean:  {ra:?}\n  killed: {rb:?}"));
    }
    lines.join("\n")
}
