//! A model migration under a running Kafka indexer, on a Qdrant server (when `QDRANT_URL`
//! is set; skipped otherwise, as no Qdrant server binary comes from the package registries
//! here). The indexer (fp32) consumes the bundled sample and edits through the collection
//! alias; `casement migrate` (the all-in-one's binary, built beside this test's) builds the
//! int8 collection while edits keep arriving, and swaps the alias. The indexer notices:
//! its writes are refused, its committed offsets stop (nothing lost, nothing written with
//! the old model into the new collection) and `casement_index_replaced` is 1. Restarted
//! with int8 it goes on from its last commit into the new collection, which ends equal to a
//! rebuild of every event with the int8 model. Real broker protocol (librdkafka's mock
//! cluster), real Qdrant server, real models.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use casement_indexer::config::IndexerConfig;
use casement_indexer::{replay, service};
use casement_inference::{Embed, EmbedderConfig, Precision};
use casement_pipeline::Metrics;
use casement_pipeline::factory;
use casement_store::{AnyStore, Backend, Store};
use casement_testkit::{assert_equals_rebuild_with, eventually, read_log, sample_log};
use serde_json::json;
use support::{Broker, config, unique};

/// The all-in-one's binary, built by `cargo test --workspace` beside this test's.
fn casement_binary() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let binary = deps.parent().unwrap().parent().unwrap().join("casement");
    assert!(
        binary.exists(),
        "{} is not built: cargo build -p casement (or run with cargo test --workspace)",
        binary.display()
    );
    binary
}

fn int8() -> EmbedderConfig {
    EmbedderConfig {
        precision: Precision::Int8,
        batch_size: 1,
        ..EmbedderConfig::default()
    }
}

