//! `make bench-backfill` (issue 16): bulk indexing against the raw model, in one run.
//!
//! For each workload, the raw embedder (the same model and settings as the services: ONNX
//! Runtime, `embedder.threads`, batches of `embedder.batch_size`, inputs sorted by length)
//! over a seeded sample of the embedding inputs the workload sends to the model (computed
//! with the real segmenter and differ over the same events, distinct inputs as the embedding
//! cache sees them), then the release binary over the whole workload as a child process:
//!
//! - (a) `casement backfill` of the 5,183 SciFact abstracts (a revision log of creates);
//! - (b) `casement backfill` of the 48 SQuAD v1.1 dev articles;
//! - (c) `casement backfill` of a folder of the 18F Handbook's pages at their final revision;
//! - (d) `casement-indexer run` catching up the full 18F history (5,875 events) from
//!   librdkafka's mock cluster (8 partitions), watched on its `/metrics` until every event
//!   is finished.
//!
//! Per run: sentences embedded (the binary's own count), sentences/s over the child's wall
//! time (model load and the final index build included), the ratio to the raw rate, peak
//! RSS (the child's `VmHWM`) and bytes on disk. Prints a table and writes
//! `target/bench/backfill.json`. Needs `../shared/data` and the release binaries
//! (`make bench-backfill` builds them). `BACKFILL_RUNS=scifact,squad` picks runs;
//! `BACKFILL_RAW_SAMPLE` (default 4,000) sizes the raw sample.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../tests/it/support/mod.rs"]
mod support;

mod children;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use casement_events::revision_log::LogEvent;
use casement_inference::EmbedderConfig;
use casement_text::{Fence, MemoryIndex, TextConfig, fence, plan_delete, plan_upsert};
use children::{backfill, dir_bytes, kafka_catch_up};
use serde_json::{Value, json};
use support::{final_events, read_log};

