//! Cut-off writes heal: the index itself is the state.

use std::collections::BTreeMap;
use std::path::PathBuf;

use casement_store::{Applied, Store};
use casement_text::{ChangePlan, Revision, TextConfig, plan_delete, plan_upsert};
use serde::Deserialize;
use uuid::Uuid;

use super::{Harness, assert_close, by_id, plan_vectors};

#[derive(Deserialize)]
struct SampleEvent {
    doc_id: String,
    revision: u64,
    title: Option<String>,
    format: String,
    content: String,
    change: String,
    path: Option<String>,
}

impl SampleEvent {
    fn revision(&self) -> Revision {
        Revision {
            access: None,
            metadata: Default::default(),
            doc_id: self.doc_id.clone(),
            revision: self.revision,
            title: self.title.clone(),
            url: self.path.clone(),
            tenant: None,
            format: self.format.parse().expect("format"),
            content: self.content.clone(),
            revision_url: None,
        }
    }
}

fn sample_events() -> Vec<SampleEvent> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sample/18f-handbook/revisions.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).expect("sample line"))
        .collect()
}

/// xorshift64*: a seeded, dependency-free source of cut-off points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

/// Every event of the sample is first written only up to a random operation (a crash),
/// then planned again against what the store returns and applied: the store ends equal
/// to indexing each document's last revision from scratch (records and vectors).
pub async fn cut_off_write_heals<H: Harness>(harness: &H, seed: u64) {
    let store = harness.open().await;
    let config = TextConfig::default();
    let mut rng = Rng(seed | 1);
    let mut last: BTreeMap<String, Option<Revision>> = BTreeMap::new();
    for event in sample_events() {
        let revision = event.revision();
        let plan = plan_event(&store, &event, &revision, &config).await;
        let cut = rng.below(plan.operations().count() + 1);
        store
            .apply_first(&plan, &plan_vectors(&plan), cut)
            .await
            .expect("partial apply");
        // Redelivery: plan again from the index itself.
        let healed = plan_event(&store, &event, &revision, &config).await;
        assert_eq!(
            store
                .apply(&healed, &plan_vectors(&healed))
                .await
                .expect("apply"),
            Applied::Written
        );
        let redelivered = plan_event(&store, &event, &revision, &config).await;
        assert!(redelivered.is_noop(), "a third delivery changes nothing");
        last.insert(
            event.doc_id.clone(),
            (event.change != "delete").then_some(revision),
        );
    }
    for (doc_id, revision) in last {
        let stored = by_id(store.records(&doc_id).await.expect("records"));
        let Some(revision) = revision else {
            assert!(stored.is_empty(), "{doc_id} was deleted");
            assert!(
                store
                    .document(&doc_id)
                    .await
                    .expect("doc")
                    .expect("tombstone")
                    .deleted
            );
            continue;
        };
        let (rebuild, _) = plan_upsert(&[], &revision, &config).expect("plan");
        assert_eq!(
            stored,
            by_id(rebuild.embed.clone()),
            "{doc_id}: records equal a rebuild"
        );
        let ids: Vec<Uuid> = rebuild.embed.iter().map(|r| r.id).collect();
        let vectors = store.dense_vectors(&ids).await.expect("vectors");
        for (record, expected) in rebuild.embed.iter().zip(plan_vectors(&rebuild)) {
            assert_close(&vectors[&record.id], &expected, &record.sentence);
        }
        let document = store.document(&doc_id).await.expect("doc").expect("state");
        assert_eq!(document, rebuild.document, "{doc_id}: document state");
    }
}

/// The plan for one event, from what the store holds now.
async fn plan_event<S: Store>(
    store: &S,
    event: &SampleEvent,
    revision: &Revision,
    config: &TextConfig,
) -> ChangePlan {
    let current = store.records(&event.doc_id).await.expect("records");
    if event.change == "delete" {
        let indexed = store.document(&event.doc_id).await.expect("document");
        plan_delete(
            &current,
            indexed.as_ref(),
            (&event.doc_id).into(),
            event.revision,
        )
    } else {
        plan_upsert(&current, revision, config).expect("plan").0
    }
}
