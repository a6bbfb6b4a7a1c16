//! The small interface between an event source and the pipeline. Kafka implements it
//! (`crate::kafka`); the all-in-one binary adds local sources (files, a webhook).
//!
//! A source sends [`SourceMessage`]s into the pipeline's bounded input channel, in order
//! per partition, after calling [`Offsets::started`]. The pipeline calls
//! [`Acknowledge::commit`] with positions whose every earlier message is durably written or
//! dead-lettered, and hands undecodable or unprocessable messages to a [`DeadLetterSink`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::offsets::PartitionOffsets;

/// One message as the source delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMessage {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    /// When the message entered the stream (Kafka's message timestamp), ms since the epoch.
    pub timestamp_ms: Option<i64>,
}

/// Commits positions back to the source.
pub trait Acknowledge: Send + Sync + 'static {
    /// `positions`: (partition, next offset to read). Must not block for long.
    fn commit(&self, positions: &[(i32, i64)]);
}

/// Where messages that can never succeed go, with why.
pub trait DeadLetterSink: Send + Sync + 'static {
    /// Durably stores the letter (or fails, and the pipeline retries).
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// A message that cannot be indexed: the original key and bytes, the reason (a fixed label)
/// and a human-readable message.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub message: SourceMessage,
    pub reason: &'static str,
    pub detail: String,
}

/// Per-partition progress, shared by the source (started, revoke) and the pipeline
/// (finished, commit).
#[derive(Debug, Clone, Default)]
pub struct Offsets(Arc<Mutex<HashMap<i32, PartitionOffsets>>>);

impl Offsets {
    pub fn lock(&self) -> MutexGuard<'_, HashMap<i32, PartitionOffsets>> {
        // A panic while holding this lock leaves plain counters behind: keep going.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn started(&self, partition: i32, offset: i64) {
        self.lock().entry(partition).or_default().started(offset);
    }

    /// Ignored for a partition no longer tracked (revoked meanwhile).
    pub fn finished(&self, partition: i32, offset: i64) {
        if let Some(p) = self.lock().get_mut(&partition) {
            p.finished(offset);
        }
    }

    /// Committable position of every tracked partition.
    pub fn committable(&self) -> Vec<(i32, i64)> {
        let mut positions = Vec::new();
        self.with_committable(|committable, _| positions = committable.to_vec());
        positions
    }

    /// Calls `f` with the committable positions (sorted by partition) and the number of
    /// events in flight, holding the lock, so a rebalance's own commit never interleaves.
    pub fn with_committable(&self, f: impl FnOnce(&[(i32, i64)], usize)) {
        let guard = self.lock();
        let mut positions: Vec<(i32, i64)> = guard
            .iter()
            .filter_map(|(&p, o)| o.committable().map(|c| (p, c)))
            .collect();
        positions.sort_unstable();
        let in_flight = guard.values().map(PartitionOffsets::in_flight).sum();
        f(&positions, in_flight);
    }
}
