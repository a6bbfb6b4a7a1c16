//! Dead-letter stage: stores each letter in the sink, retrying until it is accepted, so a
//! bad event is never lost (invariant 5) and never blocks the commit forever.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::config::PipelineConfig;
use crate::metrics::Metrics;
use crate::outcome::{Outcome, RetryStage};
use crate::source::DeadLetterSink;
use crate::spawn::{Backoff, Done, Letter};

pub async fn run<D: DeadLetterSink>(
    mut letters: mpsc::Receiver<Letter>,
    sink: Arc<D>,
    config: PipelineConfig,
    done: mpsc::Sender<Done>,
    metrics: Metrics,
    mut shutdown: watch::Receiver<bool>,
) {
    while let Some(Letter {
        letter,
        document,
        receipt,
    }) = letters.recv().await
    {
        let mut backoff = Backoff::new(&config);
        while let Err(error) = sink.send(&letter).await {
            metrics.retry(RetryStage::DeadLetter);
            tracing::warn!(%error, source = %letter.origin.source, offset = letter.origin.offset,
                "dead-letter write failed; retrying");
            if backoff.wait(&mut shutdown).await {
                return;
            }
        }
        let outcome = Outcome::DeadLettered(letter.reason);
        let finished = Done::new(receipt, document, outcome, Some(letter.detail));
        if done.send(finished).await.is_err() {
            return;
        }
    }
}
