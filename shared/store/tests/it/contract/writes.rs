//! Writing and reading back: schema, reopen, exact read-back, payload-only updates,
//! tombstones.

use std::collections::HashMap;

use casement_store::{
    Access, Applied, IndexSettings, QueryFilter, SettingsCheck, Store, check_settings,
    delete_document,
};
use casement_text::{DocRef, TextConfig, plan_upsert};
use uuid::Uuid;

use super::{
    DIMENSION, GUIDE, Harness, assert_close, by_id, embed, index, markdown, plan_vectors, query,
};

/// A new store is empty; a reopened one has the same points, documents and answers.
pub async fn schema_and_reopen<H: Harness>(harness: &H) {
    let (before, hits_before) = {
        let store = harness.open().await;
        assert_eq!(store.dimension(), DIMENSION);
        let stats = store.stats().await.expect("stats");
        assert_eq!((stats.points, stats.documents, stats.tombstones), (0, 0, 0));
        index(&store, &markdown("guide", 1, None, GUIDE)).await;
        let stats = store.stats().await.expect("stats");
        assert_eq!((stats.points, stats.documents), (6, 1));
        let hits = store
            .query(&query(
                "how often do keys rotate",
                3,
                QueryFilter::default(),
            ))
            .await
            .expect("query");
        (store.records("guide").await.expect("records"), hits)
    };
    // Dropped: reopen from the same location.
    let store = harness.open().await;
    assert_eq!(
        by_id(store.records("guide").await.expect("records")),
        by_id(before)
    );
    let document = store
        .document("guide")
        .await
        .expect("document")
        .expect("indexed");
    assert_eq!((document.revision, document.sentence_count), (1, 6));
    let stats = store.stats().await.expect("stats");
    assert_eq!((stats.points, stats.documents), (6, 1));
    let hits = store
        .query(&query(
            "how often do keys rotate",
            3,
            QueryFilter::default(),
        ))
        .await
        .expect("query");
    assert_eq!(hits, hits_before);
    assert!(
        hits[0].record.sentence.contains("ninety days"),
        "{:?}",
        hits[0].record
    );
    // Writing after a reopen works too.
    index(
        &store,
        &markdown("guide", 2, None, &GUIDE.replace("ninety", "thirty")),
    )
    .await;
    assert_eq!(store.stats().await.expect("stats").points, 6);
}

/// What is written is read back exactly: records, vectors, document state.
pub async fn read_back_exactly<H: Harness>(harness: &H) {
    let store = harness.open().await;
    let (plan, applied) = index(&store, &markdown("guide", 7, Some("acme"), GUIDE)).await;
    assert_eq!(applied, Applied::Written);
    let stored = by_id(
        store
            .records(DocRef::new(Some("acme"), "guide"))
            .await
            .expect("records"),
    );
    assert_eq!(stored, by_id(plan.embed.clone()));
    assert_eq!(
        store
            .document(DocRef::new(Some("acme"), "guide"))
            .await
            .expect("document"),
        Some(plan.document.clone())
    );
    let ids: Vec<Uuid> = plan.embed.iter().map(|r| r.id).collect();
    let vectors = store.dense_vectors(&ids).await.expect("vectors");
    assert_eq!(vectors.len(), ids.len());
    for (record, expected) in plan.embed.iter().zip(plan_vectors(&plan)) {
        assert_close(&vectors[&record.id], &expected, &record.sentence);
    }
    assert!(store.records("missing").await.expect("records").is_empty());
    assert_eq!(store.document("missing").await.expect("document"), None);
    // A document is its id within its tenant: the same id without one is another.
    assert!(store.records("guide").await.expect("records").is_empty());
    assert_eq!(store.document("guide").await.expect("document"), None);
}

