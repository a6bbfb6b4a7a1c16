//! Dead-letter stage: stores each letter in the sink, retrying until it is accepted, so a
//! bad event is never lost and never blocks the commit forever.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::{Finish, Finished, backoff, now_ms};
use crate::config::PipelineConfig;
use crate::metrics::Metrics;
use crate::source::{DeadLetter, DeadLetterSink};

pub async fn run<D: DeadLetterSink>(
    mut letters: mpsc::Receiver<DeadLetter>,
    sink: Arc<D>,
    config: PipelineConfig,
    done: mpsc::Sender<Finished>,
    metrics: Metrics,
    mut shutdown: watch::Receiver<bool>,
) {
    while let Some(letter) = letters.recv().await {
        let mut delay = config.retry_initial();
        while let Err(error) = sink.send(&letter).await {
            metrics.retries.with_label_values(&["dead_letter"]).inc();
            tracing::warn!(%error, partition = letter.message.partition,
                offset = letter.message.offset, "dead-letter write failed; retrying");
            if backoff(delay, &mut shutdown).await {
                return;
            }
            delay = (delay * 2).min(config.retry_max());
        }
        metrics
            .dead_letters
            .with_label_values(&[letter.reason])
            .inc();
        tracing::info!(reason = letter.reason, detail = %letter.detail,
            partition = letter.message.partition, offset = letter.message.offset, "dead-lettered");
        let finished = Finished {
            document: None,
            partition: letter.message.partition,
            offset: letter.message.offset,
            timestamp_ms: letter.message.timestamp_ms,
            finished_ms: now_ms(),
            finish: Finish::DeadLettered(letter.reason),
            detail: Some(letter.detail.clone()),
        };
        if done.send(finished).await.is_err() {
            return;
        }
    }
}
