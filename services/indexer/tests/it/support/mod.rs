//! Shared by the indexer's tests: the real model and Qdrant Edge, a Kafka broker (librdkafka's
//! mock cluster, or the standalone broker at `KAFKA_BOOTSTRAP`), the 18F revision corpus,
//! and the rebuild a stream must end equal to.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use casement_indexer::config::{IndexerConfig, KafkaConfig};
use casement_inference::Embed;
use casement_pipeline::{EnrichConfig, Metrics, Processor};
use casement_store::{EdgeStore, Store};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::{Offset, TopicPartitionList};

#[allow(unused_imports)] // Each test binary uses some of them.
pub use casement_testkit::{assert_equals_rebuild, final_events, model, read_log};

pub fn open_store(dir: &Path) -> EdgeStore {
    casement_testkit::open_store(dir, model().dimension())
}

/// The store a test's pipeline writes: Qdrant Edge in `<dir>/index`, or, with
/// `QDRANT_URL` set, a collection of its own on that Qdrant server (`QDRANT_API_KEY` if
/// it wants one), left behind for inspection.
pub async fn test_store(dir: &Path) -> casement_store::AnyStore {
    let mut config = casement_store::StoreConfig::default();
    config.edge.path = dir.join("index");
    if let Ok(url) = std::env::var("QDRANT_URL") {
        config.backend = casement_store::Backend::Server;
        config.server.url = url;
        config.server.api_key = std::env::var("QDRANT_API_KEY").ok().map(Into::into);
        config.collection = unique("casement_e2e").replace('-', "_");
        println!(
            "store: Qdrant server {}, collection {}",
            config.server.url, config.collection
        );
    }
    casement_store::AnyStore::open(&config, model().dimension())
        .await
        .expect("store")
}

pub fn processor_over<S: Store>(
    store: S,
    enrich: &EnrichConfig,
    metrics: &Metrics,
) -> Processor<S> {
    casement_testkit::processor(store, model(), enrich, metrics)
}

/// `../shared/data/revisions/18f-handbook/<name>` (next to the repository).
pub fn corpus(name: &str) -> PathBuf {
    casement_testkit::data(&format!("revisions/18f-handbook/{name}"))
}

/// Kills the child process when dropped (a failed assertion leaves no indexer behind).
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Kafka-protocol broker for one test: the mock cluster, or `KAFKA_BOOTSTRAP`.
pub struct Broker {
    pub bootstrap: String,
    pub mock: Option<MockCluster<'static, DefaultProducerContext>>,
}

impl Broker {
    /// `topics`: (name, partitions).
    pub fn start(topics: &[(&str, i32)]) -> Self {
        if let Ok(bootstrap) = std::env::var("KAFKA_BOOTSTRAP") {
            create_topics(&bootstrap, topics);
            return Self {
                bootstrap,
                mock: None,
            };
        }
        let mock = MockCluster::new(1).expect("mock cluster");
        for (topic, partitions) in topics {
            mock.create_topic(topic, *partitions, 1).expect("topic");
        }
        Self {
            bootstrap: mock.bootstrap_servers(),
            mock: Some(mock),
        }
    }

    pub fn is_mock(&self) -> bool {
        self.mock.is_some()
    }
}

fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<_> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(admin.create_topics(&new, &AdminOptions::new()))
        .expect("create topics");
}

/// Names unique per run, so a standalone broker can be reused across runs.
pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// Indexer settings for a test: fast group joins and commits.
pub fn config(bootstrap: &str, topic: &str, group: &str, dir: &Path) -> IndexerConfig {
    let mut config = IndexerConfig {
        kafka: KafkaConfig {
            bootstrap_servers: bootstrap.to_owned(),
            topic: topic.to_owned(),
            group_id: group.to_owned(),
            ..KafkaConfig::default()
        },
        ..IndexerConfig::default()
    };
    for (key, value) in [
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
        ("statistics.interval.ms", "1000"),
    ] {
        config
            .kafka
            .properties
            .insert(key.into(), toml::Value::String(value.into()));
    }
    config.store.edge.path = dir.join("index");
    config.admin.listen = "127.0.0.1:0".parse().unwrap();
    config.pipeline.commit_interval_ms = 100;
    config.pipeline.retry_max_ms = 1000;
    config
}

/// Committed offset per partition of `group` (-1001 = none).
pub fn committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("consumer");
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition(topic, p);
    }
    let committed = consumer
        .committed_offsets(list, Duration::from_secs(10))
        .expect("committed offsets");
    (0..partitions)
        .map(
            |p| match committed.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o,
                _ => -1001,
            },
        )
        .collect()
}

/// High watermark per partition.
pub fn high_watermarks(bootstrap: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .expect("watermarks")
                .1
        })
        .collect()
}

/// Asserts the broker still holds every message of `topic` (the mock cluster keeps at
/// most 5 MB per partition and drops the oldest beyond that).
pub fn assert_log_complete(bootstrap: &str, topic: &str, partitions: i32) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    for p in 0..partitions {
        let (low, _) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .expect("watermarks");
        assert_eq!(
            low, 0,
            "partition {p} of {topic} lost its oldest messages (broker retention)"
        );
    }
}

/// Waits until the group's committed offsets reach the high watermarks.
pub async fn wait_committed_to_end(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) {
    let (bootstrap, group, topic) = (bootstrap.to_owned(), group.to_owned(), topic.to_owned());
    let started = Instant::now();
    loop {
        let (b, g, t) = (bootstrap.clone(), group.clone(), topic.clone());
        let (committed, ends) = tokio::task::spawn_blocking(move || {
            (
                committed(&b, &g, &t, partitions),
                high_watermarks(&b, &t, partitions),
            )
        })
        .await
        .unwrap();
        // A partition that never had a message has no committed offset: it is at its end.
        let committed: Vec<i64> = committed.iter().map(|&c| c.max(0)).collect();
        if committed == ends {
            return;
        }
        assert!(
            started.elapsed() < timeout,
            "offsets not committed to the end after {timeout:?}: committed {committed:?}, end {ends:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
