//! The `index` feature: revision logs (and synthetic edits after one), the real model, an
//! Edge store, the processor, and the rebuild assertion.

mod rebuild;
mod synthetic;
pub mod wiki;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use casement_events::revision_log::{self, LogEvent};
use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder};
use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::{EnrichConfig, Metrics, PipelineConfig, Processor};
use casement_store::{EdgeStore, Store, StoreConfig};
use casement_text::TextConfig;

pub use rebuild::{
    RebuildReport, assert_equals_rebuild, assert_equals_rebuild_with, final_events,
    rebuild_differences, rebuild_differences_with,
};
pub use synthetic::{synthetic_edits, write_log};

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
    crate::repo_root().join("sample/18f-handbook/revisions.jsonl")
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
        fetch: &casement_pipeline::FetchConfig::default(),
    };
    factory::processor(config, metrics, model, store).expect("processor")
}

/// Sentences/s of `model` alone over a seeded, uniform sample of `inputs` (xorshift; not
/// the first inputs: documents differ in length), sorted by length, in batches of `batch`,
/// after one warm-up batch; and the sample size. The reference a bulk rate is measured
/// against (`make bench-backfill`, `make bench-migrate`).
pub fn raw_rate(model: &dyn Embed, inputs: &[String], sample: usize, batch: usize) -> (f64, usize) {
    let mut picked: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..picked.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        picked.swap(i, (state % (i as u64 + 1)) as usize);
    }
    picked.truncate(sample);
    picked.sort_by_key(|s| s.len());
    model
        .embed(&picked[..picked.len().min(batch)])
        .expect("the model embeds"); // Warm-up.
    let started = std::time::Instant::now();
    for chunk in picked.chunks(batch) {
        model.embed(chunk).expect("the model embeds");
    }
    (
        picked.len() as f64 / started.elapsed().as_secs_f64(),
        picked.len(),
    )
}
