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

#[path = "support/service.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Service, percentile};

const PAGES: usize = 20;
const SAVES: usize = 60;

/// Whether a search within `doc_id` returns a window holding `needle`.
async fn finds(service: &Service, doc_id: &str, needle: &str) -> bool {
    let Ok(response) = service
        .http
        .post(format!("{}/v1/search", service.base))
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

/// The live freshness histogram's cumulative buckets: (upper bound, count).
async fn buckets(service: &Service) -> Vec<(String, f64)> {
    let text = service
        .http
        .get(format!("{}/metrics", service.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("casement_indexer_freshness_seconds_bucket{")?;
            if !rest.contains("origin=\"live\"") {
                return None;
            }
            let le = rest.split("le=\"").nth(1)?.split('"').next()?.to_owned();
            let count = line.rsplit(' ').next()?.parse().ok()?;
            Some((le, count))
        })
        .collect()
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
    let service = Service::start(
        Some(&dir.path().join("data")),
        &["run", "--watch", docs.to_str().unwrap()],
        &[("CASEMENT__SOURCES__WATCH__DOC_ID_PREFIX", "kb:")],
    );
    let started = Instant::now();
    while !finds(&service, "kb:office-19", "floor 19").await {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the pages were never indexed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every page's first revision finished and counted (not only the last one found).
    service.wait_finished(PAGES, "the pages").await;
    while service
        .metric("casement_indexer_freshness_seconds_count{origin=\"live\"}")
        .await
        < PAGES as f64
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let live = "casement_indexer_freshness_seconds_sum{origin=\"live\"}";
    let live_count = "casement_indexer_freshness_seconds_count{origin=\"live\"}";
    let (sum_before, count_before) = (service.metric(live).await, service.metric(live_count).await);
    let buckets_before = buckets(&service).await;
    let mut latencies = Vec::new();
    for save in 0..SAVES {
        let i = save % PAGES;
        let token = format!("Ask for desk number {}.", 7000 + save);
        let path = docs.join(format!("office-{i:02}.md"));
        let doc_id = format!("kb:office-{i:02}");
        let saved = Instant::now();
        std::fs::write(&path, page(i, &token)).unwrap();
        while !finds(&service, &doc_id, &token).await {
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
    let buckets_after = buckets(&service).await;
    let spread: Vec<String> = buckets_after
        .iter()
        .zip(&buckets_before)
        .map(|((le, after), (_, before))| format!("le {le}: {}", after - before))
        .collect();
    println!("freshness buckets over the saves: {}", spread.join(", "));
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
