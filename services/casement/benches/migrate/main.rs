//! `make bench-migrate` (issue 21): an online model migration against the raw model and
//! the search latency it costs, in one run.
//!
//! The 48 SQuAD v1.1 dev articles are backfilled (fp32) by the release binary. A copy of
//! that data directory is migrated to the int8 model by `casement migrate` with nothing
//! else running: the migration's rate against the raw model's (target ≥ 0.8×, as for a
//! backfill). Then the release binary serves the original (`casement run`). Searches (SQuAD questions, one at a time, every
//! `MIGRATE_SEARCH_GAP_MS`, 100 by default) are timed before the migration (the
//! reference) and while `POST /v1/admin/migrations` rebuilds the index with the int8 model
//! from the stored records, up to the swap. The migration's rate (sentences embedded over
//! the copy passes and the index build, as the service reports it) is set against the raw
//! int8 model's over a seeded sample of the same embedding inputs, measured in this process
//! before the service starts (ONNX Runtime, batches of `embedder.batch_size`, inputs sorted
//! by length). The gate's figures (a golden set of SQuAD questions) are printed too.
//! Prints a table and writes `target/bench/migrate.json`. Needs `../shared/data`.
//!
//! With `QDRANT_URL` (a Qdrant server's gRPC address), the same against that server: the
//! articles backfilled behind two collection aliases of their own, one migrated by
//! `casement migrate` alone, the other online in `casement run` with `store.backend =
//! "server"`; writes `target/bench/migrate-server.json` and drops both aliases' collections.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use casement_inference::{EmbedderConfig, Precision};
use serde_json::{Value, json};
use workload::{articles, embedding_inputs, questions};

mod workload;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Latencies {
    ms: Vec<f64>,
    failures: usize,
}

impl Latencies {
    fn summary(&mut self) -> (f64, f64, usize) {
        self.ms.sort_by(f64::total_cmp);
        (
            percentile(&self.ms, 0.5),
            percentile(&self.ms, 0.95),
            self.ms.len(),
        )
    }
}

async fn search(http: &reqwest::Client, base: &str, query: &str) -> (f64, bool) {
    let started = Instant::now();
    let answer = http
        .post(format!("{base}/v1/search"))
        .json(&json!({"query": query, "top_k": 5}))
        .send()
        .await;
    let ok = match answer {
        Ok(response) if response.status().is_success() => response
            .json::<Value>()
            .await
            .is_ok_and(|body| body["windows"].as_array().is_some_and(|w| !w.is_empty())),
        _ => false,
    };
    (started.elapsed().as_secs_f64() * 1000.0, ok)
}

/// The store settings of a data directory's commands: the embedded store (none), or with
/// `QDRANT_URL` the server, behind the alias `alias`.
fn store_env(alias: &str) -> Vec<(String, String)> {
    match std::env::var("QDRANT_URL") {
        Ok(url) => vec![
            ("CASEMENT__STORE__BACKEND".into(), "server".into()),
            ("CASEMENT__STORE__COLLECTION".into(), alias.into()),
            ("CASEMENT__STORE__SERVER__URL".into(), url),
        ],
        Err(_) => Vec::new(),
    }
}

