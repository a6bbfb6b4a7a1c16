//! The mass-deletion guard on the Kafka topic: a burst of deletes is held, nothing is
//! committed past it, and a start that allows mass deletes applies it.

use std::time::Duration;

use casement_indexer::service;
use casement_pipeline::Metrics;
use casement_store::Store;

use super::{native, produce, send};
use crate::support::{self, Broker, config, open_store, processor_over, unique};

/// A burst of deletes on the topic (half the index at once, a CMS bug or a replayed
/// export): the first share's worth is applied, the rest held; nothing is committed past
/// the held deletes while the events after them are applied; a start with
/// `sources.allow_mass_delete` applies them and commits to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_deletes_is_held_uncommitted_until_allowed() {
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, 1), (&format!("{topic}.dlq"), 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let mut config = config(&broker.bootstrap, &topic, &group, dir.path());
    let producer = produce(&broker.bootstrap);
    let page = |n: usize| format!("kb/page-{n:02}");
    for n in 0..40 {
        let text = format!("# Page {n}\n\nPage {n} explains procedure number {n}.\n");
        send(
            &producer,
            &topic,
            None,
            Some(&native("upsert", &page(n), 1, &text)),
        )
        .await;
    }
    let store = open_store(dir.path());
    let start = |config: &casement_indexer::config::IndexerConfig, metrics: &Metrics| {
        service::start(
            config,
            processor_over(store.clone(), &config.enrich, metrics),
            None,
        )
        .expect("start")
    };
    let running = start(&config, &Metrics::new());
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        1,
        Duration::from_secs(300),
    )
    .await;
    running.stop().await.expect("stop");
    assert_eq!(store.stats().await.unwrap().documents, 40);

    // 20 deletes (half the index), then an edit of another page.
    for n in 0..20 {
        send(
            &producer,
            &topic,
            None,
            Some(&native("delete", &page(n), 2, "")),
        )
        .await;
    }
    let edit = "# Page 39\n\nPage 39 now explains the new procedure.\n";
    send(
        &producer,
        &topic,
        None,
        Some(&native("upsert", &page(39), 2, edit)),
    )
    .await;

    let metrics = Metrics::new();
    let running = start(&config, &metrics);
    let held = || metrics.deletes_held.with_label_values(&["kafka"]).get();
    let edited = || async {
        store
            .document(casement_text::DocRef::new(None, &page(39)))
            .await
            .unwrap()
            .is_some_and(|d| d.revision == 2)
    };
    casement_testkit::eventually(
        Duration::from_secs(120),
        "16 deletes held and the edit applied",
        || async { held() == 16 && edited().await },
    )
    .await;
    // Several commit intervals later, the position is still before the held deletes.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let committed = support::committed(&broker.bootstrap, &group, &topic, 1)[0];
    assert!(
        (40..60).contains(&committed),
        "committed {committed}: not past the held deletes (40..60)"
    );
    assert_eq!(
        store.stats().await.unwrap().documents,
        36,
        "4 of 40 deleted (10%)"
    );
    assert_eq!(metrics.events.with_label_values(&["deleted"]).get(), 4);
    running.stop().await.expect("stop");

    // Started with allow_mass_delete: the rest is applied and committed.
    config.sources.allow_mass_delete = true;
    let metrics = Metrics::new();
    let running = start(&config, &metrics);
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        1,
        Duration::from_secs(300),
    )
    .await;
    running.stop().await.expect("stop");
    assert_eq!(store.stats().await.unwrap().documents, 20);
    assert_eq!(metrics.deletes_held.with_label_values(&["kafka"]).get(), 0);
}
