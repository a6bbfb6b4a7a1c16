//! `make bench-store`: Qdrant Edge with the default settings (write-ahead log flushed after
//! every plan, HNSW built in the background past 20k unindexed points).
//!
//! Points are real: the SQuAD v1.1 dev articles segmented by the text core (sentence
//! payloads with their windows, BM25 sparse vectors of sentence + context), copied under
//! new document ids up to 100k points. Dense vectors are synthetic (no model in the loop,
//! so the figures are the store's): each distinct sentence gets a random unit vector,
//! each copy a perturbed one; a query vector is a perturbed vector of a random sentence,
//! and its text a SQuAD question. Reports upsert throughput, hybrid query latency
//! (p50/p95/p99, one client, after the index is built) at 10k and 100k points and disk
//! use per 100k points; writes `target/bench/store.json`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use casement_store::{EdgeStore, HybridQuery, QueryFilter, Store, StoreConfig};
use casement_text::{ChangePlan, Format, Revision, TextConfig, hash_hex, plan_upsert};
use serde::Deserialize;
use serde_json::json;

const DIMENSION: usize = 384;
const QUERIES: usize = 1_000;

#[derive(Deserialize)]
struct Article {
    title: String,
    text: String,
    qas: Vec<Qa>,
}

#[derive(Deserialize)]
struct Qa {
    question: String,
}

fn shared_data() -> PathBuf {
    casement_testkit::data("")
}

