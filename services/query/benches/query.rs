//! `make bench-query`: the query service's release binary over ≥ 100k indexed sentences of
//! real text (see `corpus.rs`), driven over HTTP by a closed-loop load generator (each of
//! `c` connections sends its next request when the previous answer arrives; SQuAD
//! questions in rotation, `top_k` 10). Requests/s and p50/p95/p99 at concurrency 1 and 8,
//! without and with rerank (the default reranker over the 10 best merged windows), each on
//! questions not asked before; then the first scenario's questions again, whose embeddings
//! come from the query-embedding cache (`search.embedding_cache`); then, as the reference,
//! the first scenario on a server with the settings of the build before (embedder threads =
//! cores, no cache).
//! Then access control (issue 39): one document in five is restricted to one of 10
//! groups (written once into the kept index as payload updates, nothing embedded), and
//! the first scenario runs on one server alternately as an operator's key (no filter) and
//! as a key of one group (the payload filter on `public` / `access_groups` in every
//! query), in blocks of 100, so both see the same machine.
//! Writes `target/bench/query.json`. The index is built once (real embeddings, about
//! 7 minutes on 2 cores) and kept in `target/bench/query-index`; `BENCH_QUERY_INDEX_ONLY=1` stops there.

mod corpus;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder};
use casement_pipeline::EnrichConfig;
use casement_store::{EdgeStore, Store, StoreConfig};
use serde_json::{Value, json};

const TARGET_SENTENCES: u64 = 100_000;
/// Bump when the corpus changes (2: revision logs read in publish order, `seq`).
const CORPUS_VERSION: u32 = 2;

use casement_testkit::bench_dir;

fn store_config(dir: &Path) -> StoreConfig {
    let mut config = StoreConfig::default();
    config.edge.path = dir.join("index");
    // A benchmark index built once: no flush after every document (the WAL still makes
    // an interrupted build resumable).
    config.edge.sync_writes = false;
    config
}

