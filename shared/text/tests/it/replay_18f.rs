//! Replays every revision of the 18F Handbook sample (2,025 real events over 95 pages:
//! creates, edits, renames, deletes) through fence + segment + diff into an in-memory index,
//! and checks after every event that the document equals a rebuild from its revision.

use crate::common;

use casement_text::{MemoryIndex, TextConfig};
use common::{assert_same_document, plan_event, read_events, rebuild, shared_data};

#[test]
fn incremental_equals_rebuild_after_every_revision_of_the_18f_sample() {
    let events = read_events(&shared_data().join("revisions/18f-handbook/sample.jsonl"));
    assert_eq!(events.len(), 2025, "the sample has 2,025 events");
    let config = TextConfig::default();
    let mut index = MemoryIndex::new();
    let (mut renames, mut deletes, mut reused, mut embedded, mut rebuilt) = (0, 0, 0, 0, 0);
    for event in &events {
        let plan = plan_event(&index, event, &config).expect("corpus revisions are increasing");
        embedded += plan.embed.len();
        reused += plan.reused_sections;
        if event.change == "rename" {
            renames += 1;
            assert!(
                plan.embed.is_empty(),
                "rename of {} embeds nothing",
                event.doc_id
            );
        }
        index.apply(&plan);
        let what = format!("{} r{} ({})", event.doc_id, event.revision, event.change);
        if event.is_delete() {
            deletes += 1;
            assert!(
                index.points(&event.doc_id).is_none(),
                "{what}: points left after delete"
            );
            assert!(
                index.document(&event.doc_id).is_some_and(|d| d.deleted),
                "{what}: tombstone"
            );
            // A redelivered older revision cannot resurrect it.
            let mut older = event.clone();
            older.change = "update".into();
            older.revision -= 1;
            assert!(
                plan_event(&index, &older, &config).is_none(),
                "{what}: resurrected"
            );
            continue;
        }
        let expected = rebuild(&event.to_revision(), &config);
        rebuilt += expected.point_count();
        assert_same_document(&index, &expected, &event.doc_id, &what);
        // Planning the revision just applied (a redelivery) changes nothing.
        let again = plan_event(&index, event, &config).expect("equal revision is re-planned");
        assert!(again.is_noop(), "{what}: re-plan is not a no-op");
    }
    assert_eq!(
        (renames, deletes),
        (222, 25),
        "the sample's renames and deletes were replayed"
    );
    assert!(reused > 0, "unchanged sections were not re-segmented");
    assert!(
        embedded * 4 < rebuilt,
        "incremental embedding ({embedded}) should be far below re-embedding every revision ({rebuilt})"
    );
}