/// A sentence whose neighbours changed gets a payload-only update: its payload follows the
/// new revision and its vector is the one written first.
pub async fn payload_update_keeps_vector<H: Harness>(harness: &H) {
    let store = harness.open().await;
    let (first, _) = index(&store, &markdown("guide", 1, None, GUIDE)).await;
    let edited = GUIDE.replace(
        "Deploys run from the main branch.",
        "Deploys run from the main branch. They start at nine.",
    );
    let (second, _) = index(&store, &markdown("guide", 2, None, &edited)).await;
    assert_eq!(second.embed.len(), 1, "only the new sentence is embedded");
    assert!(
        !second.update_payload.is_empty(),
        "neighbours get payload updates"
    );
    let before: HashMap<Uuid, Vec<f32>> = first
        .embed
        .iter()
        .map(|r| r.id)
        .zip(plan_vectors(&first))
        .collect();
    let ids: Vec<Uuid> = second.update_payload.iter().map(|r| r.id).collect();
    let after = store.dense_vectors(&ids).await.expect("vectors");
    let stored = by_id(store.records("guide").await.expect("records"));
    for record in &second.update_payload {
        assert_close(&after[&record.id], &before[&record.id], &record.sentence);
        assert_eq!(&stored[&record.id], record, "payload follows revision 2");
        assert_eq!(stored[&record.id].revision, 2);
    }
    assert!(
        stored.values().all(|r| r.revision == 2),
        "every point is stamped"
    );
}

/// A delete leaves a tombstone; an upsert with an older or equal revision changes nothing;
/// a newer one brings the document back.
pub async fn delete_tombstone_stale<H: Harness>(harness: &H) {
    let store = harness.open().await;
    index(&store, &markdown("guide", 2, None, GUIDE)).await;
    index(
        &store,
        &markdown("other", 1, None, "# Other\n\nUnrelated text stays.\n"),
    )
    .await;
    assert_eq!(
        delete_document(&store, "guide", 3).await.expect("delete"),
        Applied::Written
    );
    assert!(store.records("guide").await.expect("records").is_empty());
    let tombstone = store
        .document("guide")
        .await
        .expect("document")
        .expect("tombstone");
    assert!(tombstone.deleted);
    assert_eq!(tombstone.revision, 3);
    let stats = store.stats().await.expect("stats");
    assert_eq!((stats.documents, stats.tombstones), (1, 1));
    // A late event of an older revision, planned as if the store were empty, and written
    // without the pipeline's fence: the store's own fence refuses it.
    for stale_revision in [2, 3] {
        let (plan, _) = plan_upsert(
            &[],
            &markdown("guide", stale_revision, None, GUIDE),
            &TextConfig::default(),
        )
        .expect("plan");
        let applied = store
            .apply(&plan, &plan_vectors(&plan))
            .await
            .expect("apply");
        assert_eq!(
            applied,
            Applied::Stale {
                indexed_revision: 3
            }
        );
        assert!(store.records("guide").await.expect("records").is_empty());
    }
    let hits = store
        .query(&query(
            "how often do keys rotate",
            10,
            QueryFilter::default(),
        ))
        .await
        .expect("query");
    assert!(hits.iter().all(|h| h.record.doc_id == "other"));
    // A newer revision applies.
    let (_, applied) = index(&store, &markdown("guide", 4, None, GUIDE)).await;
    assert_eq!(applied, Applied::Written);
    assert_eq!(store.records("guide").await.expect("records").len(), 6);
    assert_eq!(store.stats().await.expect("stats").tombstones, 0);
}

/// `documents` lists live documents, tombstones and sentence points left without a state
/// (a write cut off before its last step), each with its tenant and point count.
pub async fn documents_listing<H: Harness>(harness: &H) {
    let store = harness.open().await;
    assert!(store.documents().await.expect("documents").is_empty());
    index(&store, &markdown("guide", 2, None, GUIDE)).await;
    index(&store, &markdown("guide", 1, Some("acme"), GUIDE)).await;
    index(
        &store,
        &markdown("gone", 1, None, "# Gone\n\nThis page goes away.\n"),
    )
    .await;
    delete_document(&store, "gone", 2).await.expect("delete");
    // A new document whose write stops after its first sentence point: no state point yet.
    let (plan, _) = plan_upsert(
        &[],
        &markdown(
            "half",
            1,
            None,
            "# Half\n\nOnly the sentences got in. Then it stopped.\n",
        ),
        &TextConfig::default(),
    )
    .expect("plan");
    store
        .apply_first(&plan, &plan_vectors(&plan), 1)
        .await
        .expect("cut-off write");
    let listed: Vec<_> = store
        .documents()
        .await
        .expect("documents")
        .into_iter()
        .map(|d| {
            let state = d.state.as_ref().map(|s| (s.revision, s.deleted));
            (d.tenant, d.doc_id, state, d.points)
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (None, "gone".to_owned(), Some((2, true)), 0),
            (None, "guide".to_owned(), Some((2, false)), 6),
            (None, "half".to_owned(), None, 1),
            (
                Some("acme".to_owned()),
                "guide".to_owned(),
                Some((1, false)),
                6
            ),
        ]
    );
}

