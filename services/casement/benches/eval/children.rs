//! The release binaries as child processes: `casement backfill` and `casement-query`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;

use crate::data;
use crate::score::{self, Passage};
use crate::variants::{Index, Variant};

/// `target/release/{casement,casement-query}` (`make eval` builds them).
pub fn binaries() -> PathBuf {
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
pub fn backfill(bin: &Path, dir: &Path, docs: &[data::Doc], index: Index, reuse: bool) -> Value {
    backfill_with(bin, dir, index, reuse, |log| {
        data::write_log(log, docs);
        docs.len()
    })
}

/// `casement backfill` of the revision log `write_log` writes (returning how many
/// documents) into `dir/data`, fresh unless `reuse` finds a complete one.
pub fn backfill_with(
    bin: &Path,
    dir: &Path,
    index: Index,
    reuse: bool,
    write_log: impl FnOnce(&Path) -> usize,
) -> Value {
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
    let documents = write_log(&log);
    eprintln!(
        "eval: casement backfill of {documents} documents into {}",
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
        "documents": documents,
        "seconds": started.elapsed().as_secs_f64(),
        "summary": out.lines().filter(|l| l.starts_with("index: ")).collect::<Vec<_>>(),
        "settings": index.backfill_env().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
    });
    eprintln!("  {summary}");
    std::fs::write(&done, summary.to_string()).unwrap();
    summary
}

/// A `casement-query` child over one index; killed on drop.
pub struct Service {
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
    pub async fn start(bin: &Path, dir: &Path, variant: &Variant) -> Self {
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
    pub async fn search(
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
        let (answer, ms) = self.ask(&body).await;
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

    /// One `POST /v1/search` with `body`: the answer and the client-side milliseconds.
    pub async fn ask(&self, body: &Value) -> (Value, f64) {
        let t = Instant::now();
        let response = self
            .client
            .post(format!("{}/v1/search", self.base))
            .json(body)
            .send()
            .await
            .expect("search request");
        let status = response.status();
        let answer: Value = response.json().await.expect("search answer");
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        assert!(status.is_success(), "search {status}: {answer}");
        (answer, ms)
    }
}