/// Builds the index unless a complete one is there; returns (sentences, documents).
async fn ensure_index(dir: &Path) -> (u64, u64) {
    let marker = dir.join("corpus.json");
    if let Ok(text) = std::fs::read_to_string(&marker) {
        let m: Value = serde_json::from_str(&text).unwrap_or_default();
        if m["version"] == CORPUS_VERSION
            && m["sentences"].as_u64() >= Some(TARGET_SENTENCES)
            && m["optimized"] == true
        {
            eprintln!("reusing the index in {} ({m})", dir.display());
            return (
                m["sentences"].as_u64().unwrap_or(0),
                m["documents"].as_u64().unwrap_or(0),
            );
        }
    }
    // An interrupted build resumes: documents already indexed plan nothing (same revision).
    std::fs::create_dir_all(dir).expect("index dir");
    let model: Arc<dyn Embed> =
        Arc::new(OnnxEmbedder::load(&EmbedderConfig::default()).expect("model (make models)"));
    let store = EdgeStore::open(&store_config(dir), model.dimension()).expect("store");
    let metrics = casement_pipeline::Metrics::new();
    let processor = casement_testkit::processor(
        store.clone(),
        model.clone(),
        &EnrichConfig::default(),
        &metrics,
    );
    let started = Instant::now();
    for (i, event) in corpus::events().enumerate() {
        processor.process(&event).await.expect("index");
        if i % 500 == 499 {
            let stats = store.stats().await.expect("stats");
            let (sentences, documents) = (stats.points, stats.documents);
            eprintln!(
                "  indexed {documents} documents, {sentences} sentences, {:.0} s ({:.0} sentences/s)",
                started.elapsed().as_secs_f64(),
                sentences as f64 / started.elapsed().as_secs_f64()
            );
            if sentences >= TARGET_SENTENCES {
                break;
            }
        }
    }
    let stats = store.stats().await.expect("stats");
    // `points` counts sentence points only (document states are not points of the index).
    let (sentences, documents) = (stats.points, stats.documents);
    assert!(
        sentences >= TARGET_SENTENCES,
        "the corpus has only {sentences} sentences"
    );
    // Every segment indexed, as a service's would be after its background builds: the
    // last points of a build would otherwise stay in a segment searched without HNSW.
    let optimizing = Instant::now();
    store.optimize().await.expect("optimize");
    eprintln!(
        "indexed every segment in {:.0} s",
        optimizing.elapsed().as_secs_f64()
    );
    drop(processor);
    drop(store);
    let m = json!({"version": CORPUS_VERSION, "sentences": sentences, "documents": documents,
                   "build_seconds": started.elapsed().as_secs_f64(), "optimized": true});
    std::fs::write(&marker, m.to_string()).expect("marker");
    eprintln!(
        "indexed {documents} documents, {sentences} sentences in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    (sentences, documents)
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the release binary on `dir`'s index; `settings` are extra `CASEMENT_QUERY__*`
/// variables (the reference run's).
async fn start_server(dir: &Path, settings: &[(&str, String)]) -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_casement-query"))
        .arg("run")
        .env("CASEMENT_QUERY__LISTEN", format!("127.0.0.1:{port}"))
        .env("CASEMENT_QUERY__STORE__EDGE__PATH", dir.join("index"))
        .env("CASEMENT_QUERY__LOG__FILTER", "warn")
        .envs(settings.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .spawn()
        .expect("start casement-query");
    let mut server = Server(child);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            return (server, base);
        }
        assert!(
            Instant::now() < deadline,
            "the query service did not become ready"
        );
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!("the query service exited at start ({status}); see its log above");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `requests` searches over `concurrency` connections; latencies in ms.
async fn load(
    base: &str,
    questions: &Arc<Vec<String>>,
    rerank: bool,
    concurrency: usize,
    requests: usize,
    offset: usize,
) -> Value {
    summarize(latencies(base, None, questions, rerank, concurrency, requests, offset).await)
}

fn summarize((mut all, seconds): (Vec<f64>, f64)) -> Value {
    all.sort_by(f64::total_cmp);
    json!({"requests": all.len(), "rps": all.len() as f64 / seconds,
           "p50_ms": percentile(&all, 0.5), "p95_ms": percentile(&all, 0.95), "p99_ms": percentile(&all, 0.99)})
}

/// The latencies (ms) of `requests` searches over `concurrency` connections, sent with
/// `key` when given, and the seconds they took.
async fn latencies(
    base: &str,
    key: Option<&str>,
    questions: &Arc<Vec<String>>,
    rerank: bool,
    concurrency: usize,
    requests: usize,
    offset: usize,
) -> (Vec<f64>, f64) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (base, questions) = (base.to_owned(), questions.clone());
        let key = key.map(str::to_owned);
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut latencies = Vec::new();
            let mut i = worker;
            while i < requests {
                let q = &questions[(offset + i) % questions.len()];
                let t = Instant::now();
                let mut request = client
                    .post(format!("{base}/v1/search"))
                    .json(&json!({"query": q, "top_k": 10, "rerank": rerank}));
                if let Some(key) = &key {
                    request = request.bearer_auth(key);
                }
                let response = request.send().await.expect("request");
                assert!(response.status().is_success(), "{}", response.status());
                let _ = response.bytes().await.expect("body");
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                i += concurrency;
            }
            latencies
        }));
    }
    let mut all = Vec::with_capacity(requests);
    for task in tasks {
        all.extend(task.await.expect("worker"));
    }
    (all, started.elapsed().as_secs_f64())
}

/// Groups the restricted documents are spread over.
const ACCESS_GROUPS: usize = 10;
/// One document in this many is restricted.
const RESTRICTED_ONE_IN: usize = 5;

/// Restricts one document in five of the kept index to one of 10 groups (the same
/// revision again with `access`: payload updates only), once.
async fn ensure_access(dir: &Path, documents: u64) -> u64 {
    let marker = dir.join("corpus.json");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(&marker).expect("marker")).expect("json");
    if let Some(restricted) = m["access"]["restricted"].as_u64() {
        return restricted;
    }
    let model: Arc<dyn Embed> =
        Arc::new(OnnxEmbedder::load(&EmbedderConfig::default()).expect("model (make models)"));
    let store = EdgeStore::open(&store_config(dir), model.dimension()).expect("store");
    let metrics = casement_pipeline::Metrics::new();
    let processor =
        casement_testkit::processor(store.clone(), model, &EnrichConfig::default(), &metrics);
    let started = Instant::now();
    let mut restricted = 0;
    for (i, mut event) in corpus::events().take(documents as usize).enumerate() {
        if i % RESTRICTED_ONE_IN != 0 {
            continue;
        }
        if let casement_events::Change::Upsert(revision) = &mut event.change {
            let group = format!("group-{}", (i / RESTRICTED_ONE_IN) % ACCESS_GROUPS);
            revision.access = Some(casement_text::Access::groups([group]));
        }
        processor.process(&event).await.expect("restrict");
        restricted += 1;
    }
    store.optimize().await.expect("optimize");
    drop(processor);
    drop(store);
    eprintln!(
        "restricted {restricted} of {documents} documents in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    m["access"] = json!({"restricted": restricted, "groups": ACCESS_GROUPS});
    std::fs::write(&marker, m.to_string()).expect("marker");
    restricted
}

