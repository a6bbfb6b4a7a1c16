//! The processing core on Qdrant Edge with the real model (`make models`): the bundled
//! 18F sample replayed event by event equals a rebuild; redelivery writes nothing new; a
//! revert costs no model call; an older upsert after a delete changes nothing; a repeated
//! delete is stale and a tombstone keeps the document's title, url and tenant, also when
//! its delete was cut off after the points were removed.

use casement_events::{Change, Event, EventFormat};
use casement_inference::Embed;
use casement_pipeline::EnrichConfig;
use casement_pipeline::Metrics;
use casement_pipeline::{Outcome, Processor};
use casement_store::{EdgeStore, Store};
use casement_testkit::model;
use casement_text::{DocRef, TextConfig, plan_upsert};

fn processor(dir: &std::path::Path) -> Processor<EdgeStore> {
    let store = casement_testkit::open_store(dir, model().dimension());
    casement_testkit::processor(store, model(), &EnrichConfig::default(), &Metrics::new())
}

fn events() -> Vec<Event> {
    casement_testkit::read_log(&casement_testkit::sample_log())
        .iter()
        .map(|e| Event {
            change: if e.is_delete() {
                Change::Delete {
                    tenant: None,
                    doc_id: e.doc_id.clone(),
                    revision: Some(e.revision),
                }
            } else {
                Change::Upsert(e.to_revision().expect("revision"))
            },
            format: EventFormat::Native,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_stream_equals_a_rebuild_and_redelivery_is_free() {
    let dir = tempfile::tempdir().expect("temp dir");
    let processor = processor(dir.path());
    let events = events();
    let mut embedded = 0;
    for event in &events {
        match processor.process(event).await.expect("process") {
            Outcome::Applied(d) | Outcome::Deleted(d) => embedded += d.embedded,
            other => panic!("the sample is in order: {other:?}"),
        }
        // Redelivery (at-least-once): nothing is embedded or written again.
        assert_eq!(
            processor.process(event).await.expect("redelivery"),
            Outcome::Stale {
                indexed_revision: event.revision().expect("the sample has revisions")
            },
            "{}",
            event.doc_id()
        );
    }
    assert!(embedded > 0);
    let mut last = std::collections::BTreeMap::new();
    for event in &events {
        last.insert(event.doc_id().to_owned(), event.change.clone());
    }
    for (doc_id, change) in last {
        let mut stored = processor.store.records(&doc_id).await.expect("records");
        stored.sort_by_key(|r| r.id);
        match change {
            Change::Upsert(revision) => {
                let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
                let mut rebuild = plan.embed;
                rebuild.sort_by_key(|r| r.id);
                assert_eq!(stored, rebuild, "{doc_id}");
            }
            Change::Delete { .. } => assert!(stored.is_empty(), "{doc_id} deleted"),
            Change::Fetch(_) | Change::Restore(_) => panic!("a revision log has no undeletes"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revert_costs_no_model_call_and_a_tombstone_fences_older_upserts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let processor = processor(dir.path());
    let upsert = |revision: u64, content: &str| Event {
        change: Change::Upsert(casement_text::Revision {
            access: None,
            metadata: Default::default(),
            doc_id: "kb/reset".into(),
            revision,
            title: Some("Reset".into()),
            url: None,
            tenant: None,
            format: casement_text::Format::Markdown,
            content: content.into(),
            revision_url: None,
        }),
        format: EventFormat::Native,
    };
    let v1 = "# Reset\n\nHold the button for ten seconds. The light blinks twice.\n";
    let v2 = "# Reset\n\nHold the button for twenty seconds. The light blinks twice.\n";
    let Outcome::Applied(first) = processor.process(&upsert(1, v1)).await.expect("v1") else {
        panic!("applies")
    };
    assert_eq!(first.embedded, 2);
    let Outcome::Applied(edit) = processor.process(&upsert(2, v2)).await.expect("v2") else {
        panic!("applies")
    };
    assert_eq!((edit.embedded, edit.deleted), (1, 1));
    let Outcome::Applied(revert) = processor.process(&upsert(3, v1)).await.expect("v3") else {
        panic!("applies")
    };
    assert_eq!(
        (revert.embedded, revert.reused),
        (0, 1),
        "the old vector comes from the cache"
    );
    let delete = Event {
        change: Change::Delete {
            tenant: None,
            doc_id: "kb/reset".into(),
            revision: Some(4),
        },
        format: EventFormat::Native,
    };
    assert!(matches!(
        processor.process(&delete).await.expect("delete"),
        Outcome::Deleted(_)
    ));
    for revision in [2, 4] {
        assert_eq!(
            processor
                .process(&upsert(revision, v2))
                .await
                .expect("stale"),
            Outcome::Stale {
                indexed_revision: 4
            }
        );
    }
    assert!(
        processor
            .store
            .records("kb/reset")
            .await
            .expect("records")
            .is_empty()
    );
    assert!(matches!(
        processor.process(&upsert(5, v2)).await.expect("v5"),
        Outcome::Applied(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_delete_is_stale_and_a_tombstone_keeps_title_url_and_tenant() {
    let dir = tempfile::tempdir().expect("temp dir");
    let processor = processor(dir.path());
    let upsert = |doc_id: &str| Event {
        change: Change::Upsert(casement_text::Revision {
            access: None,
            metadata: Default::default(),
            doc_id: doc_id.into(),
            revision: 3,
            title: Some("Reset".into()),
            url: Some("https://kb.example/reset".into()),
            tenant: Some("acme".into()),
            format: casement_text::Format::Markdown,
            content: "# Reset\n\nHold the button for ten seconds. The light blinks twice.\n".into(),
            revision_url: None,
        }),
        format: EventFormat::Native,
    };
    let delete = |doc_id: &str| Event {
        change: Change::Delete {
            tenant: Some("acme".into()),
            doc_id: doc_id.into(),
            revision: Some(4),
        },
        format: EventFormat::Native,
    };
    let kept = |state: Option<casement_text::DocumentState>| {
        let state = state.expect("a tombstone");
        assert!(state.deleted);
        assert_eq!(state.revision, 4);
        (state.title, state.url, state.tenant)
    };
    let expected = (
        "Reset".to_owned(),
        Some("https://kb.example/reset".to_owned()),
        Some("acme".to_owned()),
    );

    processor.process(&upsert("kb/a")).await.expect("upsert");
    assert!(matches!(
        processor.process(&delete("kb/a")).await.expect("delete"),
        Outcome::Deleted(_)
    ));
    assert_eq!(
        processor.process(&delete("kb/a")).await.expect("again"),
        Outcome::Stale {
            indexed_revision: 4
        },
        "a repeated delete changes nothing"
    );
    let without_revision = Event {
        change: Change::Delete {
            tenant: Some("acme".into()),
            doc_id: "kb/a".into(),
            revision: None,
        },
        format: EventFormat::Native,
    };
    assert!(matches!(
        processor
            .process(&without_revision)
            .await
            .expect("tombstone event"),
        Outcome::Stale { .. }
    ));
    let state = processor
        .store
        .document(DocRef::new(Some("acme"), "kb/a"))
        .await
        .expect("state");
    assert_eq!(kept(state), expected);

    // Of a document never indexed, a delete without a revision has nothing to do (stale, no
    // record); one with a revision leaves a tombstone that fences a late older upsert.
    let never = |revision| Event {
        change: Change::Delete {
            tenant: None,
            doc_id: "kb/never".into(),
            revision,
        },
        format: EventFormat::Native,
    };
    assert_eq!(
        processor
            .process(&never(None))
            .await
            .expect("tombstone event"),
        Outcome::Stale {
            indexed_revision: 0
        }
    );
    assert!(
        processor
            .store
            .document("kb/never")
            .await
            .expect("state")
            .is_none()
    );
    assert!(matches!(
        processor.process(&never(Some(9))).await.expect("delete"),
        Outcome::Deleted(_)
    ));
    let state = processor.store.document("kb/never").await.expect("state");
    assert!(state.is_some_and(|s| s.deleted && s.revision == 9));

    // A delete cut off after its points went (before its tombstone was written) is
    // replanned from no records: the tombstone still gets the last title, url and tenant.
    processor.process(&upsert("kb/b")).await.expect("upsert");
    let store = &processor.store;
    let current = store
        .records(DocRef::new(Some("acme"), "kb/b"))
        .await
        .expect("records");
    let indexed = store
        .document(DocRef::new(Some("acme"), "kb/b"))
        .await
        .expect("state");
    let plan = casement_text::plan_delete(
        &current,
        indexed.as_ref(),
        DocRef::new(Some("acme"), "kb/b"),
        4,
    );
    store
        .apply_first(&plan, &[], plan.delete.len())
        .await
        .expect("cut-off delete");
    assert!(
        store
            .records(DocRef::new(Some("acme"), "kb/b"))
            .await
            .expect("records")
            .is_empty()
    );
    assert!(
        !store
            .document(DocRef::new(Some("acme"), "kb/b"))
            .await
            .expect("state")
            .expect("old")
            .deleted
    );
    assert!(matches!(
        processor
            .process(&delete("kb/b"))
            .await
            .expect("redelivered delete"),
        Outcome::Deleted(_)
    ));
    assert_eq!(
        kept(
            store
                .document(DocRef::new(Some("acme"), "kb/b"))
                .await
                .expect("state")
        ),
        expected
    );
}

/// A document is its id within its tenant: two tenants' documents of the same id keep
/// their own points, states and tombstones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_with_the_same_doc_id_keep_both_documents() {
    let dir = tempfile::tempdir().expect("temp dir");
    let processor = processor(dir.path());
    let upsert = |tenant: &str, revision: u64, content: &str| Event {
        change: Change::Upsert(casement_text::Revision {
            access: None,
            metadata: Default::default(),
            doc_id: "faq/reset".into(),
            revision,
            title: Some(format!("{tenant} reset")),
            url: None,
            tenant: Some(tenant.into()),
            format: casement_text::Format::Markdown,
            content: content.into(),
            revision_url: None,
        }),
        format: EventFormat::Native,
    };
    let acme = DocRef::new(Some("acme"), "faq/reset");
    let globex = DocRef::new(Some("globex"), "faq/reset");
    let same = "# Reset\n\nHold the button for ten seconds.\n";
    processor
        .process(&upsert("acme", 5, same))
        .await
        .expect("acme");
    // Another tenant, the same id, text and a lower revision: not stale, not shared.
    let Outcome::Applied(globex_first) = processor
        .process(&upsert("globex", 2, same))
        .await
        .expect("globex")
    else {
        panic!("applies")
    };
    assert_eq!(globex_first.embedded + globex_first.reused, 1);
    let store = &processor.store;
    let records = |doc| async move { store.records(doc).await.expect("records") };
    let (a, g) = (records(acme).await, records(globex).await);
    assert_eq!((a.len(), g.len()), (1, 1));
    assert_ne!(a[0].id, g[0].id, "each tenant has its own point");
    assert_eq!(a[0].tenant.as_deref(), Some("acme"));
    assert_eq!(g[0].tenant.as_deref(), Some("globex"));
    assert!(store.document("faq/reset").await.expect("state").is_none());

    let delete = Event {
        change: Change::Delete {
            doc_id: "faq/reset".into(),
            tenant: Some("acme".into()),
            revision: Some(6),
        },
        format: EventFormat::Native,
    };
    assert!(matches!(
        processor.process(&delete).await.expect("delete"),
        Outcome::Deleted(_)
    ));
    assert!(records(acme).await.is_empty());
    assert_eq!(
        records(globex).await,
        g,
        "the other tenant's document is untouched"
    );
    let state = |doc| async move { store.document(doc).await.expect("state").expect("kept") };
    assert!(state(acme).await.deleted);
    let kept = state(globex).await;
    assert_eq!((kept.deleted, kept.revision), (false, 2));
}
