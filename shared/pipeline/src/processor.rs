//! One event against the index, in document order: fence → fetch the content (an event
//! that only names its revision) → read the document's records →
//! segment against them → enrich → plan → embed only what the plan says → write. Each step
//! is a stage of [`crate::stages`], timed under its own label.
//!
//! These steps run in sequence per document because each reads what the previous event of
//! the same document wrote; documents run concurrently in the pipeline's lanes.

use std::time::Instant;

use casement_events::{Change, Event};
use casement_store::{Applied, Store};
use casement_text::{ChangePlan, DocRef, DocumentState, Revision, SentenceRecord, TextConfig};

use crate::fetch::{FetchError, Fetcher};
use crate::metrics::Metrics;
use crate::outcome::{Decisions, Outcome, Reason, RetryStage, Stage};
use crate::stages::embed::Embedder;
use crate::stages::enrich::Enricher;
use crate::stages::{fence, plan, read, segment, write};

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("store ({}): {source}", stage.as_str())]
    Store {
        stage: RetryStage,
        source: casement_store::Error,
    },
    #[error("embedding: {0}")]
    Embed(#[from] casement_inference::Error),
    /// The revision cannot be segmented (too large, ...): it never will be.
    #[error("text: {0}")]
    Text(#[from] casement_text::Error),
    /// More sentences than `pipeline.max_document_sentences`.
    #[error("the revision has {sentences} sentences, over pipeline.max_document_sentences = {max}")]
    TooManySentences { sentences: usize, max: usize },
    /// The revision's content could not be fetched from the wiki.
    #[error("fetch: {0}")]
    Fetch(#[from] FetchError),
    /// A migration could not rebuild the document from its stored records.
    #[error("stored records: {0}")]
    Stored(#[from] casement_text::StoredError),
}

impl ProcessError {
    pub(crate) fn store(stage: RetryStage) -> impl FnOnce(casement_store::Error) -> Self {
        move |source| Self::Store { stage, source }
    }

    /// Worth retrying with backoff (the store or the model may come back); otherwise the
    /// event goes to the dead-letter sink.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Store { source, .. } => source.is_transient(),
            Self::Embed(_) => true,
            Self::Fetch(error) => matches!(error, FetchError::Unavailable(_)),
            Self::Text(_) | Self::TooManySentences { .. } | Self::Stored(_) => false,
        }
    }

    /// Where a transient failure is retried.
    pub fn retry_stage(&self) -> RetryStage {
        match self {
            Self::Store { stage, .. } => *stage,
            Self::Embed(_) => RetryStage::Embed,
            Self::Fetch(_) => RetryStage::Fetch,
            Self::Text(_) | Self::TooManySentences { .. } | Self::Stored(_) => RetryStage::Write,
        }
    }

    /// The dead-letter reason of a permanent failure (model failures are always retried).
    pub fn reason(&self) -> Reason {
        match self {
            Self::Text(_) | Self::Stored(_) => Reason::Text,
            Self::TooManySentences { .. } => Reason::TooLarge,
            Self::Fetch(FetchError::Gone(_)) => Reason::Gone,
            Self::Fetch(FetchError::Unsupported(_) | FetchError::Refused(_)) => Reason::Unsupported,
            Self::Fetch(_) => Reason::NoContent,
            Self::Store { .. } | Self::Embed(_) => Reason::Store,
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
    max_sentences: usize,
    fetcher: Option<Fetcher>,
}

/// Times consecutive stages of one event.
struct Lap<'a> {
    metrics: &'a Metrics,
    clock: Instant,
}

impl Lap<'_> {
    fn done(&mut self, stage: Stage) -> std::time::Duration {
        let now = Instant::now();
        let elapsed = now - self.clock;
        self.metrics.stage(stage, elapsed);
        self.clock = now;
        elapsed
    }
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
            max_sentences: crate::PipelineConfig::default().max_document_sentences,
            fetcher: None,
        }
    }

    /// The fetcher of `[fetch]`, when it names an API.
    pub fn fetcher(&self) -> Option<&Fetcher> {
        self.fetcher.as_ref()
    }

    /// Where revisions that events name without their content are fetched (none: such
    /// events are dead-lettered, `no_content`).
    pub fn with_fetcher(mut self, fetcher: Option<Fetcher>) -> Self {
        self.fetcher = fetcher;
        self
    }

    /// A revision with more sentences is dead-lettered as too large.
    pub fn with_max_document_sentences(mut self, max: usize) -> Self {
        self.max_sentences = max;
        self
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

    /// What applying `revision` over the index would write now: read, segment, enrich and
    /// plan as [`Processor::process`] does, with nothing embedded, written or timed. An
    /// audit's check that a document's points are what its revision makes (an empty plan
    /// whose document state is the indexed one).
    pub async fn plan_revision(&self, revision: &Revision) -> Result<ChangePlan, ProcessError> {
        let doc = DocRef::new(revision.tenant.as_deref(), &revision.doc_id);
        let current = read::run(&self.store, doc).await?;
        let segmented = segment::run(&current, revision, &self.text)?;
        let contexts = self.enricher.contexts(&segmented, &current).await;
        Ok(plan::upsert(
            &current, &segmented, &self.text, &contexts, false,
        ))
    }

    /// Brings this processor's index to a document as another index stores it (`state`
    /// and its sentence `records`): a model migration's copy, with no source to read
    /// ([`casement_text::segmented_from_records`]). Enrich, plan, embed and write as for an
    /// event, against what this index already holds of the document (a copy cut off is
    /// finished, a finished one plans nothing); the document state is `state`, so the
    /// copy is fenced and counted as the original. `reuse`: the other index's vectors, when
    /// it was embedded by this processor's model; a sentence whose embedding input is
    /// unchanged (same `embed_hash`) takes its vector from there instead of the model.
    /// `over_tombstone`: the other index is the truth, also over a tombstone at the same
    /// revision (a migration's copy); otherwise (a catch-up after a swap, while this index
    /// has writers of its own) a document this index holds at a newer revision, or deleted
    /// at the same, is left as it is. Returns the sentences embedded.
    pub async fn copy_stored(
        &self,
        state: &DocumentState,
        records: &[SentenceRecord],
        reuse: Option<&std::collections::HashMap<uuid::Uuid, Vec<f32>>>,
        over_tombstone: bool,
    ) -> Result<usize, ProcessError> {
        let doc = state.doc_ref();
        if !over_tombstone
            && let Some(indexed) = self
                .store
                .document(doc)
                .await
                .map_err(ProcessError::store(RetryStage::Fence))?
            && (indexed.revision > state.revision
                || (indexed.revision == state.revision && indexed.deleted))
        {
            // This index is ahead (its own writers went on): the copy would be stale.
            return Ok(0);
        }
        let current = read::run(&self.store, doc).await?;
        let mut plan = if state.deleted {
            plan::delete(&current, Some(state), doc, state.revision)
        } else {
            let segmented =
                casement_text::segmented_from_records(state, records, self.text.window_radius > 0)?;
            // Contexts this index or the other already hold for a section (an LLM's, asked
            // with the same model and prompt) are not asked again.
            let known: Vec<SentenceRecord> = current.iter().chain(records).cloned().collect();
            let contexts = self.enricher.contexts(&segmented, &known).await;
            let mut plan = plan::upsert(&current, &segmented, &self.text, &contexts, false);
            // A migration's source is the truth, also over a tombstone at the same
            // revision; a catch-up's is not (the new index's writers may have deleted it).
            plan.restore = over_tombstone;
            plan
        };
        plan.document = state.clone();
        let stored: std::collections::HashMap<uuid::Uuid, &SentenceRecord> =
            records.iter().map(|r| (r.id, r)).collect();
        let mut vectors: Vec<Option<Vec<f32>>> = plan
            .embed
            .iter()
            .map(|record| {
                let vectors = reuse?;
                let same_input = stored.get(&record.id)?.embed_hash == record.embed_hash;
                same_input
                    .then(|| vectors.get(&record.id).cloned())
                    .flatten()
            })
            .collect();
        let missing: Vec<SentenceRecord> = plan
            .embed
            .iter()
            .zip(&vectors)
            .filter(|(_, vector)| vector.is_none())
            .map(|(record, _)| record.clone())
            .collect();
        let _on_the_way = self.embedder.on_the_way();
        let embedded = self.embedder.embed(&missing, true).await?;
        let mut fresh = embedded.vectors.into_iter();
        for vector in &mut vectors {
            if vector.is_none() {
                *vector = fresh.next();
            }
        }
        let vectors: Vec<Vec<f32>> = vectors.into_iter().map(Option::unwrap_or_default).collect();
        write::run(&self.store, &plan, &vectors).await?;
        Ok(embedded.from_model)
    }

    /// Applies one event: [`Outcome::Applied`], [`Outcome::Deleted`] or
    /// [`Outcome::Stale`]. Safe to call again with the same event (at-least-once delivery):
    /// the plan is computed from the index, so a repeat writes nothing and is stale; a
    /// repeat of a revision whose write was cut off finishes it (and counts as applied).
    pub async fn process(&self, event: &Event) -> Result<Outcome, ProcessError> {
        let mut lap = Lap {
            metrics: &self.metrics,
            clock: Instant::now(),
        };
        // Until this event asks for vectors, a partial model batch may wait for it.
        let on_the_way = self.embedder.on_the_way();
        let fenced = fence::run(&self.store, event).await?;
        lap.done(Stage::Fence);
        let (revision, indexed) = match fenced {
            fence::Fenced::Stale { indexed_revision } => {
                return Ok(Outcome::Stale { indexed_revision });
            }
            fence::Fenced::Apply { revision, indexed } => (revision, indexed),
        };
        // The content of a revision the event only names, now that the fence let it by.
        // At the revision already indexed (a redelivery), nothing is fetched: the document
        // state is written last, so its points are complete (a cut-off write left the
        // previous revision's state, and is fetched and finished).
        let fetched;
        let upsert = match &event.change {
            Change::Upsert(rev) | Change::Restore(rev) => Some(rev),
            Change::Fetch(_)
                if indexed
                    .as_ref()
                    .is_some_and(|state| !state.deleted && state.revision == revision) =>
            {
                return Ok(Outcome::Stale {
                    indexed_revision: revision,
                });
            }
            Change::Fetch(reference) => {
                let fetcher = self.fetcher.as_ref().ok_or(FetchError::NotConfigured)?;
                let content = fetcher.fetch(&reference.domain, reference.revision).await?;
                lap.done(Stage::Fetch);
                fetched = crate::fetch::revision_of(reference, content);
                Some(&fetched)
            }
            Change::Delete { .. } => None,
        };
        let current = read::run(&self.store, event.doc_ref()).await?;
        lap.done(Stage::Read);
        let mut plan = match upsert {
            Some(rev) => {
                let segmented = segment::run(&current, rev, &self.text)?;
                lap.done(Stage::Segment);
                let sentences = segmented.sentence_count();
                if sentences > self.max_sentences {
                    return Err(ProcessError::TooManySentences {
                        sentences,
                        max: self.max_sentences,
                    });
                }
                let contexts = self.enricher.contexts(&segmented, &current).await;
                lap.done(Stage::Enrich);
                plan::upsert(
                    &current,
                    &segmented,
                    &self.text,
                    &contexts,
                    self.whole_documents,
                )
            }
            None => plan::delete(&current, indexed.as_ref(), event.doc_ref(), revision),
        };
        plan.restore = event.restores();
        lap.done(Stage::Plan);
        // The revision already indexed, completely: a redelivery, nothing to write.
        if let Some(state) = &indexed
            && plan.is_noop()
            && plan.document == *state
        {
            return Ok(Outcome::Stale {
                indexed_revision: state.revision,
            });
        }
        drop(on_the_way);
        let embedded = self
            .embedder
            .embed(&plan.embed, !self.whole_documents)
            .await?;
        lap.done(Stage::Embed);
        let decisions = Decisions {
            embedded: embedded.from_model,
            reused: embedded.from_cache,
            payload_updated: plan.update_payload.len(),
            deleted: plan.delete.len(),
            unchanged: plan.unchanged,
        };
        let written = write::run(&self.store, &plan, &embedded.vectors).await?;
        let write_time = lap.done(Stage::Write);
        self.metrics.store_write.observe(write_time.as_secs_f64());
        Ok(match written {
            Applied::Stale { indexed_revision } => Outcome::Stale { indexed_revision },
            Applied::Written if matches!(event.change, Change::Delete { .. }) => {
                Outcome::Deleted(decisions)
            }
            Applied::Written => Outcome::Applied(decisions),
        })
    }
}
