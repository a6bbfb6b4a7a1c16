//! Failures mid-stream lose nothing: a store that fails half-way through writes for a
//! while (the events retry with backoff, nothing is committed past them), then a broker
//! outage (mock cluster broker down, then up). The stream ends equal to a rebuild.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use casement_indexer::config::IndexerConfig;
use casement_indexer::{replay, service};
use casement_pipeline::{Metrics, RetryStage};
use casement_store::{Applied, EdgeStore, Error, Hit, HybridQuery, Result, Store, StoreStats};
use casement_text::{ChangePlan, DocRef, DocumentState, SentenceRecord};
use support::{Broker, config, corpus, open_store, processor_over, read_log, unique};
use uuid::Uuid;

/// Qdrant Edge, with a switch that makes writes fail after half their operations (a write
/// cut off by a store outage).
#[derive(Debug, Clone)]
struct FailingStore {
    inner: EdgeStore,
    failing: Arc<AtomicBool>,
}

impl Store for FailingStore {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn document<'a>(
        &self,
        doc: impl Into<DocRef<'a>> + Send,
    ) -> Result<Option<DocumentState>> {
        self.inner.document(doc).await
    }
    async fn records<'a>(&self, doc: impl Into<DocRef<'a>> + Send) -> Result<Vec<SentenceRecord>> {
        self.inner.records(doc).await
    }
    async fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        if self.failing.load(Ordering::SeqCst) {
            let half = plan.operations().count() / 2;
            self.inner
                .apply_first(plan, vectors, half.min(count))
                .await?;
            return Err(Error::Unavailable("injected store failure".into()));
        }
        self.inner.apply_first(plan, vectors, count).await
    }
    async fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
        self.inner.query(query).await
    }
    async fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        self.inner.dense_vectors(ids).await
    }
    async fn stats(&self) -> Result<StoreStats> {
        self.inner.stats().await
    }
    async fn documents(&self) -> Result<Vec<casement_store::IndexedDocument>> {
        self.inner.documents().await
    }
    async fn settings(&self) -> Result<Option<casement_store::IndexSettings>> {
        self.inner.settings().await
    }
    async fn record_settings(&self, settings: &casement_store::IndexSettings) -> Result<()> {
        self.inner.record_settings(settings).await
    }
    async fn sync(&self) -> Result<()> {
        self.inner.sync().await
    }
}

/// Publishes the first `n` events of the 18F sample; returns the file they came from.
async fn replay_prefix(config: &IndexerConfig, dir: &Path, n: usize) -> PathBuf {
    let text = std::fs::read_to_string(corpus("sample.jsonl")).unwrap();
    let subset = dir.join("subset.jsonl");
    std::fs::write(&subset, text.lines().take(n).collect::<Vec<_>>().join("\n")).unwrap();
    replay::run(&config.kafka, &subset, None, false)
        .await
        .unwrap();
    subset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_and_a_broker_outage_mid_stream_lose_nothing() {
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, 3), (&format!("{topic}.dlq"), 1)]);
    let Some(mock) = &broker.mock else {
        println!("skipped: broker outages are injected through the mock cluster only");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let config = config(&broker.bootstrap, &topic, &group, dir.path());
    let subset = replay_prefix(&config, dir.path(), 500).await;

    let metrics = Metrics::new();
    let failing = Arc::new(AtomicBool::new(false));
    let store = FailingStore {
        inner: open_store(dir.path()),
        failing: failing.clone(),
    };
    let (observer, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let running = service::start(
        &config,
        processor_over(store.clone(), &config.enrich, &metrics),
        Some(observer),
    )
    .expect("start");
    let mut wait_for = async |n: usize| {
        for _ in 0..n {
            tokio::time::timeout(Duration::from_secs(120), finished.recv())
                .await
                .expect("progress")
                .expect("running");
        }
    };
    wait_for(60).await;
    failing.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The failing store refuses the durable write: retried at the write stage.
    let retries = metrics
        .retries
        .with_label_values(&[RetryStage::Write.as_str()])
        .get();
    assert!(retries > 0, "the failing store was retried");
    let committed_during = support::committed(&broker.bootstrap, &group, &topic, 3);
    failing.store(false, Ordering::SeqCst);
    println!("store failure: {retries} retries; committed meanwhile {committed_during:?}");

    wait_for(60).await;
    mock.broker_down(1).expect("broker down");
    tokio::time::sleep(Duration::from_secs(5)).await;
    mock.broker_up(1).expect("broker up");
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        3,
        Duration::from_secs(600),
    )
    .await;
    running.stop().await.expect("stop");

    let events = read_log(&subset);
    support::assert_equals_rebuild(&store.inner, &events, 5).await;
    let applied = ["applied", "deleted", "stale"]
        .iter()
        .map(|o| metrics.events.with_label_values(&[o]).get())
        .sum::<u64>();
    assert!(
        applied >= 500,
        "every event finished at least once ({applied})"
    );
    assert_eq!(
        metrics.events.with_label_values(&["dead_lettered"]).get(),
        0
    );
}

/// A second member joins mid-stream (partitions are revoked and reassigned), then the first
/// leaves: each revoke commits only the finished prefix, nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalances_mid_stream_lose_nothing() {
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, 4), (&format!("{topic}.dlq"), 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let config = config(&broker.bootstrap, &topic, &group, dir.path());
    let subset = replay_prefix(&config, dir.path(), 400).await;

    // Both members write to the same store (in production: the same Qdrant collection).
    let store = open_store(dir.path());
    let (metrics_a, metrics_b) = (Metrics::new(), Metrics::new());
    let (observer, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let a = service::start(
        &config,
        processor_over(store.clone(), &config.enrich, &metrics_a),
        Some(observer),
    )
    .expect("start a");
    for _ in 0..40 {
        tokio::time::timeout(Duration::from_secs(120), finished.recv())
            .await
            .expect("progress");
    }
    let b = service::start(
        &config,
        processor_over(store.clone(), &config.enrich, &metrics_b),
        None,
    )
    .expect("start b");
    // Let the group rebalance and both members work, then a leaves.
    let joined = std::time::Instant::now();
    while metrics_b.partitions.get() == 0 {
        assert!(
            joined.elapsed() < Duration::from_secs(60),
            "b never got partitions"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let split = (metrics_a.partitions.get(), metrics_b.partitions.get());
    tokio::time::sleep(Duration::from_secs(3)).await;
    a.stop().await.expect("stop a");
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        4,
        Duration::from_secs(600),
    )
    .await;
    b.stop().await.expect("stop b");
    println!("partitions a/b after b joined: {split:?}");
    assert!(
        split.0 > 0 && split.1 > 0,
        "the partitions were split: {split:?}"
    );
    let by_b = metrics_b.events.with_label_values(&["applied"]).get();
    assert!(by_b > 0, "b applied events after the rebalance");
    support::assert_equals_rebuild(&store, &read_log(&subset), 5).await;
}
