//! Acknowledge stage: finished offsets → commits of the finished prefix per partition;
//! outcome counts and freshness.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Finish, Finished};
use crate::metrics::Metrics;
use crate::source::{Acknowledge, Offsets};

pub async fn run<A: Acknowledge>(
    mut done: mpsc::Receiver<Finished>,
    offsets: Offsets,
    ack: Arc<A>,
    commit_interval_ms: u64,
    metrics: Metrics,
    observer: Option<mpsc::UnboundedSender<Finished>>,
) {
    let mut committed: HashMap<i32, i64> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(commit_interval_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Every few seconds all positions are committed again, moved or not: a commit that
    // failed (broker down) is not retried otherwise once the stream is idle.
    let refresh_every = (5_000 / commit_interval_ms.max(1)).max(1);
    let mut ticks = 0u64;
    loop {
        tokio::select! {
            finished = done.recv() => {
                let Some(finished) = finished else { break };
                offsets.finished(finished.partition, finished.offset);
                record(&metrics, &finished);
                if let Some(observer) = &observer {
                    let _ = observer.send(finished);
                }
            }
            _ = tick.tick() => {
                ticks += 1;
                if ticks.is_multiple_of(refresh_every) {
                    committed.clear();
                }
                commit(&offsets, ack.as_ref(), &mut committed, &metrics);
            }
        }
    }
    commit(&offsets, ack.as_ref(), &mut committed, &metrics);
}

fn record(metrics: &Metrics, finished: &Finished) {
    metrics
        .events
        .with_label_values(&[finished.finish.label()])
        .inc();
    if let (Finish::Applied(_) | Finish::Deleted(_), Some(ts)) =
        (&finished.finish, finished.timestamp_ms)
    {
        let seconds = (finished.finished_ms - ts).max(0) as f64 / 1000.0;
        metrics.freshness.observe(seconds);
    }
}

/// Commits positions that moved since the last commit, under the offsets lock (see
/// [`Offsets::with_committable`]); the commit call itself does not block.
fn commit<A: Acknowledge>(
    offsets: &Offsets,
    ack: &A,
    committed: &mut HashMap<i32, i64>,
    metrics: &Metrics,
) {
    offsets.with_committable(|positions, in_flight| {
        let moved: Vec<(i32, i64)> = positions
            .iter()
            .copied()
            .filter(|(p, c)| committed.get(p) != Some(c))
            .collect();
        if !moved.is_empty() {
            ack.commit(&moved);
            committed.extend(moved);
        }
        metrics.in_flight.set(in_flight as i64);
    });
}