/// Writes `count` edits (a new page each) from number `first` as a revision log; its path.
fn edits(dir: &Path, first: usize, count: usize) -> PathBuf {
    let path = dir.join(format!("edits-{first}.jsonl"));
    let lines: String = (first..first + count)
        .map(|n| {
            json!({"doc_id": format!("kb:migration-note-{n:03}"), "revision": 1,
                   "title": format!("Migration note {n}"), "format": "markdown", "change": "create",
                   "content": format!("# Migration note {n}\n\nWritten while the index was migrated, note {n}.\n\n## Details\n\nNothing is lost on the way, note {n}.\n")})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&path, lines).unwrap();
    path
}

async fn start(
    config: &IndexerConfig,
    metrics: &Metrics,
) -> (service::Running, AnyStore, Arc<dyn Embed>) {
    let model = factory::load_model(&config.embedder).await.unwrap();
    let store = AnyStore::open(&config.store, model.dimension())
        .await
        .unwrap();
    factory::check_index_settings(&store, &model, service::processor_config(config))
        .await
        .unwrap();
    let processor = factory::processor(
        service::processor_config(config),
        metrics,
        model.clone(),
        store.clone(),
    )
    .unwrap();
    (
        service::start(config, processor, None).unwrap(),
        store,
        model,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_under_a_running_kafka_indexer_loses_nothing() {
    let Ok(url) = std::env::var("QDRANT_URL") else {
        eprintln!("QDRANT_URL is not set: skipping the Qdrant server migration");
        return;
    };
    let binary = casement_binary();
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, 1), (&format!("{topic}.dlq"), 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let alias = unique("casement_kafka").replace('-', "_");
    let mut config = config(&broker.bootstrap, &topic, &group, dir.path());
    config.store.backend = Backend::Server;
    config.store.collection = alias.clone();
    config.store.server.url = url.clone();
    config.store.server.follow_secs = 1;
    config.store.server.timeout_secs = 5;
    let aliases = casement_store::Aliases::connect(&config.store).unwrap();

    // The sample through the fp32 indexer.
    let mut logs = vec![sample_log()];
    replay::run(&config.kafka, &sample_log(), None, false)
        .await
        .unwrap();
    let metrics = Metrics::new();
    let (running, store, _) = start(&config, &metrics).await;
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        1,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(aliases.target().await.unwrap(), Some(format!("{alias}.1")));

    // `casement migrate` to int8 with the indexer's store settings, while edits arrive.
    let mut migrate = Command::new(&binary)
        .arg("--data-dir")
        .arg(dir.path().join("migrate"))
        .args([
            "migrate",
            "--set",
            "embedder.precision=int8",
            "--set",
            "embedder.batch_size=1",
        ])
        .env_remove("CASEMENT_CONFIG")
        .env(
            "CASEMENT__EVAL__GOLDEN",
            sample_log().with_file_name("golden.jsonl"),
        )
        .env("CASEMENT__STORE__BACKEND", "server")
        .env("CASEMENT__STORE__COLLECTION", &alias)
        .env("CASEMENT__STORE__SERVER__URL", &url)
        .env("CASEMENT__STORE__SERVER__FOLLOW_SECS", "1")
        .env("CASEMENT__STORE__SERVER__TIMEOUT_SECS", "5")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut next = 1;
    let status = loop {
        if let Some(status) = migrate.try_wait().unwrap() {
            break status;
        }
        let log = edits(dir.path(), next, 1);
        replay::run(&config.kafka, &log, None, false).await.unwrap();
        logs.push(log);
        next += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let output = migrate.wait_with_output().unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(status.success(), "{said}");
    assert!(
        said.contains("swapped") && said.contains("caught up:"),
        "{said}"
    );
    let second = format!("{alias}.2");
    assert_eq!(aliases.target().await.unwrap(), Some(second.clone()));
    assert!(next > 2, "edits arrived during the migration: {}", next - 1);

    // The fp32 indexer notices (follow_secs = 1): edits now wait in Kafka, uncommitted, and
    // nothing of them reaches either collection.
    eventually(
        Duration::from_secs(30),
        "the indexer notices the swap",
        || async { store.stats().await.unwrap().replaced },
    )
    .await;
    let waiting = edits(dir.path(), next, 3);
    replay::run(&config.kafka, &waiting, None, false)
        .await
        .unwrap();
    logs.push(waiting);
    next += 3;
    let ends = support::high_watermarks(&broker.bootstrap, &topic, 1);
    eventually(
        Duration::from_secs(30),
        "the refused writes are retried",
        || async {
            metrics.retries.with_label_values(&["write"]).get() > 0
                || metrics.retries.with_label_values(&["fence"]).get() > 0
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let committed = support::committed(&broker.bootstrap, &group, &topic, 1);
    assert!(
        committed[0] < ends[0],
        "committed {committed:?} past refused writes (end {ends:?})"
    );
    let new = casement_store::ServerStore::open(
        &{
            let mut exact = config.store.clone();
            exact.collection = second.clone();
            exact.exact_collection = true;
            exact
        },
        384,
    )
    .await
    .unwrap();
    let last = format!("kb:migration-note-{:03}", next - 1);
    assert!(new.document(last.as_str()).await.unwrap().is_none());
    assert!(store.document(last.as_str()).await.unwrap().is_none());
    let stopped = tokio::time::timeout(Duration::from_secs(60), running.stop()).await;
    assert!(
        stopped.is_ok(),
        "the indexer stops while its writes are refused"
    );

    // Restarted with int8: from its last commit into the new collection.
    config.embedder = int8();
    let metrics = Metrics::new();
    let (running, store, model) = start(&config, &metrics).await;
    assert!(!store.stats().await.unwrap().replaced);
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        1,
        Duration::from_secs(120),
    )
    .await;
    running.stop().await.unwrap();
    let events: Vec<_> = logs.iter().flat_map(|log| read_log(log)).collect();
    assert_equals_rebuild_with(&new, &events, 1, model.as_ref()).await;
    aliases.drop_all().await.unwrap();
}
