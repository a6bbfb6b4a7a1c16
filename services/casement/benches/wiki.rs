//! `make bench-wiki`: real-time wiki sync (issue 20) through the release binary. The 18F
//! Handbook's full history (5,875 real revisions of 347 pages, `../shared/data`) is served
//! by the stand-in Action API and announced by the stand-in EventStreams endpoint as
//! `page_change` events without content (`casement_testkit::wiki`, both on loopback).
//!
//! - Backlog: `casement run` follows the stream from its start; reports events/s, API
//!   requests per event (the batching), revisions fetched, and sentences embedded against
//!   what re-embedding every revision's whole page would embed.
//! - Live: then single edits of live pages, one at a time; reports freshness from the
//!   event's publication on the stream to the revision being searchable (`GET
//!   /v1/documents`, polled every 5 ms), p50 / p95.
//!
//! - Polling (issue 40): a second stand-in wiki with only its Action API, followed by
//!   `list=recentchanges` at the default `poll_interval_ms` (2,000). The same history is
//!   saved on it as edits (deletes and restores as log events) once the poller follows;
//!   reports events/s to the last page searchable, API requests per change (polls, page
//!   lookups, fetches), then single edits one at a time: freshness from the save (the
//!   change's timestamp) to searchable, p50 / p95.
//!
//! Writes `target/bench/wiki.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/service.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use casement_testkit::wiki::{StreamStandIn, WikiRevision, WikiStandIn, page_change, wiki_history};
use casement_testkit::{data, read_log};
use casement_text::{Format, Revision, TextConfig, plan_upsert};
use serde_json::{Value, json};
use support::{Service, percentile};

const WIKI: &str = "handbookwiki";
const DOMAIN: &str = "handbook.wiki.example";
const LIVE_EDITS: usize = 100;
/// The stand-in Action API's `siteinfo` wikiid: the polled documents' prefix.
const WIKI_POLLED: &str = "standinwiki";

/// The revision of `doc_id` the service serves.
async fn revision(service: &Service, doc_id: &str) -> Option<u64> {
    let response = service
        .http
        .get(format!("{}/v1/documents/{doc_id}", service.base))
        .send()
        .await
        .ok()?;
    let answer: Value = response.json().await.ok()?;
    answer["revision"].as_u64()
}

/// Sentences a whole-page re-embed would embed: every sentence of every upserted revision.
fn whole_page_sentences(history: &[WikiRevision]) -> usize {
    history
        .iter()
        .filter(|r| r.kind != "delete")
        .map(|r| {
            let revision = Revision {
                access: None,
                metadata: Default::default(),
                doc_id: format!("{WIKI}:{}", r.page_id),
                revision: r.rev_id,
                title: Some(r.title.clone()),
                url: None,
                tenant: None,
                format: Format::Wikitext,
                content: r.content.clone(),
                revision_url: None,
            };
            plan_upsert(&[], &revision, &TextConfig::default())
                .map(|(plan, _)| plan.embed.len())
                .unwrap_or(0)
        })
        .sum()
}

