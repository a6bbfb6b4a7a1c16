//! `make bench-pipeline`: the full 18F corpus (`../shared/data/revisions/18f-handbook/
//! all.jsonl.gz`, 5,875 events) replayed through Kafka (librdkafka's mock cluster, 8
//! partitions) into Qdrant Edge with the real embedding model, twice in one run:
//!
//! 1. incremental (the differ and the embedding cache, as shipped), then 100 single-event
//!    edits on the idle pipeline, one at a time, for freshness (Kafka message timestamp at
//!    produce → durable write; the corpus's own timestamps are historical); its figures
//!    are written to the JSON at once;
//! 2. whole-document re-embedding (diff disabled, no embedding cache), the same stream
//!    (and the edits after it, left out of the work counts).
//!
//! Each phase has its own consumer group and store, and reads the stream from the start.
//!
//! Prints the table and writes `target/bench/pipeline.json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use casement_events::revision_log::LogEvent;
use casement_indexer::{replay, service};
use casement_pipeline::Metrics;
use casement_pipeline::{Finished, Outcome, Stage};
use casement_store::Store;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::json;
use support::{Broker, config, corpus, open_store, processor_over, read_log, unique};
use tokio::sync::mpsc;

const PARTITIONS: i32 = 8;
const EDITS: usize = 100;

struct Phase {
    seconds: f64,
    sentences_embedded: u64,
    embedding_seconds: f64,
    /// (doc_id, revision) → sentences sent to the model.
    per_event: HashMap<(String, u64), usize>,
    sentences_indexed: u64,
    freshness_ms: Vec<f64>,
}

async fn next_finished(rx: &mut mpsc::UnboundedReceiver<Finished>) -> Finished {
    tokio::time::timeout(Duration::from_secs(600), rx.recv())
        .await
        .expect("progress within 10 min")
        .expect("pipeline running")
}