/// The first scenario (no rerank, c1) on one server, as an operator (no filter) and as a
/// reader of one group (the access filter in every query), alternating in blocks.
async fn access_filter(dir: &Path, questions: &Arc<Vec<String>>) -> Value {
    const OPERATOR: &str = "bench-operator-key-0001";
    const READER: &str = "bench-reader-key-000001";
    let keys =
        format!("[{{token = \"{OPERATOR}\"}}, {{token = \"{READER}\", groups = [\"group-3\"]}}]");
    let (_server, base) = start_server(dir, &[("CASEMENT_QUERY__AUTH__KEYS", keys)]).await;
    latencies(&base, Some(OPERATOR), questions, false, 2, 100, 6_000).await;
    latencies(&base, Some(READER), questions, false, 2, 100, 6_000).await;
    let (mut open, mut filtered) = ((Vec::new(), 0.0), (Vec::new(), 0.0));
    for block in 0..10 {
        // The same questions for both, in turn (each once per key: the query-embedding
        // cache helps both alike).
        let offset = block * 100;
        let (first, second) = if block % 2 == 0 {
            (OPERATOR, READER)
        } else {
            (READER, OPERATOR)
        };
        for key in [first, second] {
            let (l, s) = latencies(&base, Some(key), questions, false, 1, 100, offset).await;
            let into = if key == OPERATOR {
                &mut open
            } else {
                &mut filtered
            };
            into.0.extend(l);
            into.1 += s;
        }
    }
    json!({"unfiltered": summarize(open), "filtered": summarize(filtered),
           "reader_groups": ["group-3"]})
}

