//! One search, stage by stage: wait ([`wait`]) → embed (the query, on the blocking pool)
//! → search (one hybrid store query, fused; hits only at their document's indexed
//! revision, [`current`]) → expand ([`expand`]) → merge ([`merge`]) →
//! rerank ([`rerank`], [`excerpt`]) → select (`Searcher::select`: top_k and the token
//! budget, narrowing windows that do not fit) → answer ([`answer`]).
//! Each stage is timed into `casement_query_stage_duration_seconds`.

mod answer;
pub mod current;
pub mod excerpt;
pub mod expand;
pub mod merge;
mod rerank;
mod wait;

pub use rerank::Reranker;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use casement_inference::BlockingPool;
use casement_store::{HybridQuery, QueryFilter, Store};
use casement_text::DocRef;

use crate::api::{SearchResponse, Timings, ValidSearch};
use crate::config::{QueryConfig, SearchConfig};
use crate::error::ApiError;
use crate::metrics::Metrics;
use merge::Window;

/// What a search reads, replaced as one by a migration's swap ([`Searcher::swap`]): the
/// index, the model of its vectors (and the cache of that model's query vectors), the
/// radius its windows were stored with. A search takes it once, at its start, so it never
/// embeds with one model and searches the index of another.
#[derive(Debug)]
pub struct SearchIndex<S> {
    pub store: S,
    embedder: BlockingPool,
    /// Recent query embeddings (`search.embedding_cache`), keyed by the query text.
    embeddings: Option<moka::sync::Cache<String, Arc<[f32]>>>,
    pub window_radius: usize,
}

