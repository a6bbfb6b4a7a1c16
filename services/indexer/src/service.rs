//! `casement-indexer run`: the Kafka service. Loads the model, opens the store, joins the
//! consumer group, runs the pipeline, serves the admin port, and drains on SIGTERM.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use casement_inference::{BlockingPool, Embed, OnnxEmbedder};
use casement_store::{AnyStore, Store};

use crate::admin::{self, Readiness};
use crate::config::IndexerConfig;
use crate::embed::{Embedder, embedding_cache};
use crate::enrich::Enricher;
use crate::kafka::consumer::{self, KafkaAck};
use crate::kafka::producer::KafkaDeadLetters;
use crate::metrics::Metrics;
use crate::pipeline::{self, Finished, Shutdown, Stages};
use crate::process::Processor;
use crate::source::Offsets;

/// Loads the embedding model and opens the store: the processor every source shares.
pub async fn processor(
    config: &IndexerConfig,
    metrics: &Metrics,
) -> anyhow::Result<Processor<AnyStore>> {
    let model = load_model(config).await?;
    let store = AnyStore::open(&config.store, model.dimension())
        .await
        .map_err(|e| anyhow::anyhow!("opening the store: {e}"))?;
    processor_over(config, metrics, model, store)
}

/// Loads the embedding model of `[embedder]`.
pub async fn load_model(config: &IndexerConfig) -> anyhow::Result<Arc<dyn Embed>> {
    let embedder_config = config.embedder.clone();
    let model = tokio::task::spawn_blocking(move || OnnxEmbedder::load(&embedder_config))
        .await?
        .map_err(|e| anyhow::anyhow!("loading the embedding model: {e}"))?;
    Ok(Arc::new(model))
}

/// The processor over a loaded model and an open store (the all-in-one shares both with
/// the query service).
pub fn processor_over<S: Store>(
    config: &IndexerConfig,
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
        Enricher::new(&config.enrich, metrics)?,
        config.text.clone(),
        metrics.clone(),
    ))
}

/// Every 5 s: index size gauges, and whether the store answers.
pub fn spawn_store_probe<S: Store + Clone + 'static>(
    store: S,
    metrics: Metrics,
    readiness: Arc<Readiness>,
) {
    tokio::spawn(async move {
        loop {
            match store.stats().await {
                Ok(stats) => {
                    metrics.points.set(stats.points as i64);
                    metrics.documents.set(stats.documents as i64);
                    readiness.store_reachable.store(true, Ordering::Relaxed);
                }
                Err(error) => {
                    tracing::warn!(%error, "store probe failed");
                    readiness.store_reachable.store(false, Ordering::Relaxed);
                }
            }
            readiness
                .partitions_assigned
                .store(metrics.partitions.get() > 0, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
}

pub async fn run(config: IndexerConfig) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let readiness = Arc::new(Readiness::default());
    let address = admin::serve(config.admin.listen, metrics.clone(), readiness.clone()).await?;
    tracing::info!(%address, "admin port: /healthz /readyz /metrics");
    let processor = processor(&config, &metrics).await?;
    readiness.models_loaded.store(true, Ordering::Relaxed);
    spawn_store_probe(processor.store.clone(), metrics.clone(), readiness.clone());
    let running = start(&config, processor, None)?;
    stop_signal().await;
    tracing::info!("stopping: finishing events in hand");
    let positions = running.stop().await?;
    tracing::info!(?positions, "stopped; committed");
    Ok(())
}

/// The Kafka source and the pipeline, running.
#[derive(Debug)]
pub struct Running {
    shutdown: Shutdown,
    offsets: Offsets,
    ack: Arc<KafkaAck>,
    consume: tokio::task::JoinHandle<()>,
    tasks: tokio::task::JoinSet<()>,
}

/// Joins the consumer group and starts the pipeline over `processor`.
pub fn start<S: Store + 'static>(
    config: &IndexerConfig,
    processor: Processor<S>,
    observer: Option<tokio::sync::mpsc::UnboundedSender<Finished>>,
) -> anyhow::Result<Running> {
    let offsets = Offsets::default();
    let kafka = &config.kafka;
    let consumer = consumer::connect(kafka, offsets.clone(), processor.metrics().clone())?;
    let ack = Arc::new(KafkaAck {
        consumer: consumer.clone(),
        topic: kafka.topic.clone(),
    });
    let (shutdown, shutdown_rx) = Shutdown::new();
    let (input, tasks) = pipeline::spawn(
        Stages {
            processor: Arc::new(processor),
            config: config.pipeline.clone(),
            decode: config.events.clone(),
            dead_letters: Arc::new(KafkaDeadLetters::new(kafka)?),
            ack: ack.clone(),
            offsets: offsets.clone(),
            observer,
        },
        shutdown_rx.clone(),
    );
    let consume = tokio::spawn(consumer::consume(
        consumer,
        input,
        offsets.clone(),
        shutdown_rx,
    ));
    tracing::info!(topic = %kafka.topic, group = %kafka.group_id,
        dead_letters = %kafka.dead_letter_topic(), "consuming");
    Ok(Running {
        shutdown,
        offsets,
        ack,
        consume,
        tasks,
    })
}

impl Running {
    /// Stops taking messages, lets each stage finish the event in hand, commits what
    /// finished (synchronously) and leaves the group. Returns the committed positions.
    pub async fn stop(mut self) -> anyhow::Result<Vec<(i32, i64)>> {
        self.shutdown.trigger();
        self.consume.await?;
        while self.tasks.join_next().await.is_some() {}
        let positions = self.offsets.committable();
        self.ack.commit_sync(&positions)?;
        Ok(positions)
    }
}

/// SIGTERM or Ctrl-C.
pub async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Installs the `tracing` subscriber (text or JSON lines on stderr).
pub fn init_logging(config: &crate::config::LogConfig) -> anyhow::Result<()> {
    casement_config::logging::init(config).map_err(anyhow::Error::msg)
}
