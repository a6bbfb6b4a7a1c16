//! Embed stage: vectors for the plan's records through a cache keyed by hash(model id +
//! embedding input), so a revert or a replay costs no model call (invariant 2). The model
//! runs on its blocking pool, never on the async executor, one slice of `embed_slice`
//! sentences per turn: the pool serves waiting slices first come, first served, so the
//! lanes take turns and a large document delays a small edit by at most a slice per lane.

use std::sync::Arc;
use std::time::Instant;

use casement_inference::BlockingPool;
use casement_text::{SentenceRecord, hash_hex};

use crate::metrics::Metrics;

pub type EmbeddingCache = moka::sync::Cache<String, Arc<Vec<f32>>>;

pub fn embedding_cache(max_entries: u64) -> EmbeddingCache {
    moka::sync::Cache::new(max_entries)
}

#[derive(Debug, Clone)]
pub struct Embedder {
    pool: BlockingPool,
    model_id: String,
    cache: EmbeddingCache,
    slice: usize,
    metrics: Metrics,
}

/// Vectors for a batch of records, and how many came from the model.
#[derive(Debug)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub from_model: usize,
    pub from_cache: usize,
}

impl Embedder {
    pub fn new(
        pool: BlockingPool,
        model_id: String,
        cache: EmbeddingCache,
        slice: usize,
        metrics: Metrics,
    ) -> Self {
        Self {
            pool,
            model_id,
            cache,
            slice: slice.max(1),
            metrics,
        }
    }

    /// Vectors for `records`; with `use_cache` false every one goes to the model.
    pub async fn embed(
        &self,
        records: &[SentenceRecord],
        use_cache: bool,
    ) -> Result<Embedded, casement_inference::Error> {
        let inputs: Vec<String> = records.iter().map(|r| r.embedding_input()).collect();
        let keys: Vec<String> = inputs
            .iter()
            .map(|input| hash_hex(format!("{}\0{input}", self.model_id).as_bytes()))
            .collect();
        let mut vectors: Vec<Option<Arc<Vec<f32>>>> = keys
            .iter()
            .map(|k| self.cache.get(k).filter(|_| use_cache))
            .collect();
        let mut missing: Vec<usize> = (0..inputs.len())
            .filter(|&i| vectors[i].is_none())
            .collect();
        let from_model = missing.len();
        // Similar lengths in a slice: the model pads each batch to its longest input.
        missing.sort_by_key(|&i| inputs[i].len());
        for slice in missing.chunks(self.slice) {
            let texts = slice.iter().map(|&i| inputs[i].clone()).collect();
            let started = Instant::now();
            let embedded = self.pool.embed(texts).await?;
            self.metrics
                .embedding_duration
                .observe(started.elapsed().as_secs_f64());
            self.metrics.embedding_batch.observe(slice.len() as f64);
            for (&i, vector) in slice.iter().zip(embedded) {
                let vector = Arc::new(vector);
                self.cache.insert(keys[i].clone(), vector.clone());
                vectors[i] = Some(vector);
            }
        }
        Ok(Embedded {
            from_model,
            from_cache: inputs.len() - from_model,
            vectors: vectors
                .into_iter()
                .map(|v| v.map(|v| v.as_ref().clone()).unwrap_or_default())
                .collect(),
        })
    }
}
