//! One event against the index: fence → read the document's records → plan → embed only
//! what the plan says (through the embedding cache) → write. Shared by every source (Kafka,
//! and the local sources of the all-in-one binary).

use std::sync::Arc;

use casement_events::{Change, Event};
use casement_inference::BlockingPool;
use casement_store::{Applied, Store};
use casement_text::{ChangePlan, Fence, TextConfig, fence, hash_hex, plan_delete, plan_upsert};

/// What an applied event decided for its sentences.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Sent to the embedding model.
    pub embedded: usize,
    /// New vectors needed, but found in the embedding cache (a revert, a replay).
    pub cache_hits: usize,
    pub payload_updated: usize,
    pub deleted: usize,
    pub unchanged: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Applied(Decisions),
    Deleted(Decisions),
    /// Not newer than what is indexed (or than the tombstone): nothing written.
    Stale {
        indexed_revision: u64,
    },
}

impl Outcome {
    /// The `outcome` metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Applied(_) => "applied",
            Self::Deleted(_) => "deleted",
            Self::Stale { .. } => "stale",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("store: {0}")]
    Store(#[from] casement_store::Error),
    #[error("embedding: {0}")]
    Embed(#[from] casement_inference::Error),
    /// The revision cannot be segmented (too large, ...): it never will be.
    #[error("text: {0}")]
    Text(#[from] casement_text::Error),
}

impl ProcessError {
    /// Worth retrying with backoff (the store or the model may come back); otherwise the
    /// event goes to the dead-letter topic.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Store(e) => e.is_transient(),
            Self::Embed(_) => true,
            Self::Text(_) => false,
        }
    }

    /// The `reason` label of a dead letter.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Store(_) => "store",
            Self::Embed(_) => "embedding",
            Self::Text(_) => "text",
        }
    }
}

/// Embedding cache: hash(model id + embedding input) → vector.
pub type EmbeddingCache = moka::sync::Cache<String, Arc<Vec<f32>>>;

pub fn embedding_cache(max_entries: u64) -> EmbeddingCache {
    moka::sync::Cache::new(max_entries)
}

#[derive(Debug, Clone)]
pub struct Processor<S> {
    pub store: S,
    pool: BlockingPool,
    model_id: String,
    text: TextConfig,
    cache: EmbeddingCache,
}

impl<S: Store> Processor<S> {
    pub fn new(
        store: S,
        pool: BlockingPool,
        model_id: String,
        text: TextConfig,
        cache: EmbeddingCache,
    ) -> Self {
        Self {
            store,
            pool,
            model_id,
            text,
            cache,
        }
    }

    /// Applies one event. Safe to call again with the same event (at-least-once delivery):
    /// the plan is computed from the index, so a repeat writes nothing new.
    pub async fn process(&self, event: &Event) -> Result<Outcome, ProcessError> {
        let doc_id = event.doc_id();
        let indexed = self.store.document(doc_id).await?;
        let (is_delete, revision) = match &event.change {
            Change::Upsert(revision) => (false, revision.revision),
            // A delete without a revision (a Debezium tombstone) applies at the indexed one.
            Change::Delete { revision, .. } => (
                true,
                revision.unwrap_or_else(|| indexed.as_ref().map_or(0, |d| d.revision)),
            ),
        };
        if let Fence::Stale { indexed_revision } = fence(indexed.as_ref(), revision, is_delete) {
            return Ok(Outcome::Stale { indexed_revision });
        }
        let current = self.store.records(doc_id).await?;
        let plan = match &event.change {
            Change::Upsert(rev) => plan_upsert(&current, rev, &self.text)?.0,
            Change::Delete { .. } => plan_delete(&current, doc_id, revision),
        };
        let mut decisions = Decisions {
            payload_updated: plan.update_payload.len(),
            deleted: plan.delete.len(),
            unchanged: plan.unchanged,
            ..Decisions::default()
        };
        let vectors = self.vectors(&plan, &mut decisions).await?;
        match self.store.apply(&plan, &vectors).await? {
            Applied::Stale { indexed_revision } => Ok(Outcome::Stale { indexed_revision }),
            Applied::Written if is_delete => Ok(Outcome::Deleted(decisions)),
            Applied::Written => Ok(Outcome::Applied(decisions)),
        }
    }

    /// Vectors for `plan.embed`, from the cache where possible, the model otherwise.
    async fn vectors(
        &self,
        plan: &ChangePlan,
        decisions: &mut Decisions,
    ) -> Result<Vec<Vec<f32>>, ProcessError> {
        let inputs: Vec<String> = plan.embed.iter().map(|r| r.embedding_input()).collect();
        let keys: Vec<String> = inputs
            .iter()
            .map(|input| {
                let mut key = self.model_id.clone();
                key.push('\0');
                key.push_str(input);
                hash_hex(key.as_bytes())
            })
            .collect();
        let mut vectors: Vec<Option<Arc<Vec<f32>>>> =
            keys.iter().map(|k| self.cache.get(k)).collect();
        let missing: Vec<usize> = (0..inputs.len())
            .filter(|&i| vectors[i].is_none())
            .collect();
        decisions.cache_hits = inputs.len() - missing.len();
        decisions.embedded = missing.len();
        if !missing.is_empty() {
            let texts = missing.iter().map(|&i| inputs[i].clone()).collect();
            let embedded = self.pool.embed(texts).await?;
            for (&i, vector) in missing.iter().zip(embedded) {
                let vector = Arc::new(vector);
                self.cache.insert(keys[i].clone(), vector.clone());
                vectors[i] = Some(vector);
            }
        }
        Ok(vectors
            .into_iter()
            .map(|v| v.map(|v| v.as_ref().clone()).unwrap_or_default())
            .collect())
    }
}