struct Workload {
    name: &'static str,
    what: String,
    /// The events whose plans give the embedding inputs.
    events: Vec<LogEvent>,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let bin = binaries();
    let only: Option<BTreeSet<String>> = std::env::var("BACKFILL_RUNS")
        .ok()
        .map(|s| s.split(',').map(str::to_owned).collect());
    let wanted = |name: &str| only.as_ref().is_none_or(|o| o.contains(name));
    let sample_size: usize = std::env::var("BACKFILL_RAW_SAMPLE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000);
    let work = tempfile::tempdir().unwrap();
    let embedder = EmbedderConfig::default();
    eprintln!(
        "bench-backfill: model {} ({:?}), {} threads, batch {}, at most {} padded tokens per call",
        embedder.model_dir.display(),
        embedder.precision,
        embedder.threads,
        embedder.batch_size,
        embedder.batch_tokens
    );
    let model = casement_inference::load_embedder(&embedder).expect("the embedding model");

    let mut runs = serde_json::Map::new();
    let mut table = Vec::new();
    let mut first_raw = None;
    for workload in workloads() {
        if !wanted(workload.name) {
            continue;
        }
        eprintln!("\n== {}: {}", workload.name, workload.what);
        let inputs = embedding_inputs(&workload.events);
        let raw =
            casement_testkit::raw_rate(model.as_ref(), &inputs, sample_size, embedder.batch_size);
        eprintln!(
            "raw model: {:.1} sentences/s over {} of {} inputs",
            raw.0,
            raw.1,
            inputs.len()
        );
        first_raw.get_or_insert(raw.0);
        let dir = work.path().join(workload.name);
        std::fs::create_dir_all(&dir).unwrap();
        let child = match workload.name {
            "history_kafka" => {
                let log = write_log(&dir, &workload.events);
                runtime.block_on(kafka_catch_up(&bin, &dir, &log, workload.events.len()))
            }
            "handbook_folder" => {
                let folder = write_folder(&dir, &workload.events);
                backfill(&bin, &dir, &folder)
            }
            _ => {
                let log = write_log(&dir, &workload.events);
                backfill(&bin, &dir, &log)
            }
        };
        let disk = dir_bytes(&dir.join("data"));
        let rate = child.sentences as f64 / child.seconds;
        let ratio = rate / raw.0;
        eprintln!(
            "{}: {} sentences in {:.1} s = {rate:.1}/s, {ratio:.2}x raw; peak RSS {} MiB; disk {} MiB",
            workload.name,
            child.sentences,
            child.seconds,
            child.peak_rss_bytes >> 20,
            disk >> 20
        );
        table.push(
            format!(
                "| {} | {} | {} | {:.1} | {:.1} | **{ratio:.2}** | {} | {} |",
                workload.name,
                workload.what,
                child.sentences,
                child.seconds,
                rate,
                child.peak_rss_bytes >> 20,
                disk >> 20,
            ) + &format!(" {:.1} |", raw.0),
        );
        runs.insert(
            workload.name.to_owned(),
            json!({
                "what": workload.what,
                "events": workload.events.len(),
                "documents": child.documents,
                "points": child.points,
                "sentences": child.sentences,
                "seconds": child.seconds,
                "sentences_per_s": rate,
                "raw_sentences_per_s": raw.0,
                "raw_sample": raw.1,
                "distinct_inputs": inputs.len(),
                "ratio": ratio,
                "peak_rss_bytes": child.peak_rss_bytes,
                "disk_bytes": disk,
            }),
        );
        let report = json!({
            "raw_sentences_per_s": first_raw,
            "model": format!("{:?}", embedder.precision),
            "threads": embedder.threads,
            "batch": embedder.batch_size,
            "runs": runs,
        });
        casement_testkit::write_bench_json("backfill.json", &report);
    }
    println!(
        "\n| run | input | sentences embedded | seconds | sentences/s | ratio to raw | peak RSS MiB | disk MiB | raw sentences/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in table {
        println!("{row}");
    }
}

/// `target/release/{casement,casement-indexer}`.
fn binaries() -> PathBuf {
    let indexer = PathBuf::from(env!("CARGO_BIN_EXE_casement-indexer"));
    let dir = indexer.parent().unwrap().to_path_buf();
    assert!(
        dir.join("casement").exists(),
        "{} has no casement binary: run `make bench-backfill`, which builds it",
        dir.display()
    );
    dir
}

fn workloads() -> Vec<Workload> {
    let mut scifact = Vec::new();
    for line in casement_testkit::read_lines(&casement_testkit::data("scifact/corpus.jsonl.gz")) {
        let doc: Value = serde_json::from_str(&line).unwrap();
        scifact.push(create(
            &format!("scifact:{}", doc["_id"].as_str().unwrap()),
            doc["title"].as_str().unwrap(),
            doc["text"].as_str().unwrap(),
            "text",
        ));
    }
    let mut squad = Vec::new();
    for line in
        casement_testkit::read_lines(&casement_testkit::data("squad/dev-v1.1.articles.jsonl"))
    {
        let doc: Value = serde_json::from_str(&line).unwrap();
        let title = doc["title"].as_str().unwrap();
        squad.push(create(
            &format!("squad:{title}"),
            &title.replace('_', " "),
            doc["text"].as_str().unwrap(),
            "text",
        ));
    }
    let history = read_log(&support::corpus("all.jsonl.gz"));
    let mut pages: Vec<LogEvent> = final_events(&history)
        .into_values()
        .filter(|e| !e.is_delete())
        .collect();
    pages.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
    vec![
        Workload {
            name: "scifact",
            what: format!("{} SciFact abstracts", scifact.len()),
            events: scifact,
        },
        Workload {
            name: "squad",
            what: format!("{} SQuAD dev articles", squad.len()),
            events: squad,
        },
        Workload {
            name: "handbook_folder",
            what: format!("{} 18F pages, final revision, a folder", pages.len()),
            events: pages,
        },
        Workload {
            name: "history_kafka",
            what: format!("{} 18F revisions via Kafka", history.len()),
            events: history,
        },
    ]
}

fn create(doc_id: &str, title: &str, content: &str, format: &str) -> LogEvent {
    LogEvent {
        access: None,
        doc_id: doc_id.to_owned(),
        revision: 1,
        title: Some(title.to_owned()),
        format: format.to_owned(),
        content: content.to_owned(),
        change: "create".to_owned(),
        path: None,
        seq: None,
        timestamp: None,
    }
}

/// The distinct embedding inputs the events' plans send to the model, in event order.
fn embedding_inputs(events: &[LogEvent]) -> Vec<String> {
    let text = TextConfig::default();
    let mut index = MemoryIndex::new();
    let mut seen = BTreeSet::new();
    let mut inputs = Vec::new();
    for event in events {
        if let Fence::Stale { .. } = fence(index.document(&event.doc_id), event.revision) {
            continue;
        }
        let current = index.records(&event.doc_id);
        let plan = if event.is_delete() {
            plan_delete(
                &current,
                index.document(&event.doc_id),
                (&event.doc_id).into(),
                event.revision,
            )
        } else {
            let Ok(revision) = event.to_revision() else {
                continue;
            };
            match plan_upsert(&current, &revision, &text) {
                Ok((plan, _)) => plan,
                Err(_) => continue,
            }
        };
        for record in &plan.embed {
            let input = record.embedding_input();
            if seen.insert(input.clone()) {
                inputs.push(input);
            }
        }
        index.apply(&plan);
    }
    inputs
}

fn write_log(dir: &Path, events: &[LogEvent]) -> PathBuf {
    let path = dir.join("log.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for event in events {
        serde_json::to_writer(&mut out, event).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    path
}

/// One Markdown file per page, named by its id (the watcher's ids: path without extension).
fn write_folder(dir: &Path, events: &[LogEvent]) -> PathBuf {
    let folder = dir.join("pages");
    for event in events {
        let name = event.doc_id.replace(':', "/");
        let path = folder.join(format!("{name}.md"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &event.content).unwrap();
    }
    folder
}
