//! `make bench-store`: Qdrant Edge with the default settings (write-ahead log flushed after
//! every plan, HNSW built in the background past 20k unindexed points) and, when
//! `QDRANT_URL` names a Qdrant server (gRPC), the same scenario against the server backend
//! in a collection of its own (its disk is read from the server's storage directory when
//! `QDRANT_STORAGE` names it), printed side by side.
//!
//! Points are real: the SQuAD v1.1 dev articles segmented by the text core (sentence
//! payloads with their windows, BM25 sparse vectors of sentence + context), copied under
//! new document ids up to 100k points. Dense vectors are synthetic (no model in the loop,
//! so the figures are the store's): each distinct sentence gets a random unit vector,
//! each copy a perturbed one; a query vector is a perturbed vector of a random sentence,
//! and its text a SQuAD question. Reports upsert throughput, hybrid query latency
//! (p50/p95/p99, one client, after the index is built) at 10k and 100k points and disk
//! use per 100k points; writes `target/bench/store.json` (the server's figures under
//! `server`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use casement_store::{
    AnyStore, DiskUsage, EdgeStore, HybridQuery, QueryFilter, ServerStore, Store, StoreConfig,
};
use casement_text::{ChangePlan, Format, Revision, TextConfig, hash_hex, plan_upsert};
use serde::Deserialize;
use serde_json::json;

const DIMENSION: usize = 384;
const QUERIES: usize = 1_000;

#[derive(Deserialize, Clone)]
struct Article {
    title: String,
    text: String,
    qas: Vec<Qa>,
}

