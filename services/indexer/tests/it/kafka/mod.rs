//! The indexer against a Kafka-protocol broker (librdkafka's mock cluster, or the broker at
//! `KAFKA_BOOTSTRAP`), Qdrant Edge and the real model, in process: the 18F sample stream
//! ends equal to a rebuild with offsets committed to the end; malformed events are
//! dead-lettered with their reason while the good ones after them apply; the three event
//! formats are decoded from the real samples; stale revisions and deletes are fenced. With
//! `QDRANT_URL`, the first test writes to that Qdrant server instead of Qdrant Edge.
//! `deletes`: the mass-deletion guard on the topic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod deletes;

use crate::support;

use std::time::Duration;

use casement_indexer::kafka::producer::{
    HEADER_OFFSET, HEADER_PARTITION, HEADER_REASON, HEADER_TOPIC,
};
use casement_indexer::{replay, service};
use casement_pipeline::Metrics;
use casement_store::Store;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};
use support::{Broker, config, corpus, open_store, processor_over, read_log, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_18f_sample_stream_ends_equal_to_a_rebuild_with_offsets_committed_to_the_end() {
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, 3), (&format!("{topic}.dlq"), 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let config = config(&broker.bootstrap, &topic, &group, dir.path());
    let sample = corpus("sample.jsonl");
    let published = replay::run(&config.kafka, &sample, None, false)
        .await
        .expect("replay");
    assert_eq!(published.published, 2025);
    support::assert_log_complete(&broker.bootstrap, &topic, 3);

    let metrics = Metrics::new();
    let store = support::test_store(dir.path()).await;
    let processor = processor_over(store.clone(), &config.enrich, &metrics);
    let running = service::start(&config, processor, None).expect("start");
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        3,
        Duration::from_secs(900),
    )
    .await;
    let positions = running.stop().await.expect("stop");
    assert_eq!(
        positions.iter().map(|(_, o)| o).sum::<i64>(),
        2025,
        "{positions:?}"
    );

    let count = |outcome: &str| metrics.events.with_label_values(&[outcome]).get();
    println!(
        "outcomes: applied {} deleted {} stale {} dead-lettered {}",
        count("applied"),
        count("deleted"),
        count("stale"),
        count("dead_lettered")
    );
    assert_eq!(
        count("applied") + count("deleted"),
        2025,
        "every event applied once"
    );
    assert_eq!(count("deleted"), 25);
    assert_eq!((count("stale"), count("dead_lettered")), (0, 0));
    let events = read_log(&sample);
    support::assert_equals_rebuild(&store, &events, 5).await;
    let embedded = metrics.sentences.with_label_values(&["embedded"]).get();
    let stats = store.stats().await.unwrap();
    println!(
        "2025 events: {embedded} sentences embedded, {} points, {} documents",
        stats.points, stats.documents
    );
}

/// (key, value, dead-letter reason if any).
type StreamEntry = (Option<Vec<u8>>, Option<Vec<u8>>, Option<&'static str>);

fn produce(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap()
}

async fn send(producer: &FutureProducer, topic: &str, key: Option<&[u8]>, value: Option<&[u8]>) {
    let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).partition(0);
    if let Some(key) = key {
        record = record.key(key);
    }
    if let Some(value) = value {
        record = record.payload(value);
    }
    producer
        .send(record, Duration::from_secs(10))
        .await
        .expect("produce");
}

fn native(kind: &str, doc_id: &str, revision: u64, content: &str) -> Vec<u8> {
    let mut event = json!({"type": kind, "doc_id": doc_id, "revision": revision});
    if kind == "upsert" {
        event["format"] = json!("markdown");
        event["content"] = json!(content);
        event["title"] = json!("Reset");
    }
    serde_json::to_vec(&event).unwrap()
}

fn shared_event(path: &str) -> String {
    std::fs::read_to_string(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/events")
            .join(path),
    )
    .expect("../shared/data/events")
}

