//! Starting the pipeline: the stages as tasks, bounded channels between them.
//!
//! ```text
//! source ─▶ route (decode) ─┬─▶ lane 0..N: fence → read → segment → enrich → plan → embed → write ─▶ commit ─┬─▶ ack
//!                           │                                                  ▲                               │
//!                           │                                   batcher (model batches across lanes)           │
//!                           └─▶ dead letters ◀── (events that can never succeed) ──────────────────────────────┘
//! ```
//!
//! Each message carries its [`Receipt`] (where it came from, whether it is a resend, who
//! waits for its outcome) through the stages to the ack stage, which records it, replies
//! and commits. Shutdown: the source drops its sender (or [`Shutdown::trigger`] is called);
//! each stage finishes the event in hand, and the ack stage commits what finished.

use std::sync::Arc;

use casement_events::DecodeConfig;
use casement_store::Store;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::config::PipelineConfig;
use crate::offsets::Offsets;
use crate::outcome::{Finished, Outcome};
use crate::slot::ProcessorSlot;
use crate::source::{Acknowledge, DeadLetter, DeadLetterSink, Origin, SourceMessage};
use crate::stages::{ack, commit, dead_letter, lane, route};

/// What travels with a message from the source to the ack stage.
#[derive(Debug)]
pub struct Receipt {
    pub origin: Origin,
    pub resend: bool,
    pub reply: Option<oneshot::Sender<Finished>>,
}

/// A letter on its way to the dead-letter sink.
#[derive(Debug)]
pub struct Letter {
    pub letter: DeadLetter,
    pub document: Option<(String, Option<u64>)>,
    pub receipt: Receipt,
}

/// A finished event on its way to the ack stage.
#[derive(Debug)]
pub struct Done {
    pub finished: Finished,
    pub reply: Option<oneshot::Sender<Finished>>,
}

impl Done {
    pub fn new(
        receipt: Receipt,
        document: Option<(String, Option<u64>)>,
        outcome: Outcome,
        detail: Option<String>,
    ) -> Self {
        Self {
            finished: Finished {
                origin: receipt.origin,
                document,
                finished_ms: now_ms(),
                outcome,
                detail,
                resend: receipt.resend,
            },
            reply: receipt.reply,
        }
    }
}

/// Stops the pipeline: stages finish the event in hand and stop taking new ones.
#[derive(Debug, Clone)]
pub struct Shutdown(Arc<watch::Sender<bool>>);

impl Shutdown {
    pub fn new() -> (Self, watch::Receiver<bool>) {
        let (tx, rx) = watch::channel(false);
        (Self(Arc::new(tx)), rx)
    }
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }
}

/// Everything the stages share.
#[derive(Debug)]
pub struct Stages<S, D, A> {
    /// The processor; replaceable while events flow (a migration's swap).
    pub processor: Arc<ProcessorSlot<S>>,
    pub config: PipelineConfig,
    pub decode: DecodeConfig,
    pub dead_letters: Arc<D>,
    pub ack: Arc<A>,
    pub offsets: Offsets,
    /// Gets every finished event (progress, tests, benchmarks).
    pub observer: Option<mpsc::UnboundedSender<Finished>>,
    /// Holds bursts of deletes ([`crate::guard`]).
    pub guard: crate::guard::DeleteGuard,
}

/// Starts the stages. Returns the input channel (send messages after
/// [`Offsets::started`]) and the tasks; the pipeline ends when every sender is dropped or
/// `shutdown` fires, after the final commit.
pub fn spawn<S, D, A>(
    stages: Stages<S, D, A>,
    shutdown: watch::Receiver<bool>,
) -> (mpsc::Sender<SourceMessage>, JoinSet<()>)
where
    S: Store + 'static,
    D: DeadLetterSink,
    A: Acknowledge,
{
    let capacity = stages.config.channel_capacity;
    let (input_tx, input_rx) = mpsc::channel(capacity);
    let (letters_tx, letters_rx) = mpsc::channel(capacity);
    let (done_tx, done_rx) = mpsc::channel(capacity * 4);
    let (written_tx, written_rx) = mpsc::channel(capacity * 4);
    let metrics = stages.processor.current().metrics().clone();
    let mut tasks = JoinSet::new();

    let mut lane_senders = Vec::new();
    for _ in 0..stages.config.lanes {
        let (tx, rx) = mpsc::channel(capacity);
        lane_senders.push(tx);
        tasks.spawn(lane::run(
            rx,
            stages.processor.clone(),
            stages.config.clone(),
            stages.guard.clone(),
            letters_tx.clone(),
            written_tx.clone(),
            shutdown.clone(),
        ));
    }
    drop(written_tx);
    tasks.spawn(commit::run(
        written_rx,
        done_tx.clone(),
        stages.processor.clone(),
        stages.config.clone(),
        metrics.clone(),
        shutdown.clone(),
    ));
    tasks.spawn(route::run(
        input_rx,
        lane_senders,
        letters_tx,
        stages.decode,
        metrics.clone(),
        shutdown.clone(),
    ));
    tasks.spawn(dead_letter::run(
        letters_rx,
        stages.dead_letters,
        stages.config.clone(),
        done_tx,
        metrics.clone(),
        shutdown,
    ));
    tasks.spawn(ack::run(
        done_rx,
        stages.offsets,
        stages.ack,
        stages.config.commit_interval_ms,
        metrics,
        stages.observer,
    ));
    (input_tx, tasks)
}

/// Milliseconds since the epoch (message and finish times).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Exponential backoff for a retried step: `pipeline.retry_initial_ms`, doubling up to
/// `pipeline.retry_max_ms`.
#[derive(Debug)]
pub(crate) struct Backoff {
    delay: std::time::Duration,
    max: std::time::Duration,
}

impl Backoff {
    pub(crate) fn new(config: &PipelineConfig) -> Self {
        Self {
            delay: config.retry_initial(),
            max: config.retry_max(),
        }
    }

    /// The delay the next [`Backoff::wait`] sleeps.
    pub(crate) fn delay(&self) -> std::time::Duration {
        self.delay
    }

    /// The delay to wait now (elsewhere than in [`Backoff::wait`]), doubling the next.
    pub(crate) fn next_delay(&mut self) -> std::time::Duration {
        let delay = self.delay;
        self.delay = (delay * 2).min(self.max);
        delay
    }

    /// Sleeps the current delay (less if shutdown fires) and doubles it; true when
    /// shutting down.
    pub(crate) async fn wait(&mut self, shutdown: &mut watch::Receiver<bool>) -> bool {
        if *shutdown.borrow() {
            return true;
        }
        let delay = self.delay;
        self.delay = (delay * 2).min(self.max);
        tokio::select! {
            _ = tokio::time::sleep(delay) => false,
            _ = shutdown.changed() => true,
        }
    }
}
