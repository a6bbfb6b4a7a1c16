//! `make bench-disk`: the data directory's size on disk against a fresh backfill of the
//! same final content (issue 36), with the default settings (nothing here changes a
//! threshold), through the binary (`CARGO_BIN_EXE_casement`, release):
//!
//! 1. Edits: the 5 longest pages of the 18F Handbook, then 1,000 webhook edits (200 each,
//!    one paragraph rewritten per edit) into `casement run`, with a search every 50 ms
//!    beside them; the data directory after a clean stop against `casement backfill` of
//!    the 5 final pages. Search latency during the edits (while compactions run) and on
//!    the idle index after, and the compactions counted.
//! 2. History: the Handbook's real history (5,875 events of 347 pages, `../shared/data`)
//!    replayed by `casement run --replay`, against a backfill of each page's last revision.
//!
//! Sizes are allocated bytes (`st_blocks`), not file lengths. Writes
//! `target/bench/disk.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use casement_events::revision_log::LogEvent;
use casement_testkit::{data, final_events, read_log};
use serde_json::{Value, json};

const EDITS: usize = 1_000;
const DOCUMENTS: usize = 5;

/// Allocated bytes under `root`.
fn allocated(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => allocated(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

struct Service {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    fn start(data_dir: &Path, args: &[&str]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_casement"))
            .env_remove("CASEMENT_CONFIG")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("run")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .env("CASEMENT__LOG__FILTER", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start casement (make bench-disk builds it)");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    async fn metric(&self, series: &str) -> f64 {
        let Ok(response) = self.http.get(format!("{}/metrics", self.base)).send().await else {
            return 0.0;
        };
        let text = response.text().await.unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    async fn finished(&self) -> f64 {
        let mut total = 0.0;
        for outcome in ["applied", "deleted", "stale", "dead_lettered"] {
            total += self
                .metric(&format!(
                    "casement_indexer_events_total{{outcome=\"{outcome}\"}}"
                ))
                .await;
        }
        total
    }

    async fn wait_finished(&self, events: usize, what: &str) {
        let started = Instant::now();
        let mut said = Instant::now();
        loop {
            let finished = self.finished().await;
            if finished >= events as f64 {
                return;
            }
            if said.elapsed() > Duration::from_secs(20) {
                println!("  {what}: {finished} of {events} events finished");
                said = Instant::now();
            }
            assert!(
                started.elapsed() < Duration::from_secs(3600),
                "{what}: not finished within an hour"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM and wait: the stop a user makes.
    fn stop(mut self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "casement run exited with {status}");
    }
}

fn write_log(path: &Path, events: &[Value]) {
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(path, text).unwrap();
}

fn log_line(event: &LogEvent) -> Value {
    json!({"doc_id": event.doc_id, "revision": event.revision, "title": event.title,
           "format": event.format, "content": event.content, "change": event.change,
           "timestamp": "2026-11-28T00:00:00Z"})
}

fn backfill(data_dir: &Path, log: &Path) -> u64 {
    let status = Command::new(env!("CARGO_BIN_EXE_casement"))
        .env_remove("CASEMENT_CONFIG")
        .env("CASEMENT__LOG__FILTER", "warn")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("backfill")
        .arg(log)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "casement backfill");
    allocated(data_dir)
}

/// `page` with its paragraph `edit % paragraphs` rewritten for edit `edit`.
fn edited(page: &str, edit: usize) -> String {
    let mut paragraphs: Vec<String> = page.split("\n\n").map(str::to_owned).collect();
    let prose: Vec<usize> = paragraphs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.len() > 80 && !p.starts_with('#') && !p.starts_with('-'))
        .map(|(i, _)| i)
        .collect();
    let at = prose[edit % prose.len()];
    paragraphs[at] = format!(
        "{} This paragraph was reviewed in edit {edit}, which checked every link and date.",
        paragraphs[at]
            .split(" This paragraph was reviewed in edit")
            .next()
            .unwrap_or("")
    );
    paragraphs.join("\n\n")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let history = read_log(&data("revisions/18f-handbook/all.jsonl.gz"));
    let finals = final_events(&history);
    let dir = tempfile::tempdir().unwrap();

    // 1. Edits of 5 long pages.
    let mut longest: Vec<&LogEvent> = finals
        .values()
        .filter(|e| e.change != "delete" && e.format == "markdown")
        .collect();
    longest.sort_by_key(|e| std::cmp::Reverse(e.content.len()));
    let pages: Vec<LogEvent> = longest[..DOCUMENTS].iter().map(|e| (*e).clone()).collect();
    println!(
        "edits: {DOCUMENTS} pages of {} characters, {EDITS} edits",
        pages.iter().map(|p| p.content.len()).sum::<usize>()
    );
    let first = dir.path().join("pages.jsonl");
    write_log(&first, &pages.iter().map(log_line).collect::<Vec<_>>());
    let live_dir = dir.path().join("edits");
    let service = Service::start(&live_dir, &["--replay", first.to_str().unwrap()]);
    service
        .wait_finished(DOCUMENTS, "the first revisions")
        .await;
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let searching = {
        let (base, latencies) = (service.base.clone(), latencies.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            loop {
                let started = Instant::now();
                let answer = http
                    .post(format!("{base}/v1/search"))
                    .json(&json!({"query": "who reviews links and dates on this page", "top_k": 5}))
                    .send()
                    .await;
                if answer.is_ok_and(|a| a.status().is_success()) {
                    latencies
                        .lock()
                        .unwrap()
                        .push(started.elapsed().as_secs_f64() * 1000.0);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut last: Vec<(String, u64)> = pages
        .iter()
        .map(|p| (p.content.clone(), p.revision))
        .collect();
    let started = Instant::now();
    for edit in 0..EDITS {
        let i = edit % DOCUMENTS;
        let content = edited(&last[i].0, edit / DOCUMENTS);
        let revision = last[i].1 + 1;
        let answer = service
            .http
            .post(format!("{}/v1/events", service.base))
            .json(
                &json!({"type": "upsert", "doc_id": pages[i].doc_id, "revision": revision,
                          "title": pages[i].title, "format": "markdown", "content": content}),
            )
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{}", answer.status());
        last[i] = (content, revision);
        if (edit + 1) % 200 == 0 {
            println!(
                "  {} edits, data directory {:.1} MiB",
                edit + 1,
                mib(allocated(&live_dir))
            );
        }
    }
    service.wait_finished(DOCUMENTS + EDITS, "the edits").await;
    let edits_s = started.elapsed().as_secs_f64();
    searching.abort();
    let mut during: Vec<f64> = latencies.lock().unwrap().clone();
    during.sort_by(f64::total_cmp);
    let compactions = service.metric("casement_index_compactions_total").await;
    let last_compaction_s = service
        .metric("casement_index_last_compaction_duration_seconds")
        .await;
    // The idle index, for comparison, in the same run.
    let mut idle = Vec::new();
    for _ in 0..100 {
        let started = Instant::now();
        let answer = service
            .http
            .post(format!("{}/v1/search", service.base))
            .json(&json!({"query": "who reviews links and dates on this page", "top_k": 5}))
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success());
        idle.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    idle.sort_by(f64::total_cmp);
    service.stop();
    let edits_bytes = allocated(&live_dir);
    let final_log = dir.path().join("pages-final.jsonl");
    write_log(
        &final_log,
        &pages
            .iter()
            .zip(&last)
            .map(|(page, (content, revision))| {
                log_line(&LogEvent {
                    content: content.clone(),
                    revision: *revision,
                    ..page.clone()
                })
            })
            .collect::<Vec<_>>(),
    );
    let edits_fresh = backfill(&dir.path().join("edits-fresh"), &final_log);
    let edits_ratio = edits_bytes as f64 / edits_fresh as f64;
    println!(
        "edits: {EDITS} in {edits_s:.1} s; data directory {:.1} MiB, fresh backfill {:.1} MiB: {edits_ratio:.2}x; \
         {compactions} compactions (the last held writes {:.0} ms)",
        mib(edits_bytes),
        mib(edits_fresh),
        last_compaction_s * 1000.0
    );
    println!(
        "search during the edits: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms ({} searches); idle after: p50 {:.1} ms, p95 {:.1} ms",
        percentile(&during, 0.5),
        percentile(&during, 0.95),
        during.last().copied().unwrap_or(f64::NAN),
        during.len(),
        percentile(&idle, 0.5),
        percentile(&idle, 0.95)
    );

    // 2. The 18F history.
    let history_log: PathBuf = data("revisions/18f-handbook/all.jsonl.gz");
    let history_dir = dir.path().join("history");
    let started = Instant::now();
    let service = Service::start(&history_dir, &["--replay", history_log.to_str().unwrap()]);
    service.wait_finished(history.len(), "the history").await;
    let history_s = started.elapsed().as_secs_f64();
    let history_compactions = service.metric("casement_index_compactions_total").await;
    service.stop();
    let history_bytes = allocated(&history_dir);
    let final_pages: Vec<Value> = finals
        .values()
        .filter(|e| e.change != "delete")
        .map(log_line)
        .collect();
    let history_final = dir.path().join("history-final.jsonl");
    write_log(&history_final, &final_pages);
    let history_fresh = backfill(&dir.path().join("history-fresh"), &history_final);
    let history_ratio = history_bytes as f64 / history_fresh as f64;
    println!(
        "history: {} events in {history_s:.0} s; data directory {:.1} MiB, fresh backfill of {} pages {:.1} MiB: {history_ratio:.2}x; {history_compactions} compactions",
        history.len(),
        mib(history_bytes),
        final_pages.len(),
        mib(history_fresh)
    );
    casement_testkit::write_bench_json(
        "disk.json",
        &json!({
            "edits": {"documents": DOCUMENTS, "edits": EDITS, "seconds": edits_s,
                      "data_dir_bytes": edits_bytes, "fresh_backfill_bytes": edits_fresh,
                      "ratio": edits_ratio, "compactions": compactions,
                      "last_compaction_seconds": last_compaction_s,
                      "search_ms_during": {"p50": percentile(&during, 0.5), "p95": percentile(&during, 0.95),
                                           "max": during.last(), "n": during.len()},
                      "search_ms_idle": {"p50": percentile(&idle, 0.5), "p95": percentile(&idle, 0.95)}},
            "history": {"events": history.len(), "seconds": history_s,
                        "data_dir_bytes": history_bytes, "fresh_backfill_bytes": history_fresh,
                        "ratio": history_ratio, "compactions": history_compactions},
        }),
    );
    assert!(
        edits_ratio <= 3.0,
        "edits: {edits_ratio:.2}x a fresh backfill (target 3x)"
    );
    assert!(
        history_ratio <= 3.0,
        "history: {history_ratio:.2}x a fresh backfill (target 3x)"
    );
}
