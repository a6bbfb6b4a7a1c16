//! The Kafka source's flow control against librdkafka's mock cluster (or `KAFKA_BOOTSTRAP`):
//! a source that paused its partitions while the pipeline was full reads them again after a
//! rebalance that took them away and gave them back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use casement_indexer::kafka::consumer;
use casement_pipeline::{Metrics, Offsets, SourceId};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use support::{Broker, config, unique};

/// Flow control across a rebalance: the source pauses its partitions while the pipeline is
/// full, loses one of them to a second member, drains and resumes while it holds only the
/// other, then gets the first back when the second member leaves. librdkafka keeps a
/// partition's pause flag across the revoke and the new assignment, so the source must
/// resume it then: the messages produced after the rebalance arrive from both partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_paused_before_a_rebalance_is_read_again_when_it_comes_back() {
    let topic = unique("flow");
    let broker = Broker::start(&[(&topic, 2)]);
    let group = unique("source");
    let dir = tempfile::tempdir().unwrap();
    let kafka = config(&broker.bootstrap, &topic, &group, dir.path()).kafka;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .create()
        .unwrap();
    let send_to = async |partition: i32, from: i32, to: i32| {
        for i in from..to {
            let value = format!("{partition}:{i}");
            let record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&topic)
                .partition(partition)
                .payload(value.as_bytes());
            producer
                .send(record, Duration::from_secs(10))
                .await
                .expect("produce");
        }
    };
    for partition in 0..2 {
        send_to(partition, 0, 20).await;
    }

    // Member A, the source under test, with a pipeline that holds one message: it pauses.
    let offsets = Offsets::default();
    let a = consumer::connect(&kafka, offsets.clone(), Metrics::new()).expect("connect");
    let (input, mut pipeline) = tokio::sync::mpsc::channel(1);
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let source = tokio::spawn(consumer::consume(a.clone(), input, offsets, shutdown));
    let assigned = |n: usize| {
        let a = a.clone();
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while a.assignment().map_or(0, |t| t.count()) != n {
                assert!(
                    std::time::Instant::now() < deadline,
                    "A never held {n} partitions"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assigned(2).await;
    tokio::time::sleep(Duration::from_secs(2)).await; // Backlog: paused.

    // Member B joins: each member gets one partition.
    let (leave, left) = std::sync::mpsc::channel::<()>();
    let b_config = {
        let mut b = ClientConfig::new();
        b.set("bootstrap.servers", &broker.bootstrap)
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500");
        b
    };
    let b_topic = topic.clone();
    let member_b = std::thread::spawn(move || {
        let b: BaseConsumer = b_config.create().unwrap();
        b.subscribe(&[&b_topic]).unwrap();
        while left.try_recv().is_err() {
            let _ = b.poll(Duration::from_millis(100));
        }
        b.unsubscribe();
        let _ = b.poll(Duration::from_millis(100));
    });
    // The rebalance revokes all of A's partitions before it assigns one back: drain the
    // pipeline in that window, so the source resumes while it holds no partition.
    assigned(0).await;
    let mut seen: BTreeSet<(i32, i64)> = BTreeSet::new();
    let record = |seen: &mut BTreeSet<(i32, i64)>, message: casement_pipeline::SourceMessage| {
        if let SourceId::Kafka { partition } = message.origin.source {
            seen.insert((partition, message.origin.offset));
        }
    };
    while let Ok(Some(message)) =
        tokio::time::timeout(Duration::from_secs(2), pipeline.recv()).await
    {
        record(&mut seen, message);
    }
    assigned(1).await;

    // B leaves: both partitions are A's again. New messages on both must arrive.
    leave.send(()).unwrap();
    member_b.join().unwrap();
    assigned(2).await;
    for partition in 0..2 {
        send_to(partition, 20, 30).await;
    }
    let expected: BTreeSet<(i32, i64)> =
        (0..2).flat_map(|p| (20..30).map(move |o| (p, o))).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !expected.is_subset(&seen) {
        match tokio::time::timeout_at(deadline, pipeline.recv()).await {
            Ok(Some(message)) => record(&mut seen, message),
            _ => break,
        }
    }
    let missing: Vec<_> = expected.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "messages produced after the rebalance never arrived (a partition stayed paused): {missing:?}"
    );
    stop.send(true).unwrap();
    source.await.unwrap();
}
