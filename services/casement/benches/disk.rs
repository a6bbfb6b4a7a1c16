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

#[path = "support/service.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use casement_events::revision_log::LogEvent;
use casement_store::allocated_bytes as allocated;
use casement_testkit::{data, final_events, read_log};
use serde_json::{Value, json};
use support::{Service, percentile};

const EDITS: usize = 1_000;
const DOCUMENTS: usize = 5;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
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
    let service = Service::start(
        Some(&live_dir),
        &["run", "--replay", first.to_str().unwrap()],
        &[],
    );
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
    let service = Service::start(
        Some(&history_dir),
        &["run", "--replay", history_log.to_str().unwrap()],
        &[],
    );
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
