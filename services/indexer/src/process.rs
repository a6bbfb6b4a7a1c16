//! One event against the index, in document order: fence → read the document's records →
//! segment against them → enrich → plan → embed only what the plan says → write. Shared by
//! every source (Kafka, and the local sources of the all-in-one binary).
//!
//! These stages run in sequence per document because each reads what the previous event of
//! the same document wrote; documents run concurrently in the pipeline's lanes.

use std::time::Instant;

use casement_events::{Change, Event};
use casement_store::{Applied, Store};
use casement_text::{
    Fence, Section, TextConfig, build_records_with, fence, plan_delete, plan_segmented,
    segment_against,
};

use crate::embed::Embedder;
use crate::enrich::Enricher;
use crate::metrics::Metrics;

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

    /// The `reason` of a dead letter, or the `stage` of a retry.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Store(_) => "store",
            Self::Embed(_) => "embed",
            Self::Text(_) => "text",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Processor<S> {
    pub store: S,
    embedder: Embedder,
    enricher: Enricher,
    text: TextConfig,
    metrics: Metrics,
    whole_documents: bool,
}

impl<S: Store> Processor<S> {
    pub fn new(
        store: S,
        embedder: Embedder,
        enricher: Enricher,
        text: TextConfig,
        metrics: Metrics,
    ) -> Self {
        Self {
            store,
            embedder,
            enricher,
            text,
            metrics,
            whole_documents: false,
        }
    }

    /// Ablation for benchmarks: re-embed every sentence of every upserted revision, without
    /// the embedding cache, as an indexer without a differ would. The points written are
    /// the same; only the embedding work differs.
    pub fn with_whole_documents(mut self, on: bool) -> Self {
        self.whole_documents = on;
        self
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Applies one event. Safe to call again with the same event (at-least-once delivery):
    /// the plan is computed from the index, so a repeat writes nothing new.
    pub async fn process(&self, event: &Event) -> Result<Outcome, ProcessError> {
        let doc_id = event.doc_id();
        let mut clock = Instant::now();
        let mut lap = |stage: &str| {
            let now = Instant::now();
            let elapsed = now - clock;
            self.metrics.stage(stage, elapsed);
            clock = now;
            elapsed
        };
        let indexed = self.store.document(doc_id).await?;
        let (is_delete, revision) = match &event.change {
            Change::Upsert(revision) => (false, revision.revision),
            // A delete without a revision (a Debezium tombstone) applies at the indexed one.
            Change::Delete { revision, .. } => (
                true,
                revision.unwrap_or_else(|| indexed.as_ref().map_or(0, |d| d.revision)),
            ),
        };
        let fenced = fence(indexed.as_ref(), revision, is_delete);
        lap("fence");
        if let Fence::Stale { indexed_revision } = fenced {
            return Ok(Outcome::Stale { indexed_revision });
        }
        let current = self.store.records(doc_id).await?;
        lap("read");
        let plan = match &event.change {
            Change::Upsert(rev) => {
                let segmented = segment_against(&current, rev, &self.text)?;
                lap("plan");
                let contexts = self.enricher.contexts(&segmented, &current).await;
                lap("enrich");
                let context_of =
                    |section: &Section| contexts.get(&section.id).cloned().unwrap_or_default();
                let mut plan = plan_segmented(&current, &segmented, &self.text, context_of);
                if self.whole_documents {
                    plan.embed = build_records_with(&segmented, &self.text, context_of);
                    plan.update_payload.clear();
                    plan.unchanged = 0;
                }
                plan
            }
            Change::Delete { .. } => plan_delete(&current, doc_id, revision),
        };
        lap("plan");
        let embedded = self
            .embedder
            .embed(&plan.embed, !self.whole_documents)
            .await?;
        lap("embed");
        let decisions = Decisions {
            embedded: embedded.from_model,
            cache_hits: embedded.from_cache,
            payload_updated: plan.update_payload.len(),
            deleted: plan.delete.len(),
            unchanged: plan.unchanged,
        };
        let written = self.store.apply(&plan, &embedded.vectors).await?;
        let write_time = lap("write");
        self.metrics.store_write.observe(write_time.as_secs_f64());
        let outcome = match written {
            Applied::Stale { indexed_revision } => Outcome::Stale { indexed_revision },
            Applied::Written if is_delete => Outcome::Deleted(decisions),
            Applied::Written => Outcome::Applied(decisions),
        };
        if let Outcome::Applied(d) | Outcome::Deleted(d) = outcome {
            for (decision, n) in [
                ("embedded", d.embedded),
                ("reused", d.cache_hits),
                ("payload_updated", d.payload_updated),
                ("deleted", d.deleted),
                ("unchanged", d.unchanged),
            ] {
                self.metrics
                    .sentences
                    .with_label_values(&[decision])
                    .inc_by(n as u64);
            }
        }
        Ok(outcome)
    }
}