/// The polling source (issue 40): a second wiki with only its Action API, followed by
/// `list=recentchanges` at the default interval. The same history is saved on it as edits
/// once the poller follows; then single edits, one at a time.
async fn polling(history: &[WikiRevision]) -> Value {
    let wiki = WikiStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("casement.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\n[sources.mediawiki]\napi_url = \"{}\"\n\
             [fetch]\nrequests_per_second = 1000\n\
             user_agent = \"CasementBench/1.0 (bench; ops@casement.example)\"\n",
            dir.path().join("data").display(),
            wiki.api_url
        ),
    )
    .unwrap();
    let interval_ms = 2_000; // sources.mediawiki.poll_interval_ms's default
    let service = Service::start(None, &["--config", config.to_str().unwrap(), "run"], &[]);
    // siteinfo, the newest change, a first poll: from here, every change is followed.
    let started = Instant::now();
    while wiki.arrivals() < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the poller did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = wiki.arrivals();
    let begun = Instant::now();
    let mut deleted = std::collections::HashSet::new();
    let mut last: BTreeMap<u64, WikiRevision> = BTreeMap::new();
    for revision in history {
        if revision.kind == "delete" {
            if last.remove(&revision.page_id).is_some() {
                wiki.delete(revision.page_id);
                deleted.insert(revision.page_id);
            }
            continue;
        }
        if deleted.remove(&revision.page_id) {
            wiki.restore(revision.page_id);
        }
        let saved = wiki.edit(revision.page_id, 0, &revision.title, &revision.content);
        last.insert(revision.page_id, saved);
    }
    let changes = wiki.last_rcid() as usize;
    // Done when every page's last revision is served (deleted pages: gone).
    for (page_id, saved) in &last {
        let doc_id = format!("{WIKI_POLLED}:{page_id}");
        while revision(&service, &doc_id).await != Some(saved.rev_id) {
            assert!(
                begun.elapsed() < Duration::from_secs(3600),
                "the polled backlog did not finish within an hour"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let backlog_s = begun.elapsed().as_secs_f64();
    let backlog_requests = wiki.arrivals() - before;
    let pages: Vec<WikiRevision> = last.into_values().collect();
    let mut freshness = Vec::with_capacity(LIVE_EDITS);
    let live_before = wiki.arrivals();
    for i in 0..LIVE_EDITS {
        let page = &pages[(i * 7) % pages.len()];
        let content = format!(
            "{}\n\nLive edit {i}: the policy was reviewed and stays in force.",
            page.content
        );
        let saved = wiki.edit(page.page_id, 0, &page.title, &content);
        let changed = Instant::now();
        let doc_id = format!("{WIKI_POLLED}:{}", page.page_id);
        while revision(&service, &doc_id).await != Some(saved.rev_id) {
            assert!(
                changed.elapsed() < Duration::from_secs(60),
                "polled edit {i} not searchable within a minute"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        freshness.push(changed.elapsed().as_secs_f64() * 1e3);
        // Not in step with the poll: each edit comes right after a poll was applied, so
        // the pause before the next one sets where in the interval it lands. Pauses of
        // (37·i mod 100)% of the interval visit every hundredth of it once over the 100
        // edits: the figures are those of an edit at a uniformly random moment.
        let pause = (i as u64 * 37 % 100) * interval_ms / 100;
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    let live_requests = wiki.arrivals() - live_before;
    freshness.sort_by(f64::total_cmp);
    let (p50, p95) = (percentile(&freshness, 0.5), percentile(&freshness, 0.95));
    service.stop();
    json!({
        "changes": changes,
        "backlog_seconds": backlog_s,
        "events_per_second": changes as f64 / backlog_s.max(1e-9),
        "requests_per_event": backlog_requests as f64 / changes.max(1) as f64,
        "poll_interval_ms": interval_ms,
        "live_edits": LIVE_EDITS,
        "live_requests": live_requests,
        "freshness_ms": {"p50": p50, "p95": p95},
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let history = wiki_history(&read_log(&data("revisions/18f-handbook/all.jsonl.gz")));
    let events = history.len();
    println!("{events} page_change events of {} pages", {
        let mut pages: Vec<u64> = history.iter().map(|r| r.page_id).collect();
        pages.sort_unstable();
        pages.dedup();
        pages.len()
    });
    let wiki = WikiStandIn::start().await;
    let stream = StreamStandIn::start().await;
    // Every revision is on the wiki before the stream is followed (pages are not deleted
    // on the wiki, so every fetch finds its revision): the figures are the pipeline's.
    for revision in history.iter().filter(|r| r.kind != "delete") {
        wiki.publish(revision);
    }
    let dt = "2026-11-25T06:00:00Z";
    for revision in &history {
        stream.push(&page_change(WIKI, DOMAIN, revision.kind, revision, dt));
    }

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("casement.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\n[sources.mediawiki]\nstream_url = \"{}\"\ndomains = [\"{DOMAIN}\"]\n\
             [fetch]\napi_url = \"{}\"\nrequests_per_second = 1000\n\
             user_agent = \"CasementBench/1.0 (bench; ops@casement.example)\"\n",
            dir.path().join("data").display(),
            stream.url,
            wiki.api_url
        ),
    )
    .unwrap();
    let started = Instant::now();
    let service = Service::start(None, &["--config", config.to_str().unwrap(), "run"], &[]);
    // The backlog, from the first event finished (the model loaded) to the last.
    let mut first = None;
    let mut last_report = Instant::now();
    loop {
        let finished = service.finished().await;
        if finished > 0.0 && first.is_none() {
            first = Some(Instant::now());
        }
        if finished >= events as f64 {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            println!("  {finished} of {events} events finished");
            last_report = Instant::now();
        }
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the backlog did not finish within an hour"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let backlog_s = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    let requests = wiki.requests();
    let asked: usize = requests.iter().map(Vec::len).sum();
    let fetched = service
        .metric("casement_indexer_fetches_total{outcome=\"fetched\"}")
        .await;
    let embedded = service
        .metric("casement_indexer_sentences_total{decision=\"embedded\"}")
        .await;
    let reused = service
        .metric("casement_indexer_sentences_total{decision=\"reused\"}")
        .await;
    let whole = whole_page_sentences(&history);
    let upserts = history.iter().filter(|r| r.kind != "delete").count();

    // Live: single edits of live pages, one at a time.
    let mut live: BTreeMap<u64, WikiRevision> = BTreeMap::new();
    for revision in &history {
        if revision.kind == "delete" {
            live.remove(&revision.page_id);
        } else {
            live.insert(revision.page_id, revision.clone());
        }
    }
    let pages: Vec<WikiRevision> = live.into_values().collect();
    let mut freshness = Vec::with_capacity(LIVE_EDITS);
    for i in 0..LIVE_EDITS {
        let page = &pages[(i * 7) % pages.len()];
        let edit = WikiRevision {
            rev_id: 10_000_000 + i as u64,
            content: format!(
                "{}\n\nLive edit {i}: the policy was reviewed and stays in force.",
                page.content
            ),
            kind: "edit",
            ..page.clone()
        };
        wiki.publish(&edit);
        let doc_id = format!("{WIKI}:{}", edit.page_id);
        let published = Instant::now();
        stream.push(&page_change(WIKI, DOMAIN, "edit", &edit, dt));
        loop {
            if revision(&service, &doc_id).await == Some(edit.rev_id) {
                break;
            }
            assert!(
                published.elapsed() < Duration::from_secs(60),
                "edit {i} not searchable within a minute"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        freshness.push(published.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    freshness.sort_by(f64::total_cmp);
    let (p50, p95) = (percentile(&freshness, 0.5), percentile(&freshness, 0.95));
    service.stop();

    println!("polling: the same history saved on a wiki with only its Action API");
    let polled = polling(&history).await;

    println!();
    println!("| figure | value |");
    println!("|---|---|");
    println!("| backlog: page_change events (no content) | {events} |");
    println!(
        "| backlog: events/s (first to last finished) | {:.1} |",
        events as f64 / backlog_s.max(1e-9)
    );
    println!(
        "| backlog: API requests / events, revisions per request (mean) | {:.3}, {:.1} |",
        requests.len() as f64 / events as f64,
        asked as f64 / requests.len().max(1) as f64
    );
    println!("| backlog: revisions fetched / upsert events | {fetched} / {upserts} |");
    println!(
        "| backlog: sentences embedded (+ reused from the cache) vs a whole-page re-embed | {embedded} (+ {reused}) vs {whole} ({:.1}%) |",
        100.0 * embedded / whole.max(1) as f64
    );
    println!(
        "| live: {LIVE_EDITS} single edits, published on the stream → searchable, p50 / p95 (ms) | {p50:.0} / {p95:.0} |"
    );
    println!(
        "| polling: changes saved (edits, creations, deletes, restores) | {} |",
        polled["changes"]
    );
    println!(
        "| polling: events/s (first saved to last searchable) | {:.1} |",
        polled["events_per_second"].as_f64().unwrap_or(0.0)
    );
    println!(
        "| polling: API requests / change (recentchanges, lookups, fetches) | {:.3} |",
        polled["requests_per_event"].as_f64().unwrap_or(0.0)
    );
    println!(
        "| polling: {LIVE_EDITS} single edits at poll_interval_ms = {}, saved → searchable, p50 / p95 (ms) | {:.0} / {:.0} |",
        polled["poll_interval_ms"],
        polled["freshness_ms"]["p50"].as_f64().unwrap_or(0.0),
        polled["freshness_ms"]["p95"].as_f64().unwrap_or(0.0)
    );
    casement_testkit::write_bench_json(
        "wiki.json",
        &json!({
            "events": events,
            "backlog_seconds": backlog_s,
            "events_per_second": events as f64 / backlog_s.max(1e-9),
            "api_requests": requests.len(),
            "revisions_asked": asked,
            "revisions_fetched": fetched,
            "upsert_events": upserts,
            "sentences_embedded": embedded,
            "sentences_reused": reused,
            "whole_page_sentences": whole,
            "live_edits": LIVE_EDITS,
            "freshness_ms": {"p50": p50, "p95": p95},
            "polling": polled,
        }),
    );
}