/// Reads every message of a one-partition topic.
fn read_all(bootstrap: &str, topic: &str, expected: usize) -> Vec<rdkafka::message::OwnedMessage> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut messages = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while messages.len() < expected && std::time::Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            messages.push(message.detach());
        }
    }
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_events_are_dead_lettered_and_every_format_and_fence_applies() {
    let topic = unique("mixed");
    let dlq = format!("{topic}.dlq");
    let broker = Broker::start(&[(&topic, 1), (&dlq, 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let mut config = config(&broker.bootstrap, &topic, &group, dir.path());
    config.events.max_event_bytes = 64 * 1024;
    config.events.debezium.doc_id_prefix = "products/".into();
    config.events.debezium.title = Some("name".into());
    config.events.debezium.content = "description".into();
    config.events.debezium.format = "text".into();
    let producer = produce(&broker.bootstrap);

    let v1 = "# Reset\n\nHold the button for ten seconds. The light blinks twice.\n";
    let v2 = "# Reset\n\nHold the button for twenty seconds. The light blinks twice.\n";
    let oversize = native("upsert", "kb/big", 1, &"Too long. ".repeat(8000));
    let no_doc_id = br#"{"type":"upsert","revision":1,"format":"text","content":"x"}"#;
    // The published page_change example, as an article (it is a redirect page, which
    // would delete), without its content: no fetch.api_url is set, so no_content.
    let mut page_change: Value = serde_json::from_str(&shared_event(
        "wikimedia/examples/mediawiki-page-change-1.2.0.example1.json",
    ))
    .unwrap();
    page_change["page"]["is_redirect"] = json!(false);
    let page_change = page_change.to_string();
    let mut with_content: Value = serde_json::from_str(&page_change).unwrap();
    with_content["revision"]["content_slots"]["main"]["content_body"] =
        json!("'''Example''' is a page.\n\n== History ==\nIt was edited twice.");
    let mut cloudevent: Value =
        serde_json::from_str(&shared_event("cloudevents/examples/json-object-data.json")).unwrap();
    cloudevent["data"] = json!({"type": "upsert", "doc_id": "kb/42", "revision": 7,
        "format": "markdown", "content": "# Pairing\n\nPress both buttons to pair the remote."});
    // (key, value, dead-letter reason if any), in stream order.
    let mut stream: Vec<StreamEntry> = vec![
        (
            Some(b"kb/reset".to_vec()),
            Some(native("upsert", "kb/reset", 2, v2)),
            None,
        ),
        (
            Some(b"kb/x".to_vec()),
            Some(b"{not json".to_vec()),
            Some("not_json"),
        ),
        (
            Some(b"kb/reset".to_vec()),
            Some(native("upsert", "kb/reset", 1, v1)),
            None,
        ), // stale
        (
            Some(b"kb/y".to_vec()),
            Some(vec![0xff, 0xfe, b'{']),
            Some("not_utf8"),
        ),
        (Some(b"kb/big".to_vec()), Some(oversize), Some("too_large")),
        (None, Some(no_doc_id.to_vec()), Some("schema")),
        (None, Some(page_change.into_bytes()), Some("no_content")),
        (None, Some(serde_json::to_vec(&with_content).unwrap()), None),
        (None, Some(serde_json::to_vec(&cloudevent).unwrap()), None),
        (
            Some(b"kb/reset".to_vec()),
            Some(native("delete", "kb/reset", 3, "")),
            None,
        ),
        (
            Some(b"kb/reset".to_vec()),
            Some(native("upsert", "kb/reset", 2, v2)),
            None,
        ), // stale
    ];
    for line in shared_event("debezium/mysql-inventory-products.jsonl").lines() {
        stream.push((None, Some(line.as_bytes().to_vec()), None));
    }
    for (key, value, _) in &stream {
        send(&producer, &topic, key.as_deref(), value.as_deref()).await;
    }

    let metrics = Metrics::new();
    let store = open_store(dir.path());
    let running = service::start(
        &config,
        processor_over(store.clone(), &config.enrich, &metrics),
        None,
    )
    .expect("start");
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        1,
        Duration::from_secs(300),
    )
    .await;
    running.stop().await.expect("stop");

    // Dead letters: original key and bytes, reason and source position in the headers.
    let expected: Vec<(usize, &str)> = stream
        .iter()
        .enumerate()
        .filter_map(|(i, (_, _, reason))| reason.map(|r| (i, r)))
        .collect();
    let letters = read_all(&broker.bootstrap, &dlq, expected.len());
    assert_eq!(
        letters.len(),
        expected.len(),
        "one dead letter per malformed event"
    );
    for (letter, (offset, reason)) in letters.iter().zip(&expected) {
        let header = |name: &str| {
            let headers = letter.headers().expect("headers");
            headers
                .iter()
                .find(|h| h.key == name)
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_else(|| panic!("header {name}"))
        };
        assert_eq!(header(HEADER_REASON), *reason);
        assert_eq!(header(HEADER_TOPIC), topic);
        assert_eq!(header(HEADER_PARTITION), "0");
        assert_eq!(header(HEADER_OFFSET), offset.to_string());
        assert_eq!(letter.key(), stream[*offset].0.as_deref(), "original key");
        assert_eq!(
            letter.payload(),
            stream[*offset].1.as_deref(),
            "original bytes"
        );
    }
    for reason in ["not_json", "not_utf8", "too_large", "schema", "no_content"] {
        assert_eq!(
            metrics.dead_letters.with_label_values(&[reason]).get(),
            1,
            "{reason}"
        );
    }

    // The good events after the bad ones applied; the fence held.
    let reset = store.document("kb/reset").await.unwrap().expect("state");
    assert!(
        reset.deleted && reset.revision == 3,
        "deleted at 3, then an older upsert: {reset:?}"
    );
    assert!(
        store.records("kb/reset").await.unwrap().is_empty(),
        "no resurrection"
    );
    assert_eq!(metrics.events.with_label_values(&["stale"]).get(), 2);
    let wiki = store.records("example:1").await.unwrap();
    assert!(
        wiki.iter().any(|r| r.sentence.contains("edited twice")),
        "MediaWiki page_change"
    );
    let cloud = store.records("kb/42").await.unwrap();
    assert!(
        cloud.iter().any(|r| r.sentence.contains("pair the remote")),
        "CloudEvents"
    );
    let hammer = store.records("products/106").await.unwrap();
    assert!(
        hammer.iter().any(|r| r.sentence == "18oz carpenter hammer"),
        "Debezium update"
    );
    let deleted = store
        .document("products/111")
        .await
        .unwrap()
        .expect("state");
    assert!(deleted.deleted, "Debezium delete");
}
