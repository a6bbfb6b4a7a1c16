//! `make bench-watch`: how soon a saved file is searchable (issue 36), through the release
//! binary with the default watcher settings (file-system notifications, `settle_ms` 100):
//! `casement run --watch` on a folder of 20 pages, then 60 saves, one at a time, each
//! writing a new sentence into a page; for each, the time from the write to the first
//! search (polled every 5 ms, filtered to the page) that returns the new sentence. Prints
//! p50 / p95 / max, and the mean of `casement_indexer_freshness_seconds{origin="live"}`
//! over the same saves beside the mean measured here: the histogram's clock starts at the
//! file's modification time, so the two agree when it counts the watcher's own delay.
//! Writes `target/bench/watch.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const PAGES: usize = 20;
const SAVES: usize = 60;

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
    async fn metric(&self, series: &str) -> f64 {
        let Ok(response) = self.http.get(format!("{}/metrics", self.base)).send().await else {
            return 0.0;
        };
        let text = response.text().await.unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    async fn finds(&self, doc_id: &str, needle: &str) -> bool {
        let Ok(response) = self
            .http
            .post(format!("{}/v1/search", self.base))
            .json(&json!({"query": needle, "top_k": 3, "doc_ids": [doc_id]}))
            .send()
            .await
        else {
            return false;
        };
        let answer: Value = response.json().await.unwrap_or_default();
        answer["windows"].as_array().is_some_and(|w| {
            w.iter()
                .any(|w| w["text"].as_str().unwrap_or("").contains(needle))
        })
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn page(i: usize, extra: &str) -> String {
    format!(
        "# Badge office {i}\n\nThe badge office on floor {i} opens at nine.\n\n\
         Bring an ID to collect a badge. {extra}\n"
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for i in 0..PAGES {
        std::fs::write(docs.join(format!("office-{i:02}.md")), page(i, "")).unwrap();
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_casement"))
        .env_remove("CASEMENT_CONFIG")
        .env("CASEMENT__LOG__FILTER", "warn")
        .env("CASEMENT__SOURCES__WATCH__DOC_ID_PREFIX", "kb:")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["run", "--listen", &format!("127.0.0.1:{port}"), "--watch"])
        .arg(&docs)
        .stdout(Stdio::null())
        .spawn()
        .expect("start casement (make bench-watch builds it)");
    let service = Service {
        child,
        base: format!("http://127.0.0.1:{port}"),
        http: reqwest::Client::new(),
    };
    let started = Instant::now();
    while !service.finds("kb:office-19", "floor 19").await {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the pages were never indexed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let live = "casement_indexer_freshness_seconds_sum{origin=\"live\"}";
    let live_count = "casement_indexer_freshness_seconds_count{origin=\"live\"}";
    let (sum_before, count_before) = (service.metric(live).await, service.metric(live_count).await);
    let mut latencies = Vec::new();
    for save in 0..SAVES {
        let i = save % PAGES;
        let token = format!("Ask for desk number {}.", 7000 + save);
        let path = docs.join(format!("office-{i:02}.md"));
        let doc_id = format!("kb:office-{i:02}");
        let saved = Instant::now();
        std::fs::write(&path, page(i, &token)).unwrap();
        while !service.finds(&doc_id, &token).await {
            assert!(
                saved.elapsed() < Duration::from_secs(30),
                "save {save} never searchable"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        latencies.push(saved.elapsed().as_secs_f64() * 1000.0);
        // Apart, so each save is a lone live edit.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The histogram's figures for the same saves.
    let (sum_after, count_after) = (service.metric(live).await, service.metric(live_count).await);
    let counted = count_after - count_before;
    let histogram_mean_ms = (sum_after - sum_before) / counted.max(1.0) * 1000.0;
    let measured_mean_ms = latencies.iter().sum::<f64>() / latencies.len() as f64;
    latencies.sort_by(f64::total_cmp);
    let (p50, p95, max) = (
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.95),
        latencies[latencies.len() - 1],
    );
    println!(
        "save to searchable, {SAVES} saves: p50 {p50:.0} ms, p95 {p95:.0} ms, max {max:.0} ms (mean {measured_mean_ms:.0} ms)"
    );
    println!(
        "freshness histogram, origin=\"live\": {counted} events, mean {histogram_mean_ms:.0} ms; \
         differs from the measured mean by {:.0} ms",
        (histogram_mean_ms - measured_mean_ms).abs()
    );
    casement_testkit::write_bench_json(
        "watch.json",
        &json!({"saves": SAVES, "p50_ms": p50, "p95_ms": p95, "max_ms": max,
                "measured_mean_ms": measured_mean_ms, "histogram_events": counted,
                "histogram_mean_ms": histogram_mean_ms}),
    );
}
