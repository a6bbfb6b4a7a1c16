//! Dev-only helpers shared by Casement's tests and benchmarks (a `[dev-dependencies]` entry
//! only; nothing here ships): where the shared data is, the real model and an Edge store,
//! the processor over them, the rebuild a stream must end equal to, waiting on a condition
//! with a deadline (never a bare sleep), where benchmarks write their JSON, and the metric
//! list of `docs/metrics.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod metrics_doc;
mod rebuild;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use casement_events::revision_log::{self, LogEvent};
use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder};
use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::{EnrichConfig, Metrics, PipelineConfig, Processor};
use casement_store::{EdgeStore, Store, StoreConfig};
use casement_text::TextConfig;

pub use rebuild::{assert_equals_rebuild, final_events};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A path in the shared data: `$CASEMENT_SHARED_DATA/<path>`, by default
/// `../shared/data/<path>` beside the repository (where CI has it).
pub fn data(path: &str) -> PathBuf {
    std::env::var_os("CASEMENT_SHARED_DATA")
        .map_or_else(|| repo_root().join("../shared/data"), PathBuf::from)
        .join(path)
}

/// Every event of a revision log, in the one order of `revision_log::read`; a rejected
/// line fails the test.
pub fn read_log(path: &Path) -> Vec<LogEvent> {
    let (events, rejected) =
        revision_log::read(path).unwrap_or_else(|e| panic!("revision log {}: {e}", path.display()));
    assert!(rejected.is_empty(), "{}: {rejected:?}", path.display());
    events
}

/// The bundled sample's revision log (`sample/18f-handbook/revisions.jsonl`).
pub fn sample_log() -> PathBuf {
    repo_root().join("sample/18f-handbook/revisions.jsonl")
}

/// The default embedding model (`make models`), loaded once per test binary.
pub fn model() -> Arc<OnnxEmbedder> {
    static MODEL: OnceLock<Arc<OnnxEmbedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Arc::new(OnnxEmbedder::load(&EmbedderConfig::default()).expect("model (make models)"))
        })
        .clone()
}

/// A Qdrant Edge store in `<dir>/index`.
pub fn open_store(dir: &Path, dimension: usize) -> EdgeStore {
    let mut config = StoreConfig::default();
    config.edge.path = dir.join("index");
    EdgeStore::open(&config, dimension).expect("store")
}

/// The pipeline's processor over `store` with `model`, default settings but `enrich`.
pub fn processor<S: Store>(
    store: S,
    model: Arc<dyn Embed>,
    enrich: &EnrichConfig,
    metrics: &Metrics,
) -> Processor<S> {
    let config = ProcessorConfig {
        pipeline: &PipelineConfig::default(),
        enrich,
        text: &TextConfig::default(),
    };
    factory::processor(config, metrics, model, store).expect("processor")
}

/// Polls `check` every 200 ms until it holds; fails the test after `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {timeout:?}: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Where benchmarks write their JSON: `target/bench` (under `CARGO_TARGET_DIR` if set).
pub fn bench_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from)
        .join("bench");
    std::fs::create_dir_all(&dir).expect("create target/bench");
    dir
}

/// Writes a benchmark's report to `target/bench/<name>` and says where.
pub fn write_bench_json(name: &str, report: &serde_json::Value) -> PathBuf {
    let file = bench_dir().join(name);
    std::fs::write(&file, serde_json::to_string_pretty(report).expect("json"))
        .expect("write the bench report");
    println!("wrote {}", file.display());
    file
}