/// xorshift64* with Box-Muller normals.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn unit(&mut self) -> f32 {
        ((self.next() >> 40) as f32 + 0.5) / (1u64 << 24) as f32
    }

    fn normal(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// A random unit vector fixed by `key`, plus gaussian noise of `noise` per unit length.
fn vector(key: &str, noise: f32, rng: &mut Rng) -> Vec<f32> {
    let seed = u64::from_str_radix(&hash_hex(key.as_bytes())[..16], 16).unwrap_or(1) | 1;
    let mut base = Rng(seed);
    let scale = 1.0 / (DIMENSION as f32).sqrt();
    normalise(
        (0..DIMENSION)
            .map(|_| (base.normal() + noise * rng.normal()) * scale)
            .collect(),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index].as_secs_f64() * 1e3
}

struct Loader {
    articles: Vec<Article>,
    next: usize,
    rng: Rng,
    points: usize,
    busy: Duration,
}

impl Loader {
    fn plan(&mut self) -> (ChangePlan, Vec<Vec<f32>>) {
        let article = &self.articles[self.next % self.articles.len()];
        let copy = self.next / self.articles.len();
        self.next += 1;
        let revision = Revision {
            metadata: Default::default(),
            doc_id: format!("{}#{copy}", article.title),
            revision: 1,
            title: Some(article.title.replace('_', " ")),
            url: None,
            tenant: Some(format!("tenant-{}", copy % 4)),
            format: Format::Text,
            content: article.text.clone(),
        };
        let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
        let noise = if copy == 0 { 0.0 } else { 0.35 };
        let rng = &mut self.rng;
        let vectors = plan
            .embed
            .iter()
            .map(|r| vector(&r.sentence, noise, rng))
            .collect();
        (plan, vectors)
    }

    async fn load_until(&mut self, store: &EdgeStore, target: usize) {
        while self.points < target {
            let (plan, vectors) = self.plan();
            let started = Instant::now();
            store.apply(&plan, &vectors).await.expect("apply");
            self.busy += started.elapsed();
            self.points += plan.embed.len();
        }
    }
}

async fn measure_queries(
    store: &EdgeStore,
    questions: &[String],
    sentences: &[String],
) -> serde_json::Value {
    let mut rng = Rng(7);
    let mut latencies = Vec::with_capacity(QUERIES);
    let mut empty = 0;
    for i in 0..QUERIES + 50 {
        let query = HybridQuery {
            dense: vector(&sentences[rng.below(sentences.len())], 0.6, &mut rng),
            text: questions[rng.below(questions.len())].clone(),
            limit: 10,
            candidates: 50,
            filter: QueryFilter::default(),
            channels: casement_store::Channels::Hybrid,
            channel_ranks: false,
        };
        let started = Instant::now();
        let hits = store.query(&query).await.expect("query");
        if i >= 50 {
            // The first 50 warm the caches.
            latencies.push(started.elapsed());
            empty += usize::from(hits.is_empty());
        }
    }
    assert_eq!(empty, 0, "every query finds hits");
    latencies.sort();
    json!({
        "p50": percentile(&latencies, 0.50),
        "p95": percentile(&latencies, 0.95),
        "p99": percentile(&latencies, 0.99),
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let path = shared_data().join("squad/dev-v1.1.articles.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (set CASEMENT_SHARED_DATA)", path.display()));
    let articles: Vec<Article> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("article"))
        .collect();
    let questions: Vec<String> = articles
        .iter()
        .flat_map(|a| a.qas.iter().map(|q| q.question.clone()))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = StoreConfig::default();
    config.edge.path = dir.path().join("index");
    let store = EdgeStore::open(&config, DIMENSION).expect("open");
    let mut loader = Loader {
        articles,
        next: 0,
        rng: Rng(42),
        points: 0,
        busy: Duration::ZERO,
    };
    let sentences: Vec<String> = (0..loader.articles.len())
        .flat_map(|_| loader.plan().0.embed.into_iter().map(|r| r.sentence))
        .collect();
    loader.next = 0;
    println!("distinct sentences in SQuAD dev: {}", sentences.len());

    let mut report = serde_json::Map::new();
    let mut query_ms = serde_json::Map::new();
    for (label, target) in [("10k", 10_000), ("100k", 100_000)] {
        let started = Instant::now();
        loader.load_until(&store, target).await;
        println!(
            "loaded {} points ({:.1} s of writes so far, {:.1} s this phase)",
            loader.points,
            loader.busy.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        let optimising = Instant::now();
        store.optimize().await.expect("optimize");
        println!("index built in {:.1} s", optimising.elapsed().as_secs_f64());
        let figures = measure_queries(&store, &questions, &sentences).await;
        println!("hybrid query at {label}: {figures}");
        query_ms.insert(label.to_owned(), figures);
    }
    let upsert_points_per_s = loader.points as f64 / loader.busy.as_secs_f64();
    let stats = store.stats().await.expect("stats");
    let usage = stats.disk.unwrap_or_default();
    let disk = usage.total() as f64;
    let disk_per_100k = disk * 100_000.0 / stats.points as f64;
    let wal = usage.wal;
    println!(
        "disk: {:.1} MiB in all, of which write-ahead log {:.1} MiB",
        disk / (1 << 20) as f64,
        wal as f64 / (1 << 20) as f64
    );
    report.insert("wal_bytes".into(), json!(wal));
    report.insert("points".into(), json!(stats.points));
    report.insert("documents".into(), json!(stats.documents));
    report.insert("upsert_points_per_s".into(), json!(upsert_points_per_s));
    report.insert(
        "query_ms".into(),
        serde_json::Value::Object(query_ms.clone()),
    );
    report.insert("disk_bytes_per_100k".into(), json!(disk_per_100k));
    report.insert(
        "settings".into(),
        json!({
            "dimension": DIMENSION,
            "sync_writes": config.edge.sync_writes,
            "index_after_points": config.edge.index_after_points,
            "limit": 10,
            "candidates_per_channel": 50,
            "queries": QUERIES,
        }),
    );

    println!();
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!("| upsert (points/s, flushed per plan) | {upsert_points_per_s:.0} | ≥ 5,000 |");
    for label in ["10k", "100k"] {
        let q = &query_ms[label];
        println!(
            "| hybrid query at {label} p50 / p95 / p99 (ms) | {:.2} / {:.2} / {:.2} | p95 ≤ 10 at 100k |",
            q["p50"].as_f64().unwrap_or(0.0),
            q["p95"].as_f64().unwrap_or(0.0),
            q["p99"].as_f64().unwrap_or(0.0)
        );
    }
    println!(
        "| disk per 100k points (MiB) | {:.1} | |",
        disk_per_100k / (1 << 20) as f64
    );

    casement_testkit::write_bench_json("store.json", &report);
}
