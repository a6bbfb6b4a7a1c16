//! Acknowledge stage: each finished event is recorded ([`Finished::emit`]: counted and
//! logged), handed to whoever waits for it (a webhook request, an observer), and marked
//! finished; positions are committed, per stream, only up to the first unfinished event
//! (invariant 3).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::metrics::Metrics;
use crate::offsets::{InFlight, Offsets};
use crate::outcome::{Finished, Outcome};
use crate::source::{Acknowledge, SourceId};
use crate::spawn::{Done, now_ms};

pub async fn run<A: Acknowledge>(
    mut done: mpsc::Receiver<Done>,
    offsets: Offsets,
    ack: Arc<A>,
    commit_interval_ms: u64,
    metrics: Metrics,
    observer: Option<mpsc::UnboundedSender<Finished>>,
) {
    let mut committed: HashMap<SourceId, i64> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(commit_interval_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Every few seconds all positions are committed again, moved or not: a commit that
    // failed (broker down) is not retried otherwise once the stream is idle.
    let refresh_every = (5_000 / commit_interval_ms.max(1)).max(1);
    let mut ticks = 0u64;
    // Since start, before the first event is applied.
    let mut last_applied_ms = now_ms();
    loop {
        tokio::select! {
            next = done.recv() => {
                let Some(Done { finished, reply }) = next else { break };
                offsets.finished(finished.origin.source, finished.origin.offset);
                if matches!(finished.outcome, Outcome::Applied(_) | Outcome::Deleted(_)) {
                    last_applied_ms = finished.finished_ms;
                }
                finished.emit(&metrics);
                if let Some(observer) = &observer {
                    let _ = observer.send(finished.clone());
                }
                if let Some(reply) = reply {
                    let _ = reply.send(finished);
                }
            }
            _ = tick.tick() => {
                ticks += 1;
                if ticks.is_multiple_of(refresh_every) {
                    committed.clear();
                }
                commit(&offsets, ack.as_ref(), &mut committed, &metrics, last_applied_ms);
            }
        }
    }
    commit(
        &offsets,
        ack.as_ref(),
        &mut committed,
        &metrics,
        last_applied_ms,
    );
}

/// Commits positions that moved since the last commit, under the offsets lock (see
/// [`Offsets::with_committable`]); the commit call itself does not block. Sets the gauges
/// of what is in flight and of staleness (every commit tick).
fn commit<A: Acknowledge>(
    offsets: &Offsets,
    ack: &A,
    committed: &mut HashMap<SourceId, i64>,
    metrics: &Metrics,
    last_applied_ms: i64,
) {
    offsets.with_committable(|positions, in_flight| {
        let moved: Vec<(SourceId, i64)> = positions
            .iter()
            .copied()
            .filter(|(s, c)| committed.get(s) != Some(c))
            .collect();
        if !moved.is_empty() {
            ack.commit(&moved);
            committed.extend(moved);
        }
        let InFlight {
            events,
            oldest_timestamp_ms,
        } = in_flight;
        let now = now_ms();
        let age = |since_ms: i64| (now - since_ms).max(0) as f64 / 1000.0;
        metrics.in_flight.set(events as i64);
        metrics
            .oldest_unapplied_age
            .set(oldest_timestamp_ms.map_or(0.0, age));
        metrics.last_applied_age.set(age(last_applied_ms));
    });
}
