//! Building the pipeline's parts from config: the embedding model (loaded off the async
//! executor, failing at start with a clear message), the [`Processor`] over a model and a
//! store, and the store probe that keeps readiness and the index gauges current. Every
//! service and the all-in-one build them here, and only here.

use std::sync::Arc;

use casement_inference::{BlockingPool, Embed, EmbedderConfig};
use casement_store::{Store, StoreProbe};
use casement_text::TextConfig;

use crate::config::{EnrichConfig, PipelineConfig};
use crate::fetch::{FetchConfig, Fetcher};
use crate::metrics::Metrics;
use crate::processor::Processor;
use crate::stages::batch::{BatchConfig, Batcher};
use crate::stages::embed::{Embedder, embedding_cache};
use crate::stages::enrich::Enricher;

/// Loads the embedding model of `[embedder]` (`kind = "onnx"`, the default, or a hosted
/// `"openai"` one), off the async executor.
pub async fn load_model(config: &EmbedderConfig) -> anyhow::Result<Arc<dyn Embed>> {
    let config = config.clone();
    tokio::task::spawn_blocking(move || casement_inference::load_embedder(&config))
        .await?
        .map_err(|e| anyhow::anyhow!("loading the embedding model ([embedder]): {e}"))
}

/// What the processor reads of a service's config.
#[derive(Debug, Clone, Copy)]
pub struct ProcessorConfig<'a> {
    pub pipeline: &'a PipelineConfig,
    pub enrich: &'a EnrichConfig,
    pub text: &'a TextConfig,
    /// Where revisions that events only name are fetched (`[fetch]`).
    pub fetch: &'a FetchConfig,
}

/// How this configuration situates each sentence: `structural`, `none`, or
/// `llm:<model>:<prompt version>` (recorded in the index's settings).
pub fn context_label(enrich: &EnrichConfig) -> String {
    match enrich.mode {
        crate::config::EnrichMode::Structural => "structural".to_owned(),
        crate::config::EnrichMode::None => "none".to_owned(),
        crate::config::EnrichMode::Llm => {
            format!("llm:{}:{}", enrich.llm.model, enrich.llm.prompt_version)
        }
    }
}

/// A writer's check of the index's recorded settings against its model and config
/// (`casement_store::check_settings`): a mismatch fails the start with both named; an
/// index without settings gets this process's, logged when it already holds documents.
pub async fn check_index_settings<S: Store>(
    store: &S,
    model: &Arc<dyn Embed>,
    config: ProcessorConfig<'_>,
) -> anyhow::Result<()> {
    let ours = casement_store::IndexSettings {
        model: model.model_id().to_owned(),
        dimension: model.dimension(),
        probe: BlockingPool::new(model.clone(), 1)
            .embed(vec![casement_store::SETTINGS_PROBE.to_owned()])
            .await
            .map_err(|e| anyhow::anyhow!("embedding the settings probe: {e}"))?
            .pop()
            .unwrap_or_default(),
        window_radius: config.text.window_radius,
        context: context_label(config.enrich),
    };
    match casement_store::check_settings(store, &ours, casement_store::Access::Write).await {
        Ok(casement_store::SettingsCheck::Recorded { documents }) if documents > 0 => {
            tracing::info!(
                documents,
                model = %ours.model,
                window_radius = ours.window_radius,
                context = %ours.context,
                "the index had no recorded settings (made before Casement kept them): recorded this configuration's"
            );
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(error) => Err(anyhow::anyhow!("{error}")),
    }
}

/// The processor over a loaded model and an open store (the all-in-one shares both with
/// the query service), with the fetcher of `[fetch]` when it names an API (started on the
/// current runtime).
pub fn processor<S: Store>(
    config: ProcessorConfig<'_>,
    metrics: &Metrics,
    model: Arc<dyn Embed>,
    store: S,
) -> anyhow::Result<Processor<S>> {
    let batcher = Batcher::new(
        BlockingPool::new(model.clone(), config.pipeline.embed_concurrency),
        BatchConfig {
            batch: config.pipeline.embed_batch,
            linger: config.pipeline.embed_linger(),
            concurrency: config.pipeline.embed_concurrency,
        },
        metrics.clone(),
    );
    let embedder = Embedder::new(
        batcher,
        model.model_id().to_owned(),
        embedding_cache(config.pipeline.embedding_cache_entries),
    );
    Ok(Processor::new(
        store,
        embedder,
        Enricher::new(config.enrich, metrics)?,
        config.text.clone(),
        metrics.clone(),
    )
    .with_max_document_sentences(config.pipeline.max_document_sentences)
    .with_fetcher(Fetcher::start(config.fetch, metrics.fetch.clone())?))
}

/// The process's one store probe: it keeps the index gauges (points, documents) and
/// answers readiness (`StoreProbe::reachable`), for the indexer's admin port and the
/// all-in-one's query router alike. `store` gives the index to ask at each probe (the
/// all-in-one's changes at a migration's swap).
pub fn spawn_store_probe<S, F>(store: F, metrics: &Metrics) -> StoreProbe
where
    S: Store + 'static,
    F: Fn() -> S + Send + Sync + 'static,
{
    let (points, documents, disk, available, replaced) = (
        metrics.points.clone(),
        metrics.documents.clone(),
        metrics.disk.clone(),
        metrics.disk_available.clone(),
        metrics.replaced.clone(),
    );
    let (compactions, reclaimed, duration) = (
        metrics.compactions.clone(),
        metrics.compaction_reclaimed.clone(),
        metrics.compaction_duration.clone(),
    );
    StoreProbe::spawn_following(store, move |stats| {
        if let Some(done) = stats.compaction {
            // The store counts since it opened; the counters follow it.
            compactions.inc_by(done.runs.saturating_sub(compactions.get()));
            reclaimed.inc_by(done.reclaimed_bytes.saturating_sub(reclaimed.get()));
            duration.set(done.last_duration.as_secs_f64());
        }
        points.set(stats.points as i64);
        documents.set(stats.documents as i64);
        replaced.set(i64::from(stats.replaced));
        if let Some(usage) = stats.disk {
            disk.with_label_values(&["segments"])
                .set(usage.segments as i64);
            disk.with_label_values(&["wal"]).set(usage.wal as i64);
        }
        if let Some(bytes) = stats.disk_available {
            available.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
    })
}
