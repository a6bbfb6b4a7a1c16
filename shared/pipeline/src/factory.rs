//! Building the pipeline's parts from config: the embedding model (loaded off the async
//! executor, failing at start with a clear message), the [`Processor`] over a model and a
//! store, and the store probe that keeps readiness and the index gauges current. Every
//! service and the all-in-one build them here, and only here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use casement_inference::{BlockingPool, Embed, EmbedderConfig};
use casement_store::Store;
use casement_text::TextConfig;

use crate::config::{EnrichConfig, PipelineConfig};
use crate::metrics::Metrics;
use crate::processor::Processor;
use crate::stages::embed::{Embedder, embedding_cache};
use crate::stages::enrich::Enricher;

/// Loads the embedding model of `[embedder]`.
pub async fn load_model(config: &EmbedderConfig) -> anyhow::Result<Arc<dyn Embed>> {
    let config = config.clone();
    let model =
        tokio::task::spawn_blocking(move || casement_inference::OnnxEmbedder::load(&config))
            .await?
            .map_err(|e| anyhow::anyhow!("loading the embedding model: {e}"))?;
    Ok(Arc::new(model))
}

/// What the processor reads of a service's config.
#[derive(Debug, Clone, Copy)]
pub struct ProcessorConfig<'a> {
    pub pipeline: &'a PipelineConfig,
    pub enrich: &'a EnrichConfig,
    pub text: &'a TextConfig,
}

/// The processor over a loaded model and an open store (the all-in-one shares both with
/// the query service).
pub fn processor<S: Store>(
    config: ProcessorConfig<'_>,
    metrics: &Metrics,
    model: Arc<dyn Embed>,
    store: S,
) -> anyhow::Result<Processor<S>> {
    let embedder = Embedder::new(
        BlockingPool::new(model.clone(), config.pipeline.embed_concurrency),
        model.model_id().to_owned(),
        embedding_cache(config.pipeline.embedding_cache_entries),
        metrics.clone(),
    );
    Ok(Processor::new(
        store,
        embedder,
        Enricher::new(config.enrich, metrics)?,
        config.text.clone(),
        metrics.clone(),
    ))
}

/// Every 5 s: the index gauges (points, documents), and whether the store answers (for
/// readiness). Runs until the runtime stops.
pub fn spawn_store_probe<S: Store + Clone + 'static>(
    store: S,
    metrics: Metrics,
    store_reachable: Arc<AtomicBool>,
) {
    tokio::spawn(async move {
        loop {
            match store.stats().await {
                Ok(stats) => {
                    metrics.points.set(stats.points as i64);
                    metrics.documents.set(stats.documents as i64);
                    store_reachable.store(true, Ordering::Relaxed);
                }
                Err(error) => {
                    tracing::warn!(%error, "store probe failed");
                    store_reachable.store(false, Ordering::Relaxed);
                }
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
}
