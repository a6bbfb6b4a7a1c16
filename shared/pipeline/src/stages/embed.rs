//! Embed stage: vectors for the plan's records through a cache keyed by hash(model id +
//! embedding input), so a revert or a replay costs no model call (invariant 2). What the
//! cache does not have goes to the [`Batcher`](super::batch::Batcher), which runs the model
//! on its blocking pool in batches shared with the other lanes' events.

use std::sync::Arc;

use casement_text::{SentenceRecord, hash_hex};

use super::batch::{Batcher, OnTheWay};

pub type EmbeddingCache = moka::sync::Cache<String, Arc<Vec<f32>>>;

pub fn embedding_cache(max_entries: u64) -> EmbeddingCache {
    moka::sync::Cache::new(max_entries)
}

#[derive(Debug, Clone)]
pub struct Embedder {
    batcher: Batcher,
    model_id: String,
    cache: EmbeddingCache,
}

/// Vectors for a batch of records, and how many came from the model.
#[derive(Debug)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub from_model: usize,
    pub from_cache: usize,
}

impl Embedder {
    pub fn new(batcher: Batcher, model_id: String, cache: EmbeddingCache) -> Self {
        Self {
            batcher,
            model_id,
            cache,
        }
    }

    /// Held by an event from the start of its processing until it asks for vectors: while
    /// any is held, a partial batch may wait a little for its sentences.
    pub fn on_the_way(&self) -> OnTheWay {
        self.batcher.on_the_way()
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
        let missing: Vec<usize> = (0..inputs.len())
            .filter(|&i| vectors[i].is_none())
            .collect();
        let from_model = missing.len();
        let texts = missing.iter().map(|&i| inputs[i].clone()).collect();
        let embedded = self.batcher.embed(texts).await?;
        for (&i, vector) in missing.iter().zip(embedded) {
            let vector = Arc::new(vector);
            self.cache.insert(keys[i].clone(), vector.clone());
            vectors[i] = Some(vector);
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
