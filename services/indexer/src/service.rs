//! `casement-indexer run`: the Kafka service. Loads the model, opens the store, joins the
//! consumer group, runs the pipeline (`casement_pipeline`), serves the admin port, and
//! drains when the `shutdown` future its binary hands it resolves.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::{Finished, Metrics, Offsets, Processor, Shutdown, SourceId, Stages};
use casement_store::{AnyStore, Store};

use crate::admin::{self, Readiness};
use crate::config::IndexerConfig;
use crate::kafka::consumer::{self, KafkaAck};
use crate::kafka::producer::KafkaDeadLetters;

/// Loads the embedding model and opens the store: the processor of this service.
pub async fn processor(
    config: &IndexerConfig,
    metrics: &Metrics,
) -> anyhow::Result<Processor<AnyStore>> {
    let model = factory::load_model(&config.embedder).await?;
    casement_service::register_process_metrics(
        &metrics.registry,
        casement_service::BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            model: model.model_id(),
            store_backend: config.store.backend.as_str(),
        },
    )?;
    let store = AnyStore::open(&config.store, model.dimension())
        .await
        .map_err(|e| anyhow::anyhow!("opening the store: {e}"))?;
    factory::check_index_settings(&store, &model, processor_config(config)).await?;
    factory::processor(processor_config(config), metrics, model, store)
}

/// The parts of the service's config the processor reads.
pub fn processor_config(config: &IndexerConfig) -> ProcessorConfig<'_> {
    ProcessorConfig {
        pipeline: &config.pipeline,
        enrich: &config.enrich,
        text: &config.text,
        fetch: &config.fetch,
    }
}

/// Runs the service until `shutdown` resolves, then drains and commits.
pub async fn run(config: IndexerConfig, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let readiness = Arc::new(Readiness::default());
    let address = admin::serve(config.admin.listen, metrics.clone(), readiness.clone()).await?;
    tracing::info!(%address, "admin port: /healthz /readyz /metrics");
    let processor = processor(&config, &metrics).await?;
    // A wiki that refuses to let this client read stops the start, with the reason.
    if let Some(fetcher) = processor.fetcher() {
        fetcher.check_access().await.map_err(|denied| {
            anyhow::anyhow!("fetch.api_url = {:?}: {denied}", config.fetch.api_url)
        })?;
    }
    readiness.models_loaded.store(true, Ordering::Relaxed);
    let probed = processor.store.clone();
    let probe = factory::spawn_store_probe(move || probed.clone(), &metrics);
    let _ = readiness.store.set(probe);
    let running = start(&config, processor, None)?;
    shutdown.await;
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
    let processor_metrics = processor.metrics().clone();
    let consumer = consumer::connect(kafka, offsets.clone(), processor_metrics.clone())?;
    let ack = Arc::new(KafkaAck {
        consumer: consumer.clone(),
        topic: kafka.topic.clone(),
    });
    let (shutdown, shutdown_rx) = Shutdown::new();
    let (input, tasks) = casement_pipeline::spawn(
        Stages {
            processor: Arc::new(casement_pipeline::ProcessorSlot::new(processor)),
            config: config.pipeline.clone(),
            decode: config.decode(),
            dead_letters: Arc::new(KafkaDeadLetters::new(kafka)?),
            ack: ack.clone(),
            offsets: offsets.clone(),
            observer,
            guard: casement_pipeline::DeleteGuard::new(
                config.sources.clone(),
                processor_metrics.deletes_held.clone(),
            ),
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
    pub async fn stop(mut self) -> anyhow::Result<Vec<(SourceId, i64)>> {
        self.shutdown.trigger();
        self.consume.await?;
        while self.tasks.join_next().await.is_some() {}
        let positions = self.offsets.committable();
        self.ack.commit_sync(&positions)?;
        Ok(positions)
    }
}