impl<S> SearchIndex<S> {
    fn new(store: S, embedder: BlockingPool, cache_entries: u64, window_radius: usize) -> Self {
        Self {
            store,
            embedder,
            embeddings: (cache_entries > 0).then(|| moka::sync::Cache::new(cache_entries)),
            window_radius,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Searcher<S> {
    /// Shared by the searcher's clones (the golden set's), so a swap reaches them too.
    index: Arc<std::sync::RwLock<Arc<SearchIndex<S>>>>,
    reranker: Option<Reranker>,
    /// The relevance calibration (`casement_inference::relevance`), shipped.
    calibration: Arc<casement_inference::relevance::Calibration>,
    search: SearchConfig,
    rerank_candidates: usize,
    max_wait: Duration,
    metrics: Metrics,
}

/// Most sentence hits one search reads while filling its answer (`top_k` honoured).
const MAX_HITS: usize = 2_000;

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
        let index = SearchIndex::new(
            store,
            embedder,
            config.search.embedding_cache,
            config.search.indexed_window_radius,
        );
        Self {
            index: Arc::new(std::sync::RwLock::new(Arc::new(index))),
            calibration: Arc::new(
                casement_inference::relevance::Calibration::shipped().unwrap_or_else(|e| {
                    unreachable!("the shipped calibration is checked by its test: {e}")
                }),
            ),
            reranker,
            search: config.search.clone(),
            rerank_candidates: config.rerank.candidates,
            max_wait: Duration::from_millis(config.limits.max_wait_ms),
            metrics,
        }
    }

    /// The index searches read now.
    pub fn index(&self) -> Arc<SearchIndex<S>> {
        match self.index.read() {
            Ok(index) => index.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The store searches read now.
    pub fn store(&self) -> S
    where
        S: Clone,
    {
        self.index().store.clone()
    }

    /// The radius the served index's windows were stored with.
    pub fn window_radius(&self) -> usize {
        self.index().window_radius
    }

    /// `config` with the served index's window radius (a request may not ask for wider
    /// windows than the index stores; a migration may have changed it).
    pub fn search_config<'a>(
        &self,
        config: &'a SearchConfig,
    ) -> std::borrow::Cow<'a, SearchConfig> {
        let radius = self.window_radius();
        if radius == config.indexed_window_radius {
            std::borrow::Cow::Borrowed(config)
        } else {
            std::borrow::Cow::Owned(SearchConfig {
                indexed_window_radius: radius,
                ..config.clone()
            })
        }
    }

    /// Serves another index from the next search on (searches under way finish on the one
    /// they started with): a migration's swap, and its rollback.
    pub fn swap(
        &self,
        store: S,
        embedder: Arc<dyn casement_inference::Embed>,
        window_radius: usize,
    ) {
        let index = Arc::new(SearchIndex::new(
            store,
            BlockingPool::new(embedder, 2),
            self.search.embedding_cache,
            window_radius,
        ));
        match self.index.write() {
            Ok(mut current) => *current = index,
            Err(poisoned) => *poisoned.into_inner() = index,
        }
    }

    /// The same searcher, timing and counting into `metrics`: the golden set's searches
    /// (`crate::eval`) stay out of the serving latency and merge metrics.
    pub fn with_metrics(&self, metrics: Metrics) -> Self
    where
        S: Clone,
    {
        Self {
            metrics,
            ..self.clone()
        }
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

    /// The query's embedding: from the cache when the same text was embedded recently.
    async fn embed_query(
        &self,
        index: &SearchIndex<S>,
        query: &str,
    ) -> Result<Arc<[f32]>, ApiError> {
        if let Some(vector) = index.embeddings.as_ref().and_then(|c| c.get(query)) {
            self.cached("hit");
            return Ok(vector);
        }
        let vector: Arc<[f32]> = index
            .embedder
            .embed(vec![query.to_owned()])
            .await
            .map_err(ApiError::model)?
            .pop()
            .ok_or_else(|| ApiError::Unavailable("the embedder returned no vector".into()))?
            .into();
        if let Some(cache) = &index.embeddings {
            self.cached("miss");
            cache.insert(query.to_owned(), vector.clone());
        }
        Ok(vector)
    }

    fn cached(&self, outcome: &str) {
        self.metrics
            .embedding_cache
            .with_label_values(&[outcome])
            .inc();
    }

    /// [`merge::select`], with the sentence ranges of the windows' documents read first
    /// when some window will need narrowing (one store read per document).
    async fn select(
        &self,
        index: &SearchIndex<S>,
        windows: Vec<Window>,
        top_k: usize,
        budget: usize,
        policy: merge::Budget,
    ) -> Result<(Vec<Window>, usize, usize), ApiError> {
        let candidates = &windows[..top_k.min(windows.len())];
        let mut neighbours = expand::Neighbours::new();
        if candidates.iter().map(Window::tokens).sum::<usize>() > budget {
            let revisions: HashMap<DocRef<'_>, u64> = candidates
                .iter()
                .map(|w| (DocRef::new(w.tenant.as_deref(), &w.doc_id), w.revision))
                .collect();
            neighbours = expand::neighbours(&index.store, &revisions).await?;
        }
        Ok(merge::select(windows, top_k, budget, &neighbours, policy))
    }

    /// Scores each window's calibrated relevance (from the stored vectors of its matched
    /// sentences and its words) and leaves out those under `min_relevance`; returns the
    /// rest and how many were left out.
    async fn score_relevance(
        &self,
        index: &SearchIndex<S>,
        query: &str,
        dense: &[f32],
        windows: Vec<Window>,
        min_relevance: f32,
    ) -> Result<(Vec<Window>, usize), ApiError> {
        let ids: Vec<uuid::Uuid> = windows
            .iter()
            .flat_map(|w| w.matches.iter().map(|m| m.id))
            .collect();
        let vectors = index
            .store
            .dense_vectors(&ids)
            .await
            .map_err(ApiError::store)?;
        let total = windows.len();
        let kept: Vec<Window> = windows
            .into_iter()
            .map(|mut w| {
                let similarity = w
                    .matches
                    .iter()
                    .filter_map(|m| vectors.get(&m.id))
                    .map(|v| casement_inference::cosine(dense, v))
                    .fold(0.0f32, f32::max);
                let matched: Vec<&str> = w.matches.iter().map(|m| m.sentence.as_str()).collect();
                let features =
                    casement_inference::relevance::features(query, &w.text, &matched, similarity);
                w.relevance = Some((similarity, self.calibration.relevance(&features)));
                w
            })
            .filter(|w| w.relevance.is_some_and(|(_, r)| r >= min_relevance))
            .collect();
        Ok((total - kept.len(), kept)).map(|(below, kept)| (kept, below))
    }

    pub async fn search(&self, request: ValidSearch) -> Result<SearchResponse, ApiError> {
        let started = Instant::now();
        let mut timings = Timings::default();

        let t = Instant::now();
        if !request.min_revision.is_empty() {
            let tenant = request.tenant.as_deref();
            wait::wait_for(
                || self.index(),
                &request.min_revision,
                tenant,
                &request.reader,
                self.max_wait,
            )
            .await?;
            timings.wait = self.stage("wait", t);
        }
        // Taken once, after the wait: the whole search reads one index with its model.
        let index = self.index();

        let t = Instant::now();
        let dense = self.embed_query(&index, &request.query).await?;
        timings.embed = self.stage("embed", t);

        let reranker = self.reranker.as_ref().filter(|_| request.rerank);
        // A reranker scores `rerank.candidates` windows whatever `top_k` is.
        let windows_wanted = match reranker {
            Some(_) => request.top_k.max(self.rerank_candidates),
            None => request.top_k,
        };
        // Merging eats hits (several sentences of one section become one window, copies
        // are dropped): when fewer than `top_k` windows come out of a full page of hits,
        // the search is run again for twice as many, until the answer is full or the
        // index has no more (a page shorter than asked for).
        let mut limit = (windows_wanted * self.search.hits_per_window).min(self.search.candidates);
        let most = (windows_wanted * self.search.hits_per_window * 16)
            .max(self.search.candidates)
            .min(MAX_HITS);
        let mut rounds = 0;
        let (mut windows, merged, dropped, exhausted) = loop {
            rounds += 1;
            let t = Instant::now();
            let hits = index
                .store
                .query(&HybridQuery {
                    dense: dense.to_vec(),
                    text: request.query.clone(),
                    limit,
                    candidates: self.search.candidates.max(limit),
                    filter: QueryFilter {
                        tenant: request.tenant.clone(),
                        doc_ids: request.doc_ids.clone(),
                        metadata: request.metadata.clone(),
                        reader: request.reader.clone(),
                    },
                    channels: self.search.channels,
                    channel_ranks: false,
                })
                .await
                .map_err(ApiError::store)?;
            let exhausted = hits.len() < limit;
            let (hits, hidden) = current::current_only(&index.store, hits, &request.reader).await?;
            if hidden > 0 {
                tracing::debug!(
                    hidden,
                    "hits of a revision being written (or of a deleted document) hidden"
                );
            }
            timings.search += self.stage("search", t);

            let t = Instant::now();
            let windows = expand::expand(
                &index.store,
                hits,
                request.window_radius,
                index.window_radius,
            )
            .await?;
            timings.expand += self.stage("expand", t);

            let t = Instant::now();
            // The whole union first; only an answer short of `top_k` has its long merged
            // windows cut (so a merge never costs an answer its context when it has room).
            let (mut merged_windows, mut merged) =
                merge::merge_overlapping(windows.clone(), self.search.window_score);
            let (mut windows_kept, mut dropped) =
                merge::drop_contained(merged_windows, self.search.containment);
            if windows_kept.len() < request.top_k {
                (merged_windows, merged) = merge::merge_capped(
                    windows,
                    self.search.window_score,
                    self.search.merge_max_tokens,
                );
                (windows_kept, dropped) =
                    merge::drop_contained(merged_windows, self.search.containment);
            }
            let windows = windows_kept;
            timings.merge += self.stage("merge", t);
            if windows.len() >= request.top_k || exhausted || limit >= most {
                break (windows, merged, dropped, exhausted);
            }
            limit = (limit * 2).min(most);
        };
        self.metrics.search_rounds.observe(rounds as f64);

        let mut reranker_name = None;
        if let Some(reranker) = reranker {
            let t = Instant::now();
            let count = self.rerank_candidates.min(windows.len());
            let scores = reranker.score(&request.query, &windows[..count]).await?;
            self.metrics.rerank_candidates.observe(count as f64);
            windows = merge::apply_rerank(windows, &scores);
            reranker_name = Some(reranker.name().to_owned());
            timings.rerank = self.stage("rerank", t);
        }

        let t = Instant::now();
        let (windows, truncated, narrowed) = self
            .select(
                &index,
                windows,
                request.top_k,
                request.token_budget,
                if request.budget_asked {
                    merge::Budget::Share
                } else {
                    merge::Budget::Cap
                },
            )
            .await?;
        let (windows, below) = self
            .score_relevance(
                &index,
                &request.query,
                &dense,
                windows,
                request.min_relevance,
            )
            .await?;
        timings.select = self.stage("select", t);
        self.decided("kept", windows.len());
        self.decided("narrowed", narrowed);
        self.decided("merged", merged);
        self.decided("dropped", dropped);
        self.decided("truncated", truncated);
        let tokens: usize = windows.iter().map(Window::tokens).sum();
        self.metrics.windows_returned.observe(windows.len() as f64);
        self.metrics.tokens_returned.observe(tokens as f64);
        timings.total = millis(started);
        let short = (windows.len() < request.top_k).then(|| {
            if below > 0 {
                "min_relevance"
            } else if truncated > 0 {
                "token_budget"
            } else if exhausted {
                "no_more_matches"
            } else {
                "search_limit"
            }
            .to_owned()
        });
        Ok(SearchResponse {
            short,
            windows: windows.into_iter().map(answer::answer).collect(),
            reranker: reranker_name,
            timings_ms: request.timings.then_some(timings),
        })
    }
}
