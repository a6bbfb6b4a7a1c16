//! The pipeline between a source and the index, one stage per module, bounded channels
//! between them:
//!
//! ```text
//! source ─▶ decode ─┬─▶ lane 0..N: fence → read → segment → enrich → plan → embed → write ─┬─▶ ack
//!                   └─▶ dead letters ◀── (events that can never succeed) ───────────────────┘
//! ```
//!
//! - [`decode`]: bytes to events; rejections go to the dead-letter stage.
//! - [`lanes`]: a document always maps to the same lane, so its events run in order;
//!   lanes run concurrently. Each runs [`crate::process::Processor`]; store and model
//!   failures retry with backoff, holding the lane (a full pipeline pauses the source).
//! - [`dead_letter`]: hands letters to the sink, retrying until it accepts them.
//! - [`ack`]: marks offsets finished and commits, per partition, only the prefix of
//!   offsets that are all finished (invariant 3). Counts outcomes and freshness.
//!
//! Shutdown: the source drops its sender (or [`Shutdown::trigger`] is called); each stage
//! finishes the event in hand, and the ack stage commits what finished.

pub mod ack;
pub mod dead_letter;
pub mod decode;
pub mod lanes;

use std::sync::Arc;

use casement_events::DecodeConfig;
use casement_store::Store;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::config::PipelineConfig;
use crate::process::{Decisions, Processor};
use crate::source::{Acknowledge, DeadLetterSink, Offsets, SourceMessage};

/// How one message finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Applied(Decisions),
    Deleted(Decisions),
    Stale,
    DeadLettered(&'static str),
}

impl Finish {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Applied(_) => "applied",
            Self::Deleted(_) => "deleted",
            Self::Stale => "stale",
            Self::DeadLettered(_) => "dead_lettered",
        }
    }
}

/// A finished message, as reported to an optional observer (tests, benchmarks).
#[derive(Debug, Clone)]
pub struct Finished {
    /// The event's document and revision (none for a dead letter).
    pub document: Option<(String, Option<u64>)>,
    pub partition: i32,
    pub offset: i64,
    /// The message timestamp, if the source gave one (ms since the epoch).
    pub timestamp_ms: Option<i64>,
    /// When the write (or dead letter) was durable, ms since the epoch.
    pub finished_ms: i64,
    pub finish: Finish,
    /// Why it was dead-lettered, in words (dead letters only).
    pub detail: Option<String>,
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
    pub processor: Arc<Processor<S>>,
    pub config: PipelineConfig,
    pub decode: DecodeConfig,
    pub dead_letters: Arc<D>,
    pub ack: Arc<A>,
    pub offsets: Offsets,
    pub observer: Option<mpsc::UnboundedSender<Finished>>,
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
    let metrics = stages.processor.metrics().clone();
    let mut tasks = JoinSet::new();

    let mut lane_senders = Vec::new();
    for _ in 0..stages.config.lanes {
        let (tx, rx) = mpsc::channel(capacity);
        lane_senders.push(tx);
        tasks.spawn(lanes::run(
            rx,
            stages.processor.clone(),
            stages.config.clone(),
            letters_tx.clone(),
            done_tx.clone(),
            shutdown.clone(),
        ));
    }
    tasks.spawn(lanes::route(
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

/// Milliseconds since the epoch (event and finish times).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Sleeps `delay`, or less if shutdown fires; true when shutting down.
pub(crate) async fn backoff(
    delay: std::time::Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    if *shutdown.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = shutdown.changed() => true,
    }
}
