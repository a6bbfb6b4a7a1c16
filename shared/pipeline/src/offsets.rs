//! Which offset of a stream may be committed: the first one not yet durably written (or
//! stale, or dead-lettered). Events finish out of order across documents; the commit
//! position never passes an unfinished one (invariant 3).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::source::{Origin, SourceId};

#[derive(Debug, Clone, Default)]
pub struct PartitionOffsets {
    /// Offsets received and not finished, with their message timestamps (ms).
    pending: BTreeMap<i64, Option<i64>>,
    /// One past the highest offset started so far.
    next: Option<i64>,
}

impl PartitionOffsets {
    pub fn new() -> Self {
        Self::default()
    }

    /// An event at `offset` was received (offsets arrive in increasing order), stamped
    /// `timestamp_ms` by its source.
    pub fn started(&mut self, offset: i64, timestamp_ms: Option<i64>) {
        self.pending.insert(offset, timestamp_ms);
        self.next = Some(self.next.map_or(offset + 1, |n| n.max(offset + 1)));
    }

    /// The event at `offset` is durably written or dead-lettered.
    pub fn finished(&mut self, offset: i64) {
        self.pending.remove(&offset);
    }

    /// The offset to commit (Kafka's convention: the next one to read), if any event
    /// has been received.
    pub fn committable(&self) -> Option<i64> {
        self.pending.keys().next().copied().or(self.next)
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The earliest timestamp of the events in flight.
    pub fn oldest_timestamp_ms(&self) -> Option<i64> {
        self.pending.values().flatten().min().copied()
    }
}

/// Progress of every stream, shared by the sources (started, revoke) and the pipeline
/// (finished, commit).
#[derive(Debug, Clone, Default)]
pub struct Offsets(Arc<Mutex<HashMap<SourceId, PartitionOffsets>>>);

impl Offsets {
    pub fn lock(&self) -> MutexGuard<'_, HashMap<SourceId, PartitionOffsets>> {
        // A panic while holding this lock leaves plain counters behind: keep going.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `origin`'s event was received: it is in flight until [`Offsets::finished`].
    pub fn started(&self, origin: &Origin) {
        self.lock()
            .entry(origin.source)
            .or_default()
            .started(origin.offset, origin.timestamp_ms);
    }

    /// Ignored for a stream no longer tracked (a Kafka partition revoked meanwhile).
    pub fn finished(&self, source: SourceId, offset: i64) {
        if let Some(p) = self.lock().get_mut(&source) {
            p.finished(offset);
        }
    }

    /// Committable position of every tracked stream.
    pub fn committable(&self) -> Vec<(SourceId, i64)> {
        let mut positions = Vec::new();
        self.with_committable(|committable, _| positions = committable.to_vec());
        positions
    }

    /// Calls `f` with the committable positions (sorted by stream) and what is in flight,
    /// holding the lock, so a rebalance's own commit never interleaves.
    pub fn with_committable(&self, f: impl FnOnce(&[(SourceId, i64)], InFlight)) {
        let guard = self.lock();
        let mut positions: Vec<(SourceId, i64)> = guard
            .iter()
            .filter_map(|(&s, o)| o.committable().map(|c| (s, c)))
            .collect();
        positions.sort_unstable();
        let in_flight = InFlight {
            events: guard.values().map(PartitionOffsets::in_flight).sum(),
            oldest_timestamp_ms: guard
                .values()
                .filter_map(PartitionOffsets::oldest_timestamp_ms)
                .min(),
        };
        f(&positions, in_flight);
    }
}

/// Events received and not yet finished, across streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    pub events: usize,
    /// The earliest message timestamp among them (ms since the epoch).
    pub oldest_timestamp_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_commits_past_an_unfinished_event() {
        let mut offsets = PartitionOffsets::new();
        assert_eq!(offsets.committable(), None);
        for offset in 10..15 {
            offsets.started(offset, Some(1_000 + offset));
        }
        assert_eq!(offsets.oldest_timestamp_ms(), Some(1_010));
        assert_eq!(offsets.committable(), Some(10));
        offsets.finished(12);
        offsets.finished(13);
        assert_eq!(
            offsets.committable(),
            Some(10),
            "11 and 10 are still running"
        );
        offsets.finished(10);
        assert_eq!(offsets.committable(), Some(11));
        assert_eq!(offsets.oldest_timestamp_ms(), Some(1_011));
        offsets.finished(11);
        assert_eq!(offsets.committable(), Some(14));
        offsets.finished(14);
        assert_eq!(offsets.committable(), Some(15), "all done: the next offset");
        assert_eq!(offsets.in_flight(), 0);
        assert_eq!(offsets.oldest_timestamp_ms(), None);
    }

    #[test]
    fn random_completion_orders_commit_exactly_the_finished_prefix() {
        // A fixed pseudo-random permutation of 200 offsets, finished in that order.
        let mut order: Vec<i64> = (0..200).collect();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for i in (1..order.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            order.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let mut offsets = PartitionOffsets::new();
        (0..200).for_each(|o| offsets.started(o, None));
        let mut done = [false; 200];
        for offset in order {
            offsets.finished(offset);
            done[offset as usize] = true;
            let prefix = done.iter().take_while(|d| **d).count() as i64;
            assert_eq!(offsets.committable(), Some(prefix));
        }
    }
}
