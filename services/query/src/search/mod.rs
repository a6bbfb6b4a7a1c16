//! One search, stage by stage: wait (read-your-writes) → embed → search (hybrid, fused) →
//! expand → merge → rerank → answer. Each stage is timed into
//! `casement_query_stage_duration_seconds`.

pub mod excerpt;
pub mod expand;
pub mod merge;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use casement_inference::{BlockingPool, Candidate, Rerank};
use casement_store::{HybridQuery, QueryFilter, Store};
use tokio::sync::Semaphore;

use crate::api::{MatchAnswer, Scores, SearchResponse, Timings, ValidSearch, WindowAnswer};
use crate::config::{QueryConfig, SearchConfig};
use crate::error::ApiError;
use crate::metrics::Metrics;
use merge::Window;

/// A reranker run on the blocking pool, one request at a time (each run already uses every
/// ONNX Runtime thread).
#[derive(Clone)]
pub struct Reranker {
    model: Arc<dyn Rerank>,
    permit: Arc<Semaphore>,
    /// Words of each window the model reads ([`excerpt::rerank_text`]).
    max_words: usize,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("name", &self.model.name())
            .finish()
    }
}

impl Reranker {
    pub fn new(model: Arc<dyn Rerank>) -> Self {
        Self {
            model,
            permit: Arc::new(Semaphore::new(1)),
            max_words: usize::MAX,
        }
    }

    /// The model reads at most `max_words` words of each window, centred on its best match.
    pub fn with_max_words(mut self, max_words: usize) -> Self {
        self.max_words = max_words.max(1);
        self
    }

    pub fn name(&self) -> &str {
        self.model.name()
    }

    async fn score(&self, query: &str, windows: &[Window]) -> Result<Vec<f32>, ApiError> {
        let _permit = self
            .permit
            .acquire()
            .await
            .map_err(|_| ApiError::Unavailable("reranker closed".into()))?;
        let model = self.model.clone();
        let query = query.to_owned();
        let inputs: Vec<(String, f32)> = windows
            .iter()
            .map(|w| (excerpt::rerank_text(w, self.max_words), w.score))
            .collect();
        tokio::task::spawn_blocking(move || {
            let candidates: Vec<Candidate<'_>> = inputs
                .iter()
                .map(|(text, score)| Candidate {
                    text,
                    retrieval_score: *score,
                })
                .collect();
            model.score(&query, &candidates)
        })
        .await
        .map_err(|e| ApiError::Unavailable(format!("reranker task failed: {e}")))?
        .map_err(ApiError::model)
    }
}