/// The index's settings: none on a new index, recorded by a writer's check, kept across a
/// reopen; a reader must match the model and radius (not the context), a writer all three.
pub async fn settings_recorded_and_checked<H: Harness>(harness: &H) {
    let ours = IndexSettings {
        model: "all-minilm-l6-v2:fp32".into(),
        dimension: DIMENSION,
        probe: embed(&[casement_store::SETTINGS_PROBE.to_owned()]).remove(0),
        window_radius: 3,
        context: "structural".into(),
    };
    {
        let store = harness.open().await;
        assert_eq!(store.settings().await.expect("settings"), None);
        assert_eq!(
            check_settings(&store, &ours, Access::Read)
                .await
                .expect("read"),
            SettingsCheck::Unrecorded
        );
        assert_eq!(store.settings().await.expect("settings"), None);
        index(&store, &markdown("guide", 1, None, GUIDE)).await;
        assert_eq!(
            check_settings(&store, &ours, Access::Write)
                .await
                .expect("write"),
            SettingsCheck::Recorded { documents: 1 }
        );
    }
    let store = harness.open().await;
    assert_eq!(
        store.settings().await.expect("settings"),
        Some(ours.clone())
    );
    // The settings point is no document and no sentence.
    assert_eq!(store.documents().await.expect("documents").len(), 1);
    let stats = store.stats().await.expect("stats");
    assert_eq!((stats.documents, stats.points), (1, 6));
    for access in [Access::Read, Access::Write] {
        assert_eq!(
            check_settings(&store, &ours, access).await.expect("match"),
            SettingsCheck::Match
        );
    }
    let other_context = IndexSettings {
        context: "none".into(),
        ..ours.clone()
    };
    assert_eq!(
        check_settings(&store, &other_context, Access::Read)
            .await
            .expect("a reader does not situate sentences"),
        SettingsCheck::Match
    );
    let refused = |settings: IndexSettings, access| {
        let store = &store;
        async move {
            check_settings(store, &settings, access)
                .await
                .expect_err("refused")
                .to_string()
        }
    };
    let error = refused(other_context, Access::Write).await;
    assert!(
        error.contains("situated by `structural`, this process's by `none`"),
        "{error}"
    );
    // The model is what its probe vector says, not its name: the same vectors under
    // another directory name match, other vectors under the same name do not.
    let renamed = IndexSettings {
        model: "minilm-in-another-directory:fp32".into(),
        ..ours.clone()
    };
    assert_eq!(
        check_settings(&store, &renamed, Access::Read)
            .await
            .expect("same probe"),
        SettingsCheck::Match
    );
    let other_model = IndexSettings {
        probe: embed(&["another model would embed the probe elsewhere".to_owned()]).remove(0),
        ..ours.clone()
    };
    let error = refused(other_model, Access::Read).await;
    assert!(
        error.contains(
            "embedded with all-minilm-l6-v2:fp32 (384 dimensions), this process embeds with all-minilm-l6-v2:fp32 (384 dimensions); their vectors of one probe text have a cosine of 0."
        ),
        "{error}"
    );
    assert!(
        error.contains("Configure this query service as the index's indexer"),
        "{error}"
    );
    let other_radius = IndexSettings {
        window_radius: 2,
        ..ours
    };
    let error = refused(other_radius, Access::Read).await;
    assert!(
        error.contains("radius of 3 sentences, this process's 2"),
        "{error}"
    );
}
