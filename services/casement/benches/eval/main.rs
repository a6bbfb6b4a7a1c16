//! `make eval` (issue 17): retrieval quality of Casement as shipped against fixed chunks,
//! with ablations of Casement's own choices, in one run and with one embedding model.
//!
//! - **Casement**: `casement backfill` of each corpus into a fresh data directory (the
//!   release binary, default config), then `casement-query` over that index, asked over
//!   HTTP as a bot would (`POST /v1/search`, concurrency 1). Each ablation is the same
//!   service restarted with one setting changed (`CASEMENT_QUERY__…`), or an index built
//!   with one indexing setting changed (window radius 5, no title/heading context).
//! - **Fixed chunks** (`chunks.rs`): 512- and 256-token chunks in the same store with the
//!   same model and BM25; dense, BM25 and RRF rows.
//! - **SQuAD v1.1 dev** (48 articles, 10,570 questions): a hit when a returned passage of
//!   the question's article covers a reference answer's span. Articles alternate between
//!   the *tune* half (defaults are chosen there) and the *report* half. Recall@1/5/10,
//!   MRR@10, mean cl100k tokens of the top 5, and recall when only the leading passages
//!   that fit together in 512 / 1,024 cl100k tokens are kept (`score.rs`).
//! - **SciFact** (BEIR test, 300 claims): nDCG@10 over distinct documents in passage order,
//!   and the share of evidence sentences covered by the top 5 passages (188 claims).
//! - Client-side latency p50/p95 of the HTTP rows.
//!
//! Tokens are cl100k_base (OpenAI's tokenizer; the exact BPE file ships inside the
//! `tiktoken-rs` crate). Prints one table and writes `target/bench/eval.json`.
//!
//! Knobs: `EVAL_ROWS=defaults,dense,...` picks Casement rows (names in `variants()`),
//! `EVAL_CHUNKS=0` skips the chunk rows, `EVAL_QUESTIONS=N` takes every question whose
//! index is a multiple of `10570 / N` (a quick run), `EVAL_REUSE=1` keeps the indexes of a
//! previous run in `target/bench/eval/` (the default builds everything fresh).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chunks;
mod data;
mod score;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder};
use casement_store::Channels;
use data::{Half, SciFact, Squad};
use score::{Passage, SciFactSums, SquadSums, percentile};
use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;

/// The indexes Casement rows read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Index {
    /// Default config.
    Shipped,
    /// `text.window_radius = 5`.
    Radius5,
    /// `enrich.mode = "none"`: sentences embedded and indexed without title or headings.
    NoContext,
}

impl Index {
    fn name(self) -> &'static str {
        match self {
            Index::Shipped => "shipped",
            Index::Radius5 => "radius5",
            Index::NoContext => "nocontext",
        }
    }

    fn backfill_env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Index::Shipped => vec![],
            Index::Radius5 => vec![
                ("CASEMENT__TEXT__WINDOW_RADIUS", "5"),
                ("CASEMENT__SEARCH__INDEXED_WINDOW_RADIUS", "5"),
            ],
            Index::NoContext => vec![("CASEMENT__ENRICH__MODE", "none")],
        }
    }

    fn radius(self) -> usize {
        if self == Index::Radius5 { 5 } else { 3 }
    }
}

/// One Casement row: an index, service settings and a request radius.
struct Variant {
    name: &'static str,
    what: &'static str,
    index: Index,
    env: Vec<(&'static str, &'static str)>,
    radius: Option<usize>,
    /// The defaults are reported on both halves; ablations on the tune half.
    halves: &'static [Half],
    /// Also ask each SQuAD question with `token_budget` 512 and 1,024.
    budgets: bool,
}

