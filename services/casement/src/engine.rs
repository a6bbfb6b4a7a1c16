//! One process, every stage shared with the services: the embedding model and the store
//! are opened once; the indexer's pipeline (`casement_indexer::pipeline`) runs over local
//! sources; the query service's application (`casement_query::service::app`) searches the
//! same store. One Prometheus registry serves every metric.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use anyhow::Context;
use casement_indexer::admin::Readiness;
use casement_indexer::pipeline::{self, Finish, Finished, Shutdown, Stages};
use casement_indexer::service::{load_model, processor_over, spawn_store_probe};
use casement_indexer::source::Offsets;
use casement_inference::Embed;
use casement_store::AnyStore;
use prometheus::Registry;
use tokio::sync::{mpsc, watch};

use crate::config::CasementConfig;
use crate::metrics::LocalMetrics;
use crate::sources::dead_letters::DeadLetterFile;
use crate::sources::{Feeder, LocalAck, Positions, REPLAY, WATCH, WEBHOOK};
use crate::webhook::Waiters;

pub struct Engine {
    pub config: CasementConfig,
    pub feeder: Feeder,
    pub store: AnyStore,
    pub model: Arc<dyn Embed>,
    pub registry: Registry,
    pub indexer_metrics: casement_indexer::metrics::Metrics,
    pub local_metrics: LocalMetrics,
    pub waiters: Arc<Waiters>,
    pub dead_letters: Arc<DeadLetterFile>,
    /// Watch offsets below this are the start-up resends of known files (not logged).
    pub watch_resends: Arc<AtomicI64>,
    /// Replay events finished (durably written, stale or dead-lettered) in this run.
    pub replay_finished: watch::Receiver<u64>,
    /// Events of every source finished in this run.
    pub all_finished: watch::Receiver<u64>,
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
    /// `replay_start` is where the replay resumes (its committed position).
    pub async fn start(config: CasementConfig, positions: Positions) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("creating data_dir {}", config.data_dir.display()))?;
        let indexer_config = config.indexer();
        let registry = Registry::new();
        let indexer_metrics = casement_indexer::metrics::Metrics::with_registry(registry.clone());
        let local_metrics = LocalMetrics::new(&registry);
        let model = load_model(&indexer_config).await?;
        let store = AnyStore::open(&indexer_config.store, model.dimension())
            .await
            .context("opening the index ([store])")?;
        let processor = processor_over(
            &indexer_config,
            &indexer_metrics,
            model.clone(),
            store.clone(),
        )?;
        spawn_store_probe(
            store.clone(),
            indexer_metrics.clone(),
            Arc::new(Readiness::default()),
        );
        let offsets = Offsets::default();
        let dead_letters = Arc::new(DeadLetterFile::new(&config.dead_letter_file()));
        let replay_start = positions.replay_next;
        let (observer_tx, observer_rx) = mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = Shutdown::new();
        let (input, mut tasks) = pipeline::spawn(
            Stages {
                processor: Arc::new(processor),
                config: config.pipeline.clone(),
                decode: config.events.clone(),
                dead_letters: dead_letters.clone(),
                ack: Arc::new(LocalAck::new(&config.data_dir, positions)),
                offsets: offsets.clone(),
                observer: Some(observer_tx),
            },
            shutdown_rx,
        );
        let feeder = Feeder::new(input, offsets, replay_start, local_metrics.clone());
        let waiters = Arc::new(Waiters::default());
        let (replay_tx, replay_finished) = watch::channel(0);
        let (all_tx, all_finished) = watch::channel(0);
        let watch_resends = Arc::new(AtomicI64::new(0));
        tasks.spawn(dispatch(
            observer_rx,
            waiters.clone(),
            watch_resends.clone(),
            [replay_tx, all_tx],
        ));
        Ok(Self {
            config,
            feeder,
            store,
            model,
            registry,
            indexer_metrics,
            local_metrics,
            waiters,
            dead_letters,
            watch_resends,
            replay_finished,
            all_finished,
            shutdown,
            tasks,
        })
    }

    /// Events of this run finished with `outcome` (applied, deleted, stale,
    /// dead_lettered), from the indexer's own counters.
    pub fn events(&self, outcome: &str) -> u64 {
        self.indexer_metrics
            .events
            .with_label_values(&[outcome])
            .get()
    }

    /// Sentences of this run by `decision` (embedded, reused, ...).
    pub fn sentences(&self, decision: &str) -> u64 {
        self.indexer_metrics
            .sentences
            .with_label_values(&[decision])
            .get()
    }

    /// Stops taking events, lets every stage finish the event in hand and commits what
    /// finished. Stop the sources first (they hold senders into the pipeline).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.trigger();
        drop(self.feeder);
        let deadline = tokio::time::sleep(Duration::from_secs(60));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                next = self.tasks.join_next() => if next.is_none() { break },
                _ = &mut deadline => {
                    tracing::warn!("stages still busy after 60 s; stopping them (nothing committed past them)");
                    self.tasks.abort_all();
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Routes finished events: webhook requests get their outcome, the replay and overall
/// progress move, and live edits (watch, webhook) are logged one line each.
async fn dispatch(
    mut finished: mpsc::UnboundedReceiver<Finished>,
    waiters: Arc<Waiters>,
    watch_resends: Arc<AtomicI64>,
    [replay, all]: [watch::Sender<u64>; 2],
) {
    while let Some(event) = finished.recv().await {
        all.send_modify(|n| *n += 1);
        match event.partition {
            REPLAY => {
                replay.send_modify(|n| *n += 1);
            }
            WATCH | WEBHOOK => {
                // The start-up resend of known files is not news.
                let resend = event.partition == WATCH
                    && event.offset < watch_resends.load(Ordering::Relaxed);
                if !resend {
                    log_live(&event);
                }
                if event.partition == WEBHOOK {
                    waiters.finish(event);
                }
            }
            _ => {}
        }
    }
}

fn log_live(event: &Finished) {
    let source = crate::sources::name(event.partition);
    let (doc_id, revision) = event.document.clone().unwrap_or_default();
    let revision = revision.map_or_else(|| "-".to_owned(), |r| r.to_string());
    match event.finish {
        Finish::Applied(d) => tracing::info!(
            "{source}: indexed {doc_id} revision {revision}: {} sentences embedded, {} reused, {} moved, {} deleted, {} unchanged",
            d.embedded,
            d.cache_hits,
            d.payload_updated,
            d.deleted,
            d.unchanged
        ),
        Finish::Deleted(_) => tracing::info!("{source}: deleted {doc_id} (revision {revision})"),
        Finish::Stale => tracing::info!(
            "{source}: {doc_id} revision {revision} is not newer than the indexed one; nothing changed"
        ),
        Finish::DeadLettered(reason) => tracing::warn!(
            "{source}: rejected an event ({reason}): {}",
            event.detail.as_deref().unwrap_or("")
        ),
    }
}