/// Mean of a histogram from `/metrics` (sum / count), optionally one label value.
fn mean(metrics: &str, name: &str, label: &str) -> f64 {
    let value = |suffix: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}_{suffix}")) && l.contains(label))
            .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    value("sum") / value("count").max(1.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = bench_dir().join("query-index");
    let (sentences, documents) = ensure_index(&dir).await;
    let restricted = ensure_access(&dir, documents).await;
    if std::env::var_os("BENCH_QUERY_INDEX_ONLY").is_some() {
        return;
    }
    let (server, base) = start_server(&dir, &[]).await;
    let questions = Arc::new(corpus::questions());
    eprintln!("warming up");
    load(&base, &questions, false, 2, 100, 6_000).await;
    load(&base, &questions, true, 2, 40, 6_100).await;

    let mut report = json!({"sentences": sentences, "documents": documents, "top_k": 10});
    // Each scenario but the last asks questions not asked before (the query-embedding
    // cache misses every time); the last asks the first scenario's questions again (every
    // embedding comes from the cache), as a support bot's repeated questions would.
    let scenarios = [
        ("no_rerank", false, 1, 1_000, 0),
        ("no_rerank", false, 8, 2_000, 1_000),
        ("rerank", true, 1, 300, 3_000),
        ("rerank", true, 8, 400, 4_000),
        ("no_rerank_repeated", false, 1, 1_000, 0),
    ];
    for (name, rerank, concurrency, requests, offset) in scenarios {
        eprintln!("{name} c{concurrency}: {requests} requests");
        let figures = load(&base, &questions, rerank, concurrency, requests, offset).await;
        report[name][format!("c{concurrency}")] = figures;
    }
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    report["rerank_candidates_mean"] =
        json!(mean(&metrics, "casement_query_rerank_candidates", ""));
    report["windows_returned_mean"] = json!(mean(&metrics, "casement_query_returned_windows", ""));
    let mut stages = serde_json::Map::new();
    for stage in ["embed", "search", "expand", "merge", "rerank"] {
        stages.insert(
            stage.into(),
            json!(
                1000.0
                    * mean(
                        &metrics,
                        "casement_query_stage_duration_seconds",
                        &format!("stage=\"{stage}\"")
                    )
            ),
        );
    }
    report["stage_mean_ms"] = Value::Object(stages);
    let cache = |outcome: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("casement_query_embedding_cache_total")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    report["embedding_cache"] = json!({"hits": cache("hit"), "misses": cache("miss")});
    drop(server);

    // The reference, in the same run: the first scenario again (same questions, same
    // index) on a server with the settings of the build before issue 17's latency work.
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let reference = [
        ("CASEMENT_QUERY__EMBEDDER__THREADS", cores.to_string()),
        ("CASEMENT_QUERY__SEARCH__EMBEDDING_CACHE", "0".to_owned()),
    ];
    eprintln!("reference server: {reference:?}");
    let (_server, base) = start_server(&dir, &reference).await;
    load(&base, &questions, false, 2, 100, 6_000).await;
    report["reference"]["settings"] = json!(
        reference
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
    );
    report["reference"]["c1"] = load(&base, &questions, false, 1, 1_000, 0).await;
    drop(_server);
    eprintln!("access filter: {restricted} of {documents} documents restricted");
    report["access"] = access_filter(&dir, &questions).await;
    report["access"]["restricted_documents"] = json!(restricted);

    println!(
        "\nquery service, {sentences} sentences in {documents} documents, top_k 10, release build, closed loop"
    );
    println!("| scenario | concurrency | requests/s | p50 ms | p95 ms | p99 ms | target |");
    println!("|---|---|---|---|---|---|---|");
    for (name, target) in [
        ("no_rerank", "p95 ≤ 10 ms at c1"),
        ("rerank", "p95 ≤ 150 ms at c1"),
        ("no_rerank_repeated", ""),
        ("reference", "the no_rerank row's reference"),
    ] {
        for c in ["c1", "c8"] {
            let f = &report[name][c];
            if f.is_null() {
                continue;
            }
            println!(
                "| {name} | {c} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
                f["rps"].as_f64().unwrap_or(0.0),
                f["p50_ms"].as_f64().unwrap_or(0.0),
                f["p95_ms"].as_f64().unwrap_or(0.0),
                f["p99_ms"].as_f64().unwrap_or(0.0),
                if c == "c1" { target } else { "" }
            );
        }
    }
    let p95 = |name: &str| report[name]["c1"]["p95_ms"].as_f64().unwrap_or(f64::NAN);
    println!(
        "no_rerank c1 p95 / reference p95: {:.2} (reference: {})",
        p95("no_rerank") / p95("reference"),
        report["reference"]["settings"]
    );
    println!(
        "windows returned per search (mean) {:.1}; windows reranked per reranked search (mean) {:.1}; mean ms per stage {}; query-embedding cache {}",
        report["windows_returned_mean"],
        report["rerank_candidates_mean"],
        report["stage_mean_ms"],
        report["embedding_cache"]
    );
    let access = &report["access"];
    let (open, filtered) = (&access["unfiltered"], &access["filtered"]);
    println!(
        "access filter ({restricted} of {documents} documents restricted to 10 groups; a reader of one group), no rerank, c1, alternating blocks of 100:\n\
         | key | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|\n\
         | operator (no filter) | {:.1} | {:.1} | {:.1} |\n| reader of group-3 (filtered) | {:.1} | {:.1} | {:.1} |\n\
         filtered p95 / unfiltered p95: {:.2} (target ≤ 1.10)",
        open["p50_ms"].as_f64().unwrap_or(f64::NAN),
        open["p95_ms"].as_f64().unwrap_or(f64::NAN),
        open["p99_ms"].as_f64().unwrap_or(f64::NAN),
        filtered["p50_ms"].as_f64().unwrap_or(f64::NAN),
        filtered["p95_ms"].as_f64().unwrap_or(f64::NAN),
        filtered["p99_ms"].as_f64().unwrap_or(f64::NAN),
        filtered["p95_ms"].as_f64().unwrap_or(f64::NAN)
            / open["p95_ms"].as_f64().unwrap_or(f64::NAN)
    );
    let path = bench_dir().join("query.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report).expect("json")).expect("write");
    println!("wrote {}", path.display());
}