fn variants() -> Vec<Variant> {
    let ablation = |name, what, index, env, radius| Variant {
        name,
        what,
        index,
        env,
        radius,
        halves: &[Half::Tune],
        budgets: false,
    };
    vec![
        Variant {
            name: "defaults",
            what: "Casement as shipped",
            index: Index::Shipped,
            env: vec![],
            radius: None,
            halves: &[Half::Tune, Half::Report],
            budgets: true,
        },
        ablation(
            "dense",
            "dense only",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CHANNELS", "dense")],
            None,
        ),
        ablation(
            "bm25",
            "BM25 only",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CHANNELS", "bm25")],
            None,
        ),
        ablation(
            "nocontext",
            "no title/heading context",
            Index::NoContext,
            vec![],
            None,
        ),
        ablation(
            "radius1",
            "window radius 1",
            Index::Shipped,
            vec![],
            Some(1),
        ),
        ablation(
            "radius2",
            "window radius 2",
            Index::Shipped,
            vec![],
            Some(2),
        ),
        ablation(
            "radius5",
            "window radius 5",
            Index::Radius5,
            vec![],
            Some(5),
        ),
        ablation(
            "hits1",
            "1 sentence hit per window asked",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__HITS_PER_WINDOW", "1")],
            None,
        ),
        ablation(
            "hits2",
            "2 sentence hits per window asked",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__HITS_PER_WINDOW", "2")],
            None,
        ),
        ablation(
            "sum",
            "windows ranked by the sum of their matches",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__WINDOW_SCORE", "sum")],
            None,
        ),
        ablation(
            "candidates20",
            "20 candidates per channel",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CANDIDATES", "20")],
            None,
        ),
        ablation(
            "candidates50",
            "50 candidates per channel",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CANDIDATES", "50")],
            None,
        ),
        ablation(
            "candidates200",
            "200 candidates per channel",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CANDIDATES", "200")],
            None,
        ),
        ablation(
            "rrf10",
            "RRF k 10",
            Index::Shipped,
            vec![("CASEMENT_QUERY__STORE__RRF_K", "10")],
            None,
        ),
        ablation(
            "rrf30",
            "RRF k 30",
            Index::Shipped,
            vec![("CASEMENT_QUERY__STORE__RRF_K", "30")],
            None,
        ),
        ablation(
            "rrf120",
            "RRF k 120",
            Index::Shipped,
            vec![("CASEMENT_QUERY__STORE__RRF_K", "120")],
            None,
        ),
    ]
}

/// Passages asked for: 10 on SQuAD (recall@10), 20 on SciFact (10 distinct documents).
const SQUAD_TOP_K: usize = 10;
const SCIFACT_TOP_K: usize = 20;

#[derive(Default)]
struct Row {
    system: String,
    what: String,
    squad: BTreeMap<Half, SquadSums>,
    scifact: Option<SciFactSums>,
    latencies: Vec<f64>,
}