/// `extra`: messages after the corpus in the topic (the incremental phase's edits).
async fn phase(
    broker: &Broker,
    topic: &str,
    events: &[LogEvent],
    whole: bool,
    extra: usize,
) -> Phase {
    let dir = tempfile::tempdir().unwrap();
    let group = unique(if whole { "whole" } else { "incremental" });
    let config = config(&broker.bootstrap, topic, &group, dir.path());
    let metrics = Metrics::new();
    let store = open_store(dir.path());
    let processor =
        processor_over(store.clone(), &config.enrich, &metrics).with_whole_documents(whole);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let started = Instant::now();
    let running = service::start(&config, processor, Some(tx)).expect("start");
    let mut per_event = HashMap::new();
    for i in 0..events.len() + extra {
        let finished = next_finished(&mut rx).await;
        if let (Some((doc, Some(rev))), Outcome::Applied(d) | Outcome::Deleted(d)) =
            (finished.document, finished.outcome)
        {
            per_event.insert((doc, rev), d.embedded);
        }
        if (i + 1) % 1000 == 0 {
            eprintln!(
                "  {} {}/{} events, {:.0} s",
                if whole {
                    "whole-document"
                } else {
                    "incremental"
                },
                i + 1,
                events.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let sentences_embedded = metrics.sentences.with_label_values(&["embedded"]).get();
    let embedding_seconds = metrics.embedding_duration.get_sample_sum();

    let mut freshness_ms = Vec::new();
    let stage_sums = || {
        Stage::ALL.map(|stage| {
            let h = metrics.stage_duration.with_label_values(&[stage.as_str()]);
            (h.get_sample_sum(), h.get_sample_count())
        })
    };
    let before = stage_sums();
    if !whole {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &broker.bootstrap)
            .create()
            .unwrap();
        let finals: Vec<LogEvent> = support::final_events(events)
            .into_values()
            .filter(|e| !e.is_delete() && e.content.len() > 200)
            .collect();
        for i in 0..EDITS {
            let last = &finals[i % finals.len()];
            let round = (i / finals.len()) as u64 + 1;
            let content = format!(
                "{}\n\nReviewed for the benchmark, round {round}.\n",
                last.content
            );
            let event = json!({"type": "upsert", "doc_id": last.doc_id, "revision": last.revision + round,
                "title": last.title, "format": last.format, "content": content, "url": last.path});
            let payload = serde_json::to_vec(&event).unwrap();
            producer
                .send(
                    FutureRecord::to(topic).key(&last.doc_id).payload(&payload),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            let finished = next_finished(&mut rx).await;
            let ts = finished.origin.timestamp_ms.expect("message timestamp");
            freshness_ms.push((finished.finished_ms - ts) as f64);
            tokio::time::sleep(Duration::from_millis(100)).await; // Idle between edits.
        }
    }
    if !whole {
        let after = stage_sums();
        let per_stage: Vec<String> = Stage::ALL
            .iter()
            .zip(before.iter().zip(&after))
            .map(|(stage, ((s0, _), (s1, _)))| {
                format!(
                    "{} {:.1}",
                    stage.as_str(),
                    (s1 - s0) * 1000.0 / EDITS as f64
                )
            })
            .collect();
        println!("single edits, mean ms per stage: {}", per_stage.join(", "));
    }
    running.stop().await.expect("stop");
    let mut sentences_indexed = 0;
    for doc_id in support::final_events(events).keys() {
        sentences_indexed += store.records(doc_id).await.unwrap().len() as u64;
    }
    Phase {
        seconds,
        sentences_embedded,
        embedding_seconds,
        per_event,
        sentences_indexed,
        freshness_ms,
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let path = std::env::var_os("CASEMENT_BENCH_CORPUS")
        .map_or_else(|| corpus("all.jsonl.gz"), PathBuf::from);
    let events = read_log(&path);
    eprintln!(
        "bench-pipeline: {} events from {}",
        events.len(),
        path.display()
    );
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, PARTITIONS), (&format!("{topic}.dlq"), 1)]);
    let kafka = config(
        &broker.bootstrap,
        &topic,
        "replay",
        std::path::Path::new("."),
    )
    .kafka;
    replay::run(&kafka, &path, None, true)
        .await
        .expect("replay");
    support::assert_log_complete(&broker.bootstrap, &topic, PARTITIONS);

    // Incremental first (its single edits land in the topic after the corpus); its figures
    // are written before the long whole-document phase starts.
    let incremental = phase(&broker, &topic, &events, false, 0).await;
    let mut fresh = incremental.freshness_ms.clone();
    fresh.sort_by(f64::total_cmp);
    let (p50, p95, p99) = (
        percentile(&fresh, 0.5),
        percentile(&fresh, 0.95),
        percentile(&fresh, 0.99),
    );
    let events_per_s = events.len() as f64 / incremental.seconds;
    let incremental_work = corpus_work(&incremental, &events);
    let mut report = json!({
        "events": events.len(),
        "events_per_s": events_per_s,
        "seconds": incremental.seconds,
        "sentences_embedded": incremental_work,
        "sentences_embedded_metric": incremental.sentences_embedded,
        "sentences_indexed": incremental.sentences_indexed,
        "embedding_seconds": incremental.embedding_seconds,
        "freshness_ms": {"p50": p50, "p95": p95, "p99": p99, "edits": EDITS},
        "partitions": PARTITIONS,
    });
    write(&report);
    println!(
        "incremental: {} events in {:.1} s ({events_per_s:.1} events/s incl. group join); \
         {incremental_work} sentences embedded, {} in the final index, embedding {:.1} s; \
         freshness of {EDITS} single edits p50/p95/p99 {p50:.0}/{p95:.0}/{p99:.0} ms",
        events.len(),
        incremental.seconds,
        incremental.sentences_indexed,
        incremental.embedding_seconds,
    );

    let whole = phase(&broker, &topic, &events, true, EDITS).await;
    let whole_work = corpus_work(&whole, &events);
    let ratio = whole_work as f64 / incremental_work.max(1) as f64;
    // Per update (not the document's first revision, not a delete): whole / incremental.
    let mut seen = std::collections::HashSet::new();
    let mut update_ratios = Vec::new();
    for event in &events {
        let first = seen.insert(event.doc_id.clone());
        if first || event.is_delete() {
            continue;
        }
        let key = (event.doc_id.clone(), event.revision);
        if let (Some(&w), Some(&i)) = (whole.per_event.get(&key), incremental.per_event.get(&key)) {
            update_ratios.push(w as f64 / i.max(1) as f64);
        }
    }
    update_ratios.sort_by(f64::total_cmp);
    let median_update = percentile(&update_ratios, 0.5);

    println!("\n| figure | incremental | whole-document |");
    println!("|---|---|---|");
    println!("| events | {} | {} |", events.len(), events.len());
    println!(
        "| time (s, from start incl. group join) | {:.1} | {:.1} |",
        incremental.seconds, whole.seconds
    );
    println!(
        "| events/s | {events_per_s:.1} | {:.1} |",
        events.len() as f64 / whole.seconds
    );
    println!("| sentences embedded | {incremental_work} | {whole_work} |");
    println!(
        "| sentences in the final index | {} | {} |",
        incremental.sentences_indexed, whole.sentences_indexed
    );
    println!(
        "| embedding time (s) | {:.1} | {:.1} |",
        incremental.embedding_seconds, whole.embedding_seconds
    );
    println!("\n| figure | value | target |");
    println!("|---|---|---|");
    println!(
        "| freshness p50 / p95 / p99, {EDITS} single edits, idle (ms) | {p50:.0} / {p95:.0} / {p99:.0} | p95 ≤ 250 |"
    );
    println!("| whole-document / incremental embedding, whole stream | {ratio:.1}× | ≥ 8× |");
    println!(
        "| same, median update ({} updates) | {median_update:.1}× | ≥ 25× |",
        update_ratios.len()
    );
    report["whole_doc"] = json!({
        "seconds": whole.seconds,
        "sentences_embedded": whole_work,
        "sentences_indexed": whole.sentences_indexed,
        "embedding_seconds": whole.embedding_seconds,
    });
    report["whole_doc_embedding_ratio"] = json!(ratio);
    report["median_update_embedding_ratio"] = json!(median_update);
    report["updates"] = json!(update_ratios.len());
    write(&report);
}

/// Sentences sent to the model for the corpus's events (the single edits left out).
fn corpus_work(phase: &Phase, events: &[LogEvent]) -> u64 {
    events
        .iter()
        .filter_map(|e| phase.per_event.get(&(e.doc_id.clone(), e.revision)))
        .map(|&n| n as u64)
        .sum()
}

fn write(report: &serde_json::Value) {
    casement_testkit::write_bench_json("pipeline.json", report);
}
