//! Local event sources: a revision-log replay, watched folders and the webhook. They feed
//! the indexer's own pipeline (`casement_indexer::pipeline`) through its source interface
//! (`casement_indexer::source`): each source is one partition, its messages numbered in
//! order, and the pipeline's commits (only past durably written or dead-lettered events)
//! move the replay position kept in `<data_dir>/sources.json`.

pub mod dead_letters;
pub mod replay;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use casement_indexer::pipeline::now_ms;
use casement_indexer::source::{Acknowledge, Offsets, SourceMessage};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc};

use crate::metrics::LocalMetrics;

/// Partition numbers of the local sources.
pub const REPLAY: i32 = 0;
pub const WATCH: i32 = 1;
pub const WEBHOOK: i32 = 2;
pub const NAMES: [&str; 3] = ["replay", "watch", "webhook"];

pub fn name(partition: i32) -> &'static str {
    usize::try_from(partition)
        .ok()
        .and_then(|p| NAMES.get(p))
        .copied()
        .unwrap_or("unknown")
}

/// Hands messages to the pipeline: per source, offsets in increasing order, each marked
/// started before it is sent. Waits while the pipeline is full.
#[derive(Debug, Clone)]
pub struct Feeder {
    input: mpsc::Sender<SourceMessage>,
    offsets: Offsets,
    next: Arc<[Mutex<i64>; 3]>,
    metrics: LocalMetrics,
}

impl Feeder {
    /// `replay_start`: the replay's first offset (its committed position).
    pub fn new(
        input: mpsc::Sender<SourceMessage>,
        offsets: Offsets,
        replay_start: i64,
        metrics: LocalMetrics,
    ) -> Self {
        Self {
            input,
            offsets,
            next: Arc::new([Mutex::new(replay_start), Mutex::new(0), Mutex::new(0)]),
            metrics,
        }
    }

    /// Sends one event; returns its offset.
    pub async fn send(
        &self,
        partition: i32,
        key: Option<Vec<u8>>,
        payload: Option<Vec<u8>>,
    ) -> anyhow::Result<i64> {
        self.send_with(partition, key, payload, |_| {}).await
    }

    /// Sends one event, calling `before` with its offset before the pipeline can see it
    /// (the webhook registers for the outcome there).
    pub async fn send_with(
        &self,
        partition: i32,
        key: Option<Vec<u8>>,
        payload: Option<Vec<u8>>,
        before: impl FnOnce(i64),
    ) -> anyhow::Result<i64> {
        let slot = usize::try_from(partition)
            .ok()
            .and_then(|p| self.next.get(p))
            .ok_or_else(|| anyhow::anyhow!("no local source {partition}"))?;
        let mut next = slot.lock().await;
        let offset = *next;
        before(offset);
        self.offsets.started(partition, offset);
        let message = SourceMessage {
            topic: name(partition).to_owned(),
            partition,
            offset,
            key,
            payload,
            timestamp_ms: Some(now_ms()),
        };
        self.input
            .send(message)
            .await
            .map_err(|_| anyhow::anyhow!("the pipeline has stopped"))?;
        *next += 1;
        self.metrics
            .source_events
            .with_label_values(&[name(partition)])
            .inc();
        Ok(offset)
    }
}

/// A source's state file, or the default when it is missing or unreadable (every source
/// can start over safely: revisions are fenced).
pub fn read_state<T: serde::de::DeserializeOwned + Default>(path: &Path) -> T {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Writes a source's state file whole or not at all (a temporary file, then a rename).
pub fn write_state<T: Serialize>(path: &Path, state: &T) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)?;
    std::fs::rename(tmp, path)
}

/// What `sources.json` keeps: how far the replay got, for which inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Positions {
    /// Identifies the replayed inputs (paths and sizes); another input starts over.
    pub replay_inputs: String,
    /// Events of the replay durably handled (the next one to send).
    pub replay_next: i64,
}

impl Positions {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("sources.json")
    }

    /// The saved positions, or none (a missing or unreadable file starts over: replaying
    /// again is safe, since revisions are fenced).
    pub fn load(data_dir: &Path) -> Self {
        read_state(&Self::path(data_dir))
    }

    pub fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        write_state(&Self::path(data_dir), self)
    }
}

/// The pipeline's commits: the replay position goes to `sources.json`. The watch and
/// webhook sources need none (the watcher keeps its own state; a webhook caller gets its
/// answer only once the event is durable).
#[derive(Debug)]
pub struct LocalAck {
    data_dir: PathBuf,
    positions: std::sync::Mutex<Positions>,
}

impl LocalAck {
    pub fn new(data_dir: &Path, positions: Positions) -> Self {
        Self {
            data_dir: data_dir.to_owned(),
            positions: std::sync::Mutex::new(positions),
        }
    }
}

impl Acknowledge for LocalAck {
    fn commit(&self, positions: &[(i32, i64)]) {
        let Some(&(_, next)) = positions.iter().find(|(p, _)| *p == REPLAY) else {
            return;
        };
        let mut saved = self
            .positions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if next <= saved.replay_next {
            return;
        }
        saved.replay_next = next;
        if let Err(error) = saved.save(&self.data_dir) {
            tracing::warn!(%error, "cannot save the replay position (it will be replayed again, safely)");
        }
    }
}
