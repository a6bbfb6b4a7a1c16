//! One process, every stage shared with the services: the embedding model and the store
//! are opened once; the pipeline (`casement_pipeline`) runs over the local sources; the
//! query service's application (`casement_query::service::app`) searches the same store.
//! One Prometheus registry serves every metric.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use casement_inference::Embed;
use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::{Finished, Metrics, Offsets, ProcessorSlot, Shutdown, SourceId, Stages};
use casement_store::{AnyStore, StoreProbe};
use prometheus::Registry;
use tokio::sync::{mpsc, watch};

use crate::config::CasementConfig;
use crate::metrics::LocalMetrics;
use crate::sources::dead_letters::DeadLetterFile;
use crate::sources::mediawiki::StreamPosition;
use crate::sources::{Feeder, LocalAck, Positions};

pub struct Engine {
    pub config: CasementConfig,
    pub feeder: Feeder,
    pub store_probe: StoreProbe,
    pub model: Arc<dyn Embed>,
    /// The pipeline's processor (an audit plans with it); a migration's swap replaces it.
    pub processor: Arc<ProcessorSlot<AnyStore>>,
    pub registry: Registry,
    pub pipeline_metrics: Metrics,
    pub local_metrics: LocalMetrics,
    pub dead_letters: Arc<DeadLetterFile>,
    /// Where the MediaWiki stream resumes (when `[sources.mediawiki]` is on).
    pub stream_position: Option<Arc<StreamPosition>>,
    /// Replay events finished (durably written, stale or dead-lettered) in this run.
    pub replay_finished: watch::Receiver<u64>,
    /// Events of every source finished in this run.
    pub all_finished: watch::Receiver<u64>,
    /// The mass-deletion guard every lane and the watcher ask.
    pub guard: casement_pipeline::DeleteGuard,
    shutdown: Shutdown,
    tasks: tokio::task::JoinSet<()>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("data_dir", &self.config.data_dir)
            .field("model", &self.model.model_id())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Loads the model, opens the store (locking its directory) and starts the pipeline.
    /// `positions` says where the replay resumes (its committed position).
    pub async fn start(config: CasementConfig, positions: Positions) -> anyhow::Result<Self> {
        crate::snapshot::check_not_restoring(&config.data_dir)?;
        prepare_data_dir(&config.data_dir)?;
        // Which index is served (a malformed pointer fails here, not as another index).
        crate::serving::Serving::load(&config.data_dir)?;
        check_disk_reserve(&config)?;
        let registry = Registry::new();
        let pipeline_metrics = Metrics::with_registry(registry.clone());
        let local_metrics = LocalMetrics::new(&registry);
        let model = factory::load_model(&config.embedder).await?;
        casement_service::register_process_metrics(
            &registry,
            casement_service::BuildInfo {
                version: env!("CARGO_PKG_VERSION"),
                model: model.model_id(),
                store_backend: config.store().backend.as_str(),
            },
        )?;
        let store = AnyStore::open(&config.store(), model.dimension())
            .await
            .context("opening the index ([store])")?;
        let processor_config = ProcessorConfig {
            pipeline: &config.pipeline,
            enrich: &config.enrich,
            text: &config.text,
            fetch: &config.fetch,
        };
        factory::check_index_settings(&store, &model, processor_config).await?;
        let processor = Arc::new(ProcessorSlot::new(factory::processor(
            processor_config,
            &pipeline_metrics,
            model.clone(),
            store.clone(),
        )?));
        // One probe: the index gauges and the query router's readiness, of the index the
        // pipeline writes (after a migration's swap, the new one).
        let serving = processor.clone();
        let store_probe =
            factory::spawn_store_probe(move || serving.current().store.clone(), &pipeline_metrics);
        let offsets = Offsets::default();
        let dead_letters = Arc::new(DeadLetterFile::new(&config.dead_letter_file()));
        let replay_start = positions.replay_next;
        let stream_position = config.sources.mediawiki.enabled().then(|| {
            Arc::new(StreamPosition::load(
                &config.data_dir,
                config.sources.mediawiki.followed(),
            ))
        });
        let (observer_tx, observer_rx) = mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = Shutdown::new();
        let guard = casement_pipeline::DeleteGuard::new(
            config.sources.guard(),
            pipeline_metrics.deletes_held.clone(),
        );
        let (input, mut tasks) = casement_pipeline::spawn(
            Stages {
                processor: processor.clone(),
                config: config.pipeline.clone(),
                decode: config.decode(),
                dead_letters: dead_letters.clone(),
                ack: Arc::new(LocalAck::new(
                    &config.data_dir,
                    positions,
                    stream_position.clone(),
                )),
                offsets: offsets.clone(),
                observer: Some(observer_tx),
                guard: guard.clone(),
            },
            shutdown_rx,
        );
        let feeder = Feeder::new(input, offsets, replay_start, local_metrics.clone());
        let (replay_tx, replay_finished) = watch::channel(0);
        let (all_tx, all_finished) = watch::channel(0);
        tasks.spawn(count_finished(observer_rx, [replay_tx, all_tx]));
        Ok(Self {
            config,
            feeder,
            store_probe,
            model,
            processor,
            registry,
            pipeline_metrics,
            local_metrics,
            dead_letters,
            stream_position,
            replay_finished,
            all_finished,
            guard,
            shutdown,
            tasks,
        })
    }

