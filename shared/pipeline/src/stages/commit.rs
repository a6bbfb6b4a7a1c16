//! Commit stage (group commit): the writes of many events are made durable by one
//! [`Store::sync`] before any of them is acknowledged. Events that finished while the
//! previous flush ran form the next group (at most `pipeline.group_commit_events`), so a
//! lone edit is flushed at once and a backlog pays one flush per group, not one per event.
//! Invariant 3 holds: the ack stage sees an applied or deleted event only after the flush
//! that covers its write.

use std::sync::Arc;
use std::time::Instant;

use casement_store::Store;
use tokio::sync::{mpsc, watch};

use crate::config::PipelineConfig;
use crate::metrics::Metrics;
use crate::outcome::{Outcome, RetryStage};
use crate::slot::ProcessorSlot;
use crate::spawn::{Backoff, Done, now_ms};

pub async fn run<S: Store>(
    mut written: mpsc::Receiver<Done>,
    acknowledge: mpsc::Sender<Done>,
    processor: Arc<ProcessorSlot<S>>,
    config: PipelineConfig,
    metrics: Metrics,
    mut shutdown: watch::Receiver<bool>,
) {
    let max = config.group_commit_events.max(1);
    while let Some(first) = written.recv().await {
        let mut group = vec![first];
        while group.len() < max {
            match written.try_recv() {
                Ok(done) => group.push(done),
                Err(_) => break,
            }
        }
        let wrote = group
            .iter()
            .filter(|d| {
                matches!(
                    d.finished.outcome,
                    Outcome::Applied(_) | Outcome::Deleted(_)
                )
            })
            .count();
        if wrote > 0 {
            let mut backoff = Backoff::new(&config);
            loop {
                let started = Instant::now();
                match processor.current().store.sync().await {
                    Ok(()) => {
                        metrics
                            .flush_duration
                            .observe(started.elapsed().as_secs_f64());
                        metrics.commit_group.observe(wrote as f64);
                        break;
                    }
                    Err(error) => {
                        metrics.retry(RetryStage::Write);
                        tracing::warn!(%error, events = group.len(),
                            retry_in_ms = backoff.delay().as_millis() as u64,
                            "flushing the store failed; retrying (the group is not acknowledged)");
                        if backoff.wait(&mut shutdown).await {
                            return; // Not acknowledged: delivered again after restart.
                        }
                    }
                }
            }
            // Durable now: freshness is measured to this point.
            let durable_ms = now_ms();
            for done in &mut group {
                done.finished.finished_ms = durable_ms;
            }
        }
        for done in group {
            if acknowledge.send(done).await.is_err() {
                return;
            }
        }
    }
}