#[derive(Deserialize, Clone)]
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
            access: None,
            metadata: Default::default(),
            doc_id: format!("{}#{copy}", article.title),
            revision: 1,
            title: Some(article.title.replace('_', " ")),
            url: None,
            tenant: Some(format!("tenant-{}", copy % 4)),
            format: Format::Text,
            content: article.text.clone(),
            revision_url: None,
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

    async fn load_until(&mut self, store: &AnyStore, target: usize) {
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
    store: &AnyStore,
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

/// One backend under test: the store and where its bytes on disk can be read.
struct Backend {
    name: &'static str,
    store: AnyStore,
    settings: serde_json::Value,
    disk: Box<dyn Fn() -> Option<DiskUsage>>,
}

/// A Qdrant server at `QDRANT_URL` (gRPC), in a collection of its own; its disk is read
/// from `QDRANT_STORAGE` (the server's storage directory) when that is set.
async fn server_backend(url: String) -> Backend {
    let mut config = StoreConfig {
        backend: casement_store::Backend::Server,
        collection: format!("casement_bench_{}", std::process::id()),
        ..StoreConfig::default()
    };
    config.server.url = url.clone();
    let store = ServerStore::open(&config, DIMENSION)
        .await
        .unwrap_or_else(|e| panic!("QDRANT_URL={url}: {e}"));
    // A collection left by an interrupted run of this process id starts empty.
    store.delete_collection().await.expect("delete collection");
    let store = ServerStore::open(&config, DIMENSION).await.expect("open");
    let storage = std::env::var_os("QDRANT_STORAGE").map(PathBuf::from);
    if storage.is_none() {
        println!("QDRANT_STORAGE is not set: the server's disk use is not reported");
    }
    let collection = config.collection.clone();
    Backend {
        name: "server",
        store: AnyStore::Server(store),
        settings: json!({ "url": url, "collection": collection }),
        disk: Box::new(move || {
            let dir = storage.as_ref()?.join("collections").join(&collection);
            // The collection's one shard keeps its write-ahead log in `0/wal`.
            let all = EdgeStore::disk_usage(&dir).total();
            let wal = EdgeStore::disk_usage(&dir.join("0")).wal;
            Some(DiskUsage {
                segments: all.saturating_sub(wal),
                wal,
            })
        }),
    }
}

/// Loads 10k then 100k points into `backend`, building the index and measuring queries
/// at each size; the loader starts from the same seed for every backend, so each gets the
/// same points and the same queries.
async fn run(
    backend: &Backend,
    articles: &[Article],
    questions: &[String],
    sentences: &[String],
) -> serde_json::Value {
    let store = &backend.store;
    let mut loader = Loader {
        articles: articles.to_vec(),
        next: 0,
        rng: Rng(42),
        points: 0,
        busy: Duration::ZERO,
    };
    let mut query_ms = serde_json::Map::new();
    let mut index_build_s = serde_json::Map::new();
    for (label, target) in [("10k", 10_000), ("100k", 100_000)] {
        let started = Instant::now();
        loader.load_until(store, target).await;
        println!(
            "{}: loaded {} points ({:.1} s of writes so far, {:.1} s this phase)",
            backend.name,
            loader.points,
            loader.busy.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        let optimising = Instant::now();
        store.optimize().await.expect("optimize");
        let built = optimising.elapsed().as_secs_f64();
        println!("{}: index built in {built:.1} s", backend.name);
        index_build_s.insert(label.to_owned(), json!(built));
        let figures = measure_queries(store, questions, sentences).await;
        println!("{}: hybrid query at {label}: {figures}", backend.name);
        query_ms.insert(label.to_owned(), figures);
    }
    let upsert_points_per_s = loader.points as f64 / loader.busy.as_secs_f64();
    let stats = store.stats().await.expect("stats");
    let mut report = serde_json::Map::new();
    if let Some(usage) = (backend.disk)() {
        let disk = usage.total() as f64;
        println!(
            "{}: disk {:.1} MiB in all, of which write-ahead log {:.1} MiB",
            backend.name,
            disk / (1 << 20) as f64,
            usage.wal as f64 / (1 << 20) as f64
        );
        report.insert("wal_bytes".into(), json!(usage.wal));
        report.insert(
            "disk_bytes_per_100k".into(),
            json!(disk * 100_000.0 / stats.points as f64),
        );
    }
    report.insert("points".into(), json!(stats.points));
    report.insert("documents".into(), json!(stats.documents));
    report.insert("upsert_points_per_s".into(), json!(upsert_points_per_s));
    report.insert(
        "index_build_s".into(),
        serde_json::Value::Object(index_build_s),
    );
    report.insert("query_ms".into(), serde_json::Value::Object(query_ms));
    report.insert("settings".into(), backend.settings.clone());
    serde_json::Value::Object(report)
}

fn mib(bytes: Option<f64>) -> String {
    bytes.map_or_else(
        || "n/a".to_owned(),
        |b| format!("{:.1}", b / (1 << 20) as f64),
    )
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
    let sentences: Vec<String> = {
        let mut loader = Loader {
            articles: articles.clone(),
            next: 0,
            rng: Rng(42),
            points: 0,
            busy: Duration::ZERO,
        };
        (0..articles.len())
            .flat_map(|_| loader.plan().0.embed.into_iter().map(|r| r.sentence))
            .collect()
    };
    println!("distinct sentences in SQuAD dev: {}", sentences.len());

    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = StoreConfig::default();
    config.edge.path = dir.path().join("index");
    let edge_path = config.edge.path.clone();
    let mut backends = vec![Backend {
        name: "edge",
        store: AnyStore::Edge(EdgeStore::open(&config, DIMENSION).expect("open")),
        settings: json!({
            "sync_writes": config.edge.sync_writes,
            "index_after_points": config.edge.index_after_points,
        }),
        disk: Box::new(move || Some(EdgeStore::disk_usage(&edge_path))),
    }];
    match std::env::var("QDRANT_URL") {
        Ok(url) if !url.is_empty() => backends.push(server_backend(url).await),
        _ => println!("QDRANT_URL is not set: Qdrant Edge only"),
    }

    let mut reports = Vec::new();
    for backend in &backends {
        reports.push(run(backend, &articles, &questions, &sentences).await);
    }
    for backend in &backends {
        if let AnyStore::Server(store) = &backend.store {
            store.delete_collection().await.expect("delete collection");
        }
    }

    println!();
    let names: Vec<&str> = backends.iter().map(|b| b.name).collect();
    println!("| figure | {} | target |", names.join(" | "));
    println!("|---|{}---|", "---|".repeat(names.len()));
    let row = |figure: &str, cell: &dyn Fn(&serde_json::Value) -> String, target: &str| {
        let cells: Vec<String> = reports.iter().map(cell).collect();
        println!("| {figure} | {} | {target} |", cells.join(" | "));
    };
    row(
        "upsert (points/s, durable per plan)",
        &|r| format!("{:.0}", r["upsert_points_per_s"].as_f64().unwrap_or(0.0)),
        "≥ 5,000",
    );
    for label in ["10k", "100k"] {
        row(
            &format!("hybrid query at {label} p50 / p95 / p99 (ms)"),
            &|r| {
                let q = &r["query_ms"][label];
                format!(
                    "{:.2} / {:.2} / {:.2}",
                    q["p50"].as_f64().unwrap_or(0.0),
                    q["p95"].as_f64().unwrap_or(0.0),
                    q["p99"].as_f64().unwrap_or(0.0)
                )
            },
            "p95 ≤ 10 at 100k",
        );
        row(
            &format!("index build after loading {label} (s)"),
            &|r| format!("{:.1}", r["index_build_s"][label].as_f64().unwrap_or(0.0)),
            "",
        );
    }
    row(
        "disk per 100k points (MiB)",
        &|r| mib(r["disk_bytes_per_100k"].as_f64()),
        "",
    );
    row(
        "of which write-ahead log, at the end (MiB)",
        &|r| mib(r["wal_bytes"].as_f64()),
        "",
    );

    // The Edge figures stay at the top level (as before a server scenario existed).
    let mut report = match reports[0].clone() {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a report is an object"),
    };
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
    if let Some(server) = reports.get(1) {
        report.insert("server".into(), server.clone());
    }
    casement_testkit::write_bench_json("store.json", &report);
}