#[derive(Debug, Clone)]
pub struct Searcher<S> {
    store: S,
    embedder: BlockingPool,
    reranker: Option<Reranker>,
    search: SearchConfig,
    rerank_candidates: usize,
    max_wait: Duration,
    metrics: Metrics,
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

impl<S: Store> Searcher<S> {
    pub fn new(
        store: S,
        embedder: BlockingPool,
        reranker: Option<Reranker>,
        config: &QueryConfig,
        metrics: Metrics,
    ) -> Self {
        Self {
            store,
            embedder,
            reranker,
            search: config.search.clone(),
            rerank_candidates: config.rerank.candidates,
            max_wait: Duration::from_millis(config.limits.max_wait_ms),
            metrics,
        }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    fn stage(&self, stage: &str, started: Instant) -> f64 {
        let ms = millis(started);
        self.metrics
            .stage_duration
            .with_label_values(&[stage])
            .observe(ms / 1000.0);
        ms
    }

    fn decided(&self, decision: &str, count: usize) {
        self.metrics
            .merge_decisions
            .with_label_values(&[decision])
            .inc_by(count as u64);
    }

    pub async fn search(&self, request: ValidSearch) -> Result<SearchResponse, ApiError> {
        let started = Instant::now();
        let mut timings = Timings::default();

        let t = Instant::now();
        if !request.min_revision.is_empty() {
            self.wait_for(&request.min_revision, request.tenant.as_deref())
                .await?;
            timings.wait = self.stage("wait", t);
        }

        let t = Instant::now();
        let dense = self
            .embedder
            .embed(vec![request.query.clone()])
            .await
            .map_err(ApiError::model)?
            .pop()
            .ok_or_else(|| ApiError::Unavailable("the embedder returned no vector".into()))?;
        timings.embed = self.stage("embed", t);

        let t = Instant::now();
        let hits = self
            .store
            .query(&HybridQuery {
                dense,
                text: request.query.clone(),
                limit: (request.top_k * self.search.hits_per_window).min(self.search.candidates),
                candidates: self.search.candidates,
                filter: QueryFilter {
                    tenant: request.tenant.clone(),
                    doc_ids: request.doc_ids.clone(),
                },
                channel_ranks: false,
            })
            .await
            .map_err(ApiError::store)?;
        timings.search = self.stage("search", t);

        let t = Instant::now();
        let windows = expand::expand(
            &self.store,
            hits,
            request.window_radius,
            self.search.indexed_window_radius,
        )
        .await?;
        timings.expand = self.stage("expand", t);

        let t = Instant::now();
        let (windows, merged) = merge::merge_overlapping(windows);
        let (mut windows, dropped) = merge::drop_contained(windows, self.search.containment);
        timings.merge = self.stage("merge", t);

        let mut reranker_name = None;
        if let Some(reranker) = self.reranker.as_ref().filter(|_| request.rerank) {
            let t = Instant::now();
            let count = self.rerank_candidates.min(windows.len());
            let scores = reranker.score(&request.query, &windows[..count]).await?;
            self.metrics.rerank_candidates.observe(count as f64);
            windows = merge::apply_rerank(windows, &scores);
            reranker_name = Some(reranker.name().to_owned());
            timings.rerank = self.stage("rerank", t);
        }

        let (windows, truncated) = merge::select(windows, request.top_k, self.search.token_budget);
        self.decided("kept", windows.len());
        self.decided("merged", merged);
        self.decided("dropped", dropped);
        self.decided("truncated", truncated);
        let tokens: usize = windows.iter().map(Window::tokens).sum();
        self.metrics.windows_returned.observe(windows.len() as f64);
        self.metrics.tokens_returned.observe(tokens as f64);
        timings.total = millis(started);
        Ok(SearchResponse {
            windows: windows.into_iter().map(answer).collect(),
            reranker: reranker_name,
            timings_ms: request.timings.then_some(timings),
        })
    }

    /// Read-your-writes: polls the documents' indexed revisions until each reaches the one
    /// asked for, or answers 409 with the revision the index holds. A document of another
    /// tenant than the request's counts as not indexed (its revision is not disclosed).
    async fn wait_for(
        &self,
        wanted: &BTreeMap<String, u64>,
        tenant: Option<&str>,
    ) -> Result<(), ApiError> {
        let deadline = Instant::now() + self.max_wait;
        loop {
            let mut behind = None;
            for (doc_id, &revision) in wanted {
                let state = self.store.document(doc_id).await.map_err(ApiError::store)?;
                let indexed = state
                    .filter(|s| tenant.is_none() || s.tenant.as_deref() == tenant)
                    .map_or(0, |s| s.revision);
                if indexed < revision {
                    behind = Some((doc_id, indexed, revision));
                    break;
                }
            }
            match behind {
                None => return Ok(()),
                Some((doc_id, indexed, wanted)) if Instant::now() >= deadline => {
                    return Err(ApiError::RevisionNotIndexed {
                        doc_id: doc_id.clone(),
                        indexed,
                        wanted,
                    });
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

fn answer(window: Window) -> WindowAnswer {
    let tokens = window.tokens();
    WindowAnswer {
        doc_id: window.doc_id,
        title: window.title,
        url: window.url,
        tenant: window.tenant,
        section_path: window.section_path,
        revision: window.revision,
        text: window.text,
        char_start: window.char_start,
        char_end: window.char_end,
        matches: window
            .matches
            .into_iter()
            .map(|m| MatchAnswer {
                sentence: m.sentence,
                char_start: m.char_start,
                char_end: m.char_end,
                score: m.score,
            })
            .collect(),
        scores: Scores {
            fused: window.score,
            rerank: window.rerank,
        },
        tokens,
    }
}