impl Row {
    fn json(&self) -> Value {
        let mut latencies = self.latencies.clone();
        latencies.sort_by(f64::total_cmp);
        json!({
            "system": self.system,
            "what": self.what,
            "squad": self.squad.iter().map(|(h, s)| (h.name().to_owned(), s.json())).collect::<serde_json::Map<_, _>>(),
            "scifact": self.scifact.as_ref().map(SciFactSums::json),
            "latency_ms": if latencies.is_empty() { Value::Null } else {
                json!({"p50": percentile(&latencies, 0.5), "p95": percentile(&latencies, 0.95), "requests": latencies.len()})
            },
        })
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

fn env_list(name: &str) -> Option<Vec<String>> {
    std::env::var(name)
        .ok()
        .map(|s| s.split(',').map(|s| s.trim().to_owned()).collect())
}

async fn run() {
    let started = Instant::now();
    let bin = binaries();
    let reuse = std::env::var("EVAL_REUSE").is_ok_and(|v| v == "1");
    let rows_wanted = env_list("EVAL_ROWS");
    let chunk_rows = std::env::var("EVAL_CHUNKS").map_or(true, |v| v != "0");
    let work = casement_testkit::bench_dir().join("eval");
    std::fs::create_dir_all(&work).unwrap();
    let bpe = score::cl100k();

    let mut squad = data::squad();
    if let Some(n) = std::env::var("EVAL_QUESTIONS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    {
        let step = (squad.questions.len() / n.max(1)).max(1);
        squad.questions = squad.questions.into_iter().step_by(step).collect();
    }
    let scifact = data::scifact();
    let per_half = |h: Half| squad.questions.iter().filter(|q| q.half == h).count();
    eprintln!(
        "eval: SQuAD {} articles, {} questions ({} tune, {} report); SciFact {} abstracts, {} claims ({} with sentence evidence)",
        squad.docs.len(),
        squad.questions.len(),
        per_half(Half::Tune),
        per_half(Half::Report),
        scifact.docs.len(),
        scifact.claims.len(),
        scifact
            .claims
            .iter()
            .filter(|c| !c.evidence.is_empty())
            .count(),
    );

    let variants: Vec<Variant> = variants()
        .into_iter()
        .filter(|v| {
            rows_wanted
                .as_ref()
                .is_none_or(|w| w.iter().any(|n| n == v.name))
        })
        .collect();
    let mut rows: Vec<Row> = Vec::new();
    let mut indexes = serde_json::Map::new();

    // Casement: indexes first (each a fresh backfill), then one service per row.
    let mut squad_indexes: BTreeMap<Index, PathBuf> = BTreeMap::new();
    for variant in &variants {
        if let std::collections::btree_map::Entry::Vacant(entry) =
            squad_indexes.entry(variant.index)
        {
            let dir = work.join(format!("squad-{}", variant.index.name()));
            let summary = backfill(&bin, &dir, &squad.docs, variant.index, reuse);
            indexes.insert(format!("squad-{}", variant.index.name()), summary);
            entry.insert(dir);
        }
    }
    let scifact_dir = work.join("scifact-shipped");
    if variants.iter().any(|v| v.index == Index::Shipped) {
        let summary = backfill(&bin, &scifact_dir, &scifact.docs, Index::Shipped, reuse);
        indexes.insert("scifact-shipped".to_owned(), summary);
    }
    for variant in &variants {
        eprintln!("eval: Casement, {}", variant.what);
        let mut row = Row {
            system: "casement".into(),
            what: variant.what.into(),
            ..Row::default()
        };
        let service = Service::start(&bin, &squad_indexes[&variant.index], variant).await;
        for half in variant.halves {
            let mut sums = SquadSums::default();
            for q in squad.questions.iter().filter(|q| q.half == *half) {
                let (passages, ms) = service
                    .search(&q.question, SQUAD_TOP_K, variant.radius, None, &bpe)
                    .await;
                row.latencies.push(ms);
                sums.add(&passages, &q.doc_id, &q.answers);
                if variant.budgets {
                    for (i, budget) in score::BUDGETS.iter().enumerate() {
                        let (passages, _) = service
                            .search(
                                &q.question,
                                SQUAD_TOP_K,
                                variant.radius,
                                Some(*budget),
                                &bpe,
                            )
                            .await;
                        sums.add_asked(i, &passages, &q.doc_id, &q.answers);
                    }
                }
            }
            row.squad.insert(*half, sums);
        }
        drop(service);
        if variant.index == Index::Shipped {
            let service = Service::start(&bin, &scifact_dir, variant).await;
            let mut sums = SciFactSums::default();
            for c in &scifact.claims {
                let (passages, ms) = service
                    .search(&c.claim, SCIFACT_TOP_K, variant.radius, None, &bpe)
                    .await;
                row.latencies.push(ms);
                sums.add(&passages, &c.relevant, &c.evidence);
            }
            row.scifact = Some(sums);
        }
        eprintln!("  {}", row.json());
        rows.push(row);
    }

    if chunk_rows {
        chunk_baseline(&work, &squad, &scifact, &bpe, reuse, &mut rows).await;
    }

    print_table(&rows);
    let report = json!({
        "tokenizer": "cl100k_base (tiktoken-rs)",
        "split": "SQuAD articles alternate in file order: even-indexed articles are the tune half, odd-indexed the report half",
        "squad_top_k": SQUAD_TOP_K,
        "scifact_top_k": SCIFACT_TOP_K,
        "embedder": format!("{:?}", EmbedderConfig::default()),
        "indexes": indexes,
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        "seconds": started.elapsed().as_secs_f64(),
    });
    casement_testkit::write_bench_json("eval.json", &report);
}

async fn chunk_baseline(
    work: &Path,
    squad: &Squad,
    scifact: &SciFact,
    bpe: &CoreBPE,
    reuse: bool,
    rows: &mut Vec<Row>,
) {
    // The questions' embeddings, once, with the service's model and settings.
    let query_model =
        OnnxEmbedder::load(&EmbedderConfig::default()).expect("the embedding model (make models)");
    let t = Instant::now();
    let embed_all = |texts: Vec<&str>| -> Vec<Vec<f32>> {
        texts
            .chunks(64)
            .flat_map(|batch| query_model.embed(batch).expect("embedding questions"))
            .collect()
    };
    let squad_vectors = embed_all(
        squad
            .questions
            .iter()
            .map(|q| q.question.as_str())
            .collect(),
    );
    let claim_vectors = embed_all(scifact.claims.iter().map(|c| c.claim.as_str()).collect());
    eprintln!(
        "eval: {} questions and claims embedded in {:.0} s",
        squad_vectors.len() + claim_vectors.len(),
        t.elapsed().as_secs_f64()
    );
    let model = chunks::chunk_embedder();
    for size in [512, 256] {
        let squad_index = chunks::ChunkIndex::build(
            &work.join(format!("chunks{size}-squad")),
            &squad.docs,
            size,
            bpe,
            &model,
            reuse,
        )
        .await;
        let scifact_index = chunks::ChunkIndex::build(
            &work.join(format!("chunks{size}-scifact")),
            &scifact.docs,
            size,
            bpe,
            &model,
            reuse,
        )
        .await;
        for (channels, name) in [
            (Channels::Dense, "dense"),
            (Channels::Bm25, "BM25"),
            (Channels::Hybrid, "RRF"),
        ] {
            let mut row = Row {
                system: format!("chunks{size}"),
                what: format!(
                    "{size}-token chunks, {name} ({} + {} chunks)",
                    squad_index.chunks(),
                    scifact_index.chunks()
                ),
                ..Row::default()
            };
            for (q, dense) in squad.questions.iter().zip(&squad_vectors) {
                let passages = squad_index
                    .search(dense, &q.question, channels, SQUAD_TOP_K)
                    .await;
                row.squad
                    .entry(q.half)
                    .or_default()
                    .add(&passages, &q.doc_id, &q.answers);
            }
            let mut sums = SciFactSums::default();
            for (c, dense) in scifact.claims.iter().zip(&claim_vectors) {
                let passages = scifact_index
                    .search(dense, &c.claim, channels, SCIFACT_TOP_K)
                    .await;
                sums.add(&passages, &c.relevant, &c.evidence);
            }
            row.scifact = Some(sums);
            eprintln!("  {}", row.json());
            rows.push(row);
        }
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| system | half | SQuAD R@1 | R@5 | R@10 | MRR@10 | top-5 tokens | R in 512 | R in 1024 | SciFact nDCG@10 | evidence R@5 | p50 ms | p95 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let legend = "R in 512/1024: Casement's defaults asked with token_budget 512/1024; other rows: the leading passages of the plain answer that fit";
    for row in rows {
        let mut latencies = row.latencies.clone();
        latencies.sort_by(f64::total_cmp);
        let (p50, p95) = if latencies.is_empty() {
            ("—".to_owned(), "—".to_owned())
        } else {
            (
                format!("{:.1}", percentile(&latencies, 0.5)),
                format!("{:.1}", percentile(&latencies, 0.95)),
            )
        };
        let scifact = row.scifact.as_ref().map_or(("—".into(), "—".into()), |s| {
            let j = s.json();
            (
                format!("{:.3}", j["ndcg_at_10"].as_f64().unwrap()),
                format!("{:.3}", j["evidence_recall_at_5"].as_f64().unwrap()),
            )
        });
        for (i, (half, sums)) in row.squad.iter().enumerate() {
            let j = sums.json();
            let f = |k: &str| format!("{:.3}", j[k].as_f64().unwrap());
            let (sf, p) = if i == 0 {
                (scifact.clone(), (p50.clone(), p95.clone()))
            } else {
                (("".into(), "".into()), ("".into(), "".into()))
            };
            let cells = [
                row.what.clone(),
                half.name().to_owned(),
                f("recall_at_1"),
                f("recall_at_5"),
                f("recall_at_10"),
                f("mrr_at_10"),
                format!("{:.0}", j["top5_cl100k_tokens"].as_f64().unwrap()),
                format!("{:.3}", sums.recall_within(0)),
                format!("{:.3}", sums.recall_within(1)),
                sf.0,
                sf.1,
                p.0,
                p.1,
            ];
            println!("| {} |", cells.join(" | "));
        }
    }
    println!("({legend}; tokens are cl100k_base.)");
}

/// `target/release/{casement,casement-query}` (`make eval` builds them).
fn binaries() -> PathBuf {
    let casement = PathBuf::from(env!("CARGO_BIN_EXE_casement"));
    let dir = casement.parent().unwrap().to_path_buf();
    assert!(
        dir.join("casement-query").exists(),
        "{} has no casement-query binary: run `make eval`, which builds it",
        dir.display()
    );
    dir
}

/// `casement backfill` of `docs` into `dir/data` (fresh unless `reuse` finds a complete
/// one); returns its summary.
fn backfill(bin: &Path, dir: &Path, docs: &[data::Doc], index: Index, reuse: bool) -> Value {
    let done = dir.join("summary.json");
    if reuse && let Ok(text) = std::fs::read_to_string(&done) {
        eprintln!("eval: reusing {}", dir.display());
        return serde_json::from_str(&text).unwrap();
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    std::fs::create_dir_all(dir).unwrap();
    let log = dir.join("log.jsonl");
    data::write_log(&log, docs);
    eprintln!(
        "eval: casement backfill of {} documents into {}",
        docs.len(),
        dir.display()
    );
    let started = Instant::now();
    let output = Command::new(bin.join("casement"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("backfill")
        .arg(&log)
        .envs(index.backfill_env())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("starting casement backfill");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "casement backfill failed ({}):\n{out}",
        output.status
    );
    let summary = json!({
        "documents": docs.len(),
        "seconds": started.elapsed().as_secs_f64(),
        "summary": out.lines().filter(|l| l.starts_with("index: ")).collect::<Vec<_>>(),
        "settings": index.backfill_env().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
    });
    eprintln!("  {summary}");
    std::fs::write(&done, summary.to_string()).unwrap();
    summary
}

/// A `casement-query` child over one index; killed on drop.
struct Service {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    async fn start(bin: &Path, dir: &Path, variant: &Variant) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin.join("casement-query"))
            .arg("run")
            .env("CASEMENT_QUERY__LISTEN", format!("127.0.0.1:{port}"))
            .env(
                "CASEMENT_QUERY__STORE__EDGE__PATH",
                dir.join("data").join("index"),
            )
            .env(
                "CASEMENT_QUERY__SEARCH__INDEXED_WINDOW_RADIUS",
                variant.index.radius().to_string(),
            )
            .env("CASEMENT_QUERY__LOG__FILTER", "warn")
            .envs(variant.env.iter().copied())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting casement-query");
        let mut service = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Ok(r) = service
                .client
                .get(format!("{}/readyz", service.base))
                .send()
                .await
                && r.status().is_success()
            {
                return service;
            }
            assert!(
                Instant::now() < deadline,
                "casement-query did not become ready"
            );
            if let Ok(Some(status)) = service.child.try_wait() {
                panic!("casement-query exited at start ({status})");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One search as a bot sends it; the windows in order, and the client's latency.
    async fn search(
        &self,
        query: &str,
        top_k: usize,
        radius: Option<usize>,
        token_budget: Option<usize>,
        bpe: &CoreBPE,
    ) -> (Vec<Passage>, f64) {
        let mut body = json!({"query": query, "top_k": top_k});
        if let Some(radius) = radius {
            body["window_radius"] = json!(radius);
        }
        if let Some(budget) = token_budget {
            body["token_budget"] = json!(budget);
        }
        let t = Instant::now();
        let response = self
            .client
            .post(format!("{}/v1/search", self.base))
            .json(&body)
            .send()
            .await
            .expect("search request");
        let status = response.status();
        let answer: Value = response.json().await.expect("search answer");
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        assert!(status.is_success(), "search {status}: {answer}");
        let passages = answer["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| Passage {
                doc_id: w["doc_id"].as_str().unwrap().to_owned(),
                char_start: w["char_start"].as_u64().unwrap() as usize,
                char_end: w["char_end"].as_u64().unwrap() as usize,
                tokens: score::tokens(bpe, w["text"].as_str().unwrap()),
            })
            .collect();
        (passages, ms)
    }
}