    /// The index the pipeline writes now (a migration's swap replaces it; nothing here keeps
    /// the replaced one open).
    pub fn store(&self) -> AnyStore {
        self.processor.current().store.clone()
    }

    /// Events of this run finished with `outcome` (applied, deleted, stale,
    /// dead_lettered), from the pipeline's own counters.
    pub fn events(&self, outcome: &str) -> u64 {
        self.pipeline_metrics
            .events
            .with_label_values(&[outcome])
            .get()
    }

    /// Sentences of this run by `decision` (embedded, reused, ...).
    pub fn sentences(&self, decision: casement_pipeline::Decision) -> u64 {
        self.pipeline_metrics
            .sentences
            .with_label_values(&[decision.as_str()])
            .get()
    }

    /// Stops taking events, lets every stage finish the event in hand and commits what
    /// finished. Stop the sources first (they hold senders into the pipeline).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.trigger();
        drop(self.feeder);
        // The lanes give up on their events at the grace period; this is the backstop.
        let backstop = self.config.pipeline.shutdown_grace() + Duration::from_secs(10);
        let deadline = tokio::time::sleep(backstop);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                next = self.tasks.join_next() => if next.is_none() { break },
                _ = &mut deadline => {
                    tracing::warn!(backstop_s = backstop.as_secs(), "stages still busy; stopping them (nothing committed past them)");
                    self.tasks.abort_all();
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Progress: events finished by the replay and by every source.
async fn count_finished(
    mut finished: mpsc::UnboundedReceiver<Finished>,
    [replay, all]: [watch::Sender<u64>; 2],
) {
    while let Some(event) = finished.recv().await {
        all.send_modify(|n| *n += 1);
        if event.origin.source == SourceId::Replay {
            replay.send_modify(|n| *n += 1);
        }
    }
}

/// Creates the data directory and checks that it takes writes, so that a read-only mount
/// or a directory owned by another user fails at start with the reason, not at the first
/// event.
/// Refuses to start on a disk already within the embedded store's reserve: opening the
/// index writes to it, and a service that started would hold every event. The message says
/// what to do (a disk that fills up later holds writes until space returns instead).
fn check_disk_reserve(config: &CasementConfig) -> anyhow::Result<()> {
    let store = config.store();
    let reserve = store.edge.min_free_bytes;
    if store.backend != casement_store::Backend::Edge || reserve == 0 {
        return Ok(());
    }
    let Ok(free) = fs4::available_space(&config.data_dir) else {
        return Ok(());
    };
    const MIB: f64 = 1024.0 * 1024.0;
    anyhow::ensure!(
        free >= reserve,
        "the disk under {} has {:.1} MiB available, below store.edge.min_free_bytes ({:.1} \
         MiB), so the index cannot be opened for writing: free some space (or lower \
         store.edge.min_free_bytes) and start again",
        config.data_dir.display(),
        free as f64 / MIB,
        reserve as f64 / MIB
    );
    Ok(())
}

pub fn prepare_data_dir(data_dir: &std::path::Path) -> anyhow::Result<()> {
    let explain = |what: &str, error: std::io::Error| {
        anyhow::anyhow!(
            "data_dir {} {what}: {error} (Casement keeps its index, source positions and \
             dead letters there; give it a writable directory)",
            data_dir.display()
        )
    };
    std::fs::create_dir_all(data_dir).map_err(|e| explain("cannot be created", e))?;
    let probe = data_dir.join(".casement-write-check");
    std::fs::write(&probe, b"").map_err(|e| explain("is not writable", e))?;
    std::fs::remove_file(&probe).map_err(|e| explain("is not writable", e))?;
    Ok(())
}