fn start(
    bin: &Path,
    data: &Path,
    port: u16,
    golden: &Path,
    log: &Path,
    store: &[(String, String)],
) -> Child {
    let watch = data.with_file_name("watch");
    std::fs::create_dir_all(&watch).unwrap();
    Command::new(bin)
        .env_remove("CASEMENT_CONFIG")
        .envs(store.iter().map(|(k, v)| (k, v)))
        .env("CASEMENT__EVAL__GOLDEN", golden)
        .env("CASEMENT__EVAL__INTERVAL_SECS", "86400")
        .env("CASEMENT__LOG__FILTER", "warn,casement=info")
        .args(["--data-dir", data.to_str().unwrap(), "run", "--watch"])
        .arg(&watch)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn main() {
    let work = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_casement"));
    let gap = Duration::from_millis(
        std::env::var("MIGRATE_SEARCH_GAP_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(100),
    );
    let articles = articles();
    let log = work.path().join("squad.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    for a in &articles {
        let line = json!({"doc_id": a.doc_id, "revision": 1, "title": a.title, "format": "text",
                          "content": a.text, "change": "create"});
        writeln!(out, "{line}").unwrap();
    }
    out.flush().unwrap();
    let questions = questions(20);
    let golden = work.path().join("golden.jsonl");
    let mut out = std::fs::File::create(&golden).unwrap();
    for (query, doc_id, answer) in questions.iter().take(100) {
        writeln!(
            out,
            "{}",
            json!({"query": query, "doc_id": doc_id, "text": answer})
        )
        .unwrap();
    }

    let inputs = embedding_inputs(&articles);
    let int8 = EmbedderConfig {
        precision: Precision::Int8,
        ..EmbedderConfig::default()
    };
    let model = casement_inference::load_embedder(&int8).expect("the int8 model (make models)");
    let (raw, _) = casement_testkit::raw_rate(model.as_ref(), &inputs, 2_000, int8.batch_size);
    drop(model);
    eprintln!(
        "raw int8 model: {raw:.1} sentences/s over a sample of {} inputs",
        inputs.len().min(2_000)
    );

    let server = std::env::var("QDRANT_URL").is_ok();
    let (online_store, alone_store) = (
        store_env(&format!("bench_migrate_online_{}", std::process::id())),
        store_env(&format!("bench_migrate_alone_{}", std::process::id())),
    );
    let backfill = |data: &Path, store: &[(String, String)]| {
        let backfill = Command::new(bin)
            .env_remove("CASEMENT_CONFIG")
            .envs(store.iter().map(|(k, v)| (k, v)))
            .args([
                "--data-dir",
                data.to_str().unwrap(),
                "backfill",
                log.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            backfill.status.success(),
            "{}",
            String::from_utf8_lossy(&backfill.stderr)
        );
        eprintln!("{}", String::from_utf8_lossy(&backfill.stdout).trim());
    };
    let data = work.path().join("data");
    backfill(&data, &online_store);

    // Offline: the migration alone on the machine.
    let alone = work.path().join("alone");
    if server {
        backfill(&alone, &alone_store);
    } else {
        let copied = Command::new("cp")
            .arg("-r")
            .arg(&data)
            .arg(&alone)
            .status()
            .unwrap();
        assert!(copied.success());
    }
    let offline = Command::new(bin)
        .env_remove("CASEMENT_CONFIG")
        .envs(alone_store.iter().map(|(k, v)| (k, v)))
        .args(["--data-dir", alone.to_str().unwrap(), "migrate", "--force"])
        .args(["--set", "embedder.precision=int8"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&offline.stderr).into_owned();
    assert!(offline.status.success(), "{said}");
    // "built index.2: 48 documents copied in 2 pass(es), N sentences embedded in S s (R sentences/s)"
    let built = said
        .lines()
        .find(|l| l.starts_with("built "))
        .expect("the build line");
    let offline_rate: f64 = built
        .rsplit_once('(')
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .expect("the rate");
    eprintln!("offline: {built}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let service_log = work.path().join("service.log");
    let mut child = start(bin, &data, port, &golden, &service_log, &online_store);
    let base = format!("http://127.0.0.1:{port}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let report = runtime.block_on(async {
        let http = reqwest::Client::new();
        let ready = Instant::now();
        while http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .map_or(true, |r| !r.status().is_success())
        {
            assert!(
                ready.elapsed() < Duration::from_secs(120),
                "the service did not start"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut queries = questions.iter().map(|q| q.0.as_str()).cycle();
        let mut before = Latencies {
            ms: Vec::new(),
            failures: 0,
        };
        for _ in 0..150 {
            let (ms, ok) = search(&http, &base, queries.next().unwrap()).await;
            before.ms.push(ms);
            before.failures += usize::from(!ok);
            tokio::time::sleep(gap).await;
        }
        let started = Instant::now();
        let answer = http
            .post(format!("{base}/v1/admin/migrations"))
            .json(&json!({"set": ["embedder.precision=int8"], "force": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer.status().as_u16(),
            202,
            "{}",
            answer.text().await.unwrap()
        );
        let mut during = Latencies {
            ms: Vec::new(),
            failures: 0,
        };
        let status = loop {
            let (ms, ok) = search(&http, &base, queries.next().unwrap()).await;
            during.ms.push(ms);
            during.failures += usize::from(!ok);
            let status: Value = http
                .get(format!("{base}/v1/admin/migrations"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let phase = status["phase"].as_str().unwrap_or_default().to_owned();
            if !["building", "gating", "swapping"].contains(&phase.as_str()) {
                break status;
            }
            tokio::time::sleep(gap).await;
        };
        (before, during, status, started.elapsed().as_secs_f64())
    });
    let _ = child.kill();
    let _ = child.wait();
    let (mut before, mut during, status, seconds) = report;
    assert_eq!(
        status["phase"],
        "swapped",
        "{status}\n{}",
        std::fs::read_to_string(&service_log).unwrap_or_default()
    );
    let rate = status["sentences_per_second"].as_f64().unwrap();
    let embedded: u64 = status["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["embedded"].as_u64().unwrap())
        .sum();
    let (p50_before, p95_before, n_before) = before.summary();
    let (p50_during, p95_during, n_during) = during.summary();
    let gate = &status["gate"];
    println!(
        "\n## bench-migrate: {} SQuAD articles, fp32 -> int8, online{}\n",
        articles.len(),
        if server { ", on a Qdrant server" } else { "" }
    );
    println!("| figure | value |");
    println!("|---|---|");
    println!("| sentences embedded by the migration | {embedded} |");
    println!("| raw int8 model sentences/s, same run | {raw:.1} |");
    println!(
        "| `casement migrate`, nothing else running: sentences/s (copy and index build) | {offline_rate:.1} |"
    );
    println!("| **ratio to raw** | **{:.2}** |", offline_rate / raw);
    println!("| online, with the searches below: sentences/s | {rate:.1} |");
    println!("| ratio to raw | {:.2} |", rate / raw);
    println!("| migration wall time, request to swap (gate included) | {seconds:.1} s |");
    println!(
        "| search p50 / p95 before ({n_before} searches) | {p50_before:.1} / {p95_before:.1} ms |"
    );
    println!(
        "| search p50 / p95 during ({n_during} searches) | {p50_during:.1} / {p95_during:.1} ms |"
    );
    println!("| p95 during / before | {:.2} |", p95_during / p95_before);
    println!(
        "| searches failed or empty, before / during | {} / {} |",
        before.failures, during.failures
    );
    println!(
        "| gate recall@5 serving / new | {} / {} |",
        gate["serving"]["recall"], gate["new"]["recall"]
    );
    println!(
        "| gate MRR@5 serving / new | {} / {} |",
        gate["serving"]["mrr"], gate["new"]["mrr"]
    );
    if server {
        runtime.block_on(async {
            for store in [&online_store, &alone_store] {
                let mut config = casement_store::StoreConfig {
                    backend: casement_store::Backend::Server,
                    collection: store[1].1.clone(),
                    ..casement_store::StoreConfig::default()
                };
                config.server.url = store[2].1.clone();
                let _ = casement_store::Aliases::connect(&config)
                    .unwrap()
                    .drop_all()
                    .await;
            }
        });
    }
    casement_testkit::write_bench_json(
        if server { "migrate-server" } else { "migrate" },
        &json!({
            "articles": articles.len(),
            "sentences_embedded": embedded,
            "raw_sentences_per_s": raw,
            "offline_sentences_per_s": offline_rate,
            "ratio": offline_rate / raw,
            "online_sentences_per_s": rate,
            "online_ratio": rate / raw,
            "search_gap_ms": gap.as_millis() as u64,
            "seconds_to_swap": seconds,
            "search_before_ms": {"p50": p50_before, "p95": p95_before, "n": n_before, "failures": before.failures},
            "search_during_ms": {"p50": p50_during, "p95": p95_during, "n": n_during, "failures": during.failures},
            "gate": gate,
        }),
    );
}
