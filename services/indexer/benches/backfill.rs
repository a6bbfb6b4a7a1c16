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

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use casement_events::revision_log::LogEvent;
use casement_indexer::replay;
use casement_inference::{Embed, EmbedderConfig};
use casement_text::{Fence, MemoryIndex, TextConfig, fence, plan_delete, plan_upsert};
use serde_json::{Value, json};
use support::{Broker, final_events, read_log};

const PARTITIONS: i32 = 8;

struct Workload {
    name: &'static str,
    what: String,
    /// The events whose plans give the embedding inputs.
    events: Vec<LogEvent>,
}

struct Child {
    seconds: f64,
    peak_rss_bytes: u64,
    sentences: u64,
    documents: u64,
    points: u64,
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
        let raw = raw_rate(model.as_ref(), &inputs, sample_size, embedder.batch_size);
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
            "history_kafka" => runtime.block_on(kafka_catch_up(&bin, &dir, &workload.events)),
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
    for line in lines(&casement_testkit::data("scifact/corpus.jsonl.gz")) {
        let doc: Value = serde_json::from_str(&line).unwrap();
        scifact.push(create(
            &format!("scifact:{}", doc["_id"].as_str().unwrap()),
            doc["title"].as_str().unwrap(),
            doc["text"].as_str().unwrap(),
            "text",
        ));
    }
    let mut squad = Vec::new();
    for line in lines(&casement_testkit::data("squad/dev-v1.1.articles.jsonl")) {
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

fn lines(path: &Path) -> Vec<String> {
    let file = std::fs::File::open(path)
        .unwrap_or_else(|e| panic!("{}: {e} (the bench reads ../shared/data)", path.display()));
    let reader: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    reader.lines().map(Result::unwrap).collect()
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

/// Sentences/s of the model alone over a seeded sample of `inputs`, sorted by length, in
/// batches of `batch`; and the sample size.
fn raw_rate(model: &dyn Embed, inputs: &[String], sample: usize, batch: usize) -> (f64, usize) {
    // A seeded, uniform sample (xorshift), not the first inputs: documents differ in length.
    let mut picked: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..picked.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        picked.swap(i, (state % (i as u64 + 1)) as usize);
    }
    picked.truncate(sample);
    picked.sort_by_key(|s| s.len());
    model.embed(&picked[..picked.len().min(batch)]).unwrap(); // Warm-up.
    let started = Instant::now();
    for chunk in picked.chunks(batch) {
        model.embed(chunk).unwrap();
    }
    (
        picked.len() as f64 / started.elapsed().as_secs_f64(),
        picked.len(),
    )
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

/// `casement backfill PATH` into `dir/data`.
fn backfill(bin: &Path, dir: &Path, input: &Path) -> Child {
    let stdout = dir.join("stdout.txt");
    let stderr = dir.join("stderr.txt");
    let started = Instant::now();
    let child = Command::new(bin.join("casement"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("backfill")
        .arg(input)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("starting casement backfill");
    let mut child = child;
    let status = child.wait().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let out = std::fs::read_to_string(&stdout).unwrap();
    assert!(
        status.success(),
        "casement backfill failed ({status}):\n{out}\n{}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    print!("{out}");
    // "index: D documents, P sentences; E sentences embedded (...)"
    let index = out
        .lines()
        .find_map(|l| l.strip_prefix("index: "))
        .expect("the backfill summary");
    let numbers: Vec<u64> = index
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    // "peak memory: N bytes", read by the process from /proc/self/status at its end.
    let peak_rss_bytes = out
        .lines()
        .find_map(|l| l.strip_prefix("peak memory: "))
        .and_then(|l| l.split(' ').next()?.parse().ok())
        .expect("the backfill's peak memory line");
    Child {
        seconds,
        peak_rss_bytes,
        documents: numbers[0],
        points: numbers[1],
        sentences: numbers[2],
    }
}

/// The peak resident set of a running process (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The full history into the mock cluster, then `casement-indexer run` from the start
/// until every event is finished (its `/metrics`), then SIGTERM.
async fn kafka_catch_up(bin: &Path, dir: &Path, events: &[LogEvent]) -> Child {
    let topic = support::unique("changes");
    let broker = Broker::start(&[(&topic, PARTITIONS), (&format!("{topic}.dlq"), 1)]);
    let log = write_log(dir, events);
    let mut config = support::config(&broker.bootstrap, &topic, "backfill", &dir.join("data"));
    replay::run(&config.kafka, &log, None, true)
        .await
        .expect("producing the history");
    support::assert_log_complete(&broker.bootstrap, &topic, PARTITIONS);
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    config.admin.listen = admin.local_addr().unwrap();
    drop(admin);
    config.store.edge.path = dir.join("data/index");
    let config_path = dir.join("indexer.toml");
    std::fs::write(&config_path, toml::to_string(&config).unwrap()).unwrap();
    let stderr = dir.join("stderr.txt");
    let started = Instant::now();
    let child = Command::new(bin.join("casement-indexer"))
        .arg("--config")
        .arg(&config_path)
        .arg("run")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("starting casement-indexer");
    let pid = child.id();
    let metrics_url = format!("http://{}/metrics", config.admin.listen);
    let http = reqwest::Client::new();
    let (finished_at, sentences, documents, points) = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the catch-up did not finish within an hour"
        );
        let Ok(response) = http.get(&metrics_url).send().await else {
            continue;
        };
        let Ok(text) = response.text().await else {
            continue;
        };
        let finished: f64 = series(&text, "casement_indexer_events_total{").iter().sum();
        if finished as usize >= events.len() {
            let embedded = series(
                &text,
                "casement_indexer_sentences_total{decision=\"embedded\"}",
            );
            let documents = series(&text, "casement_index_documents ");
            let points = series(&text, "casement_index_points ");
            break (
                started.elapsed(),
                embedded.first().copied().unwrap_or(0.0) as u64,
                documents.first().copied().unwrap_or(0.0) as u64,
                points.first().copied().unwrap_or(0.0) as u64,
            );
        }
    };
    // The high-water mark of the whole catch-up, read before the process is stopped.
    let peak_rss_bytes = peak_rss(pid).expect("the indexer's /proc status");
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut child = child;
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(
        status.success(),
        "casement-indexer exited with {status}:\n{}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    Child {
        seconds: finished_at.as_secs_f64(),
        peak_rss_bytes,
        sentences,
        documents,
        points,
    }
}

/// Values of the exposition lines starting with `prefix`.
fn series(text: &str, prefix: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
