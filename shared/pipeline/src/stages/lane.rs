//! A lane: processes its documents' events one by one through the
//! [`Processor`](crate::Processor). A transient failure (store, model) retries with
//! exponential backoff and holds the lane (a full pipeline then pauses the source); a
//! permanent one dead-letters the event. On shutdown the event in hand gets
//! `pipeline.shutdown_grace_ms` to finish; past that it is dropped unfinished (a write cut
//! off heals when it is planned again), not committed, and delivered again after restart.

use std::sync::Arc;

use casement_store::Store;
use tokio::sync::{mpsc, watch};

use super::route::LaneItem;
use crate::config::PipelineConfig;
use crate::slot::ProcessorSlot;
use crate::source::DeadLetter;
use crate::spawn::{Backoff, Done, Letter};

pub async fn run<S: Store>(
    mut items: mpsc::Receiver<LaneItem>,
    processor: Arc<ProcessorSlot<S>>,
    config: PipelineConfig,
    letters: mpsc::Sender<Letter>,
    done: mpsc::Sender<Done>,
    mut shutdown: watch::Receiver<bool>,
) {
    while let Some(item) = items.recv().await {
        if *shutdown.borrow() {
            return;
        }
        let event = &item.event;
        let origin = item.receipt.origin;
        let document = Some((event.doc_id().to_owned(), event.revision()));
        let mut backoff = Backoff::new(&config);
        let processed = loop {
            let attempt = tokio::select! {
                processed = async {
                    let (_processing, current) = processor.processing().await;
                    current.process(event).await
                } => processed,
                () = grace_over(shutdown.clone(), config.shutdown_grace()) => {
                    tracing::warn!(doc_id = event.doc_id(), source = %origin.source,
                        offset = origin.offset, grace_ms = config.shutdown_grace_ms,
                        "shutdown grace period over; the event in hand is left for the next start");
                    return;
                }
            };
            match attempt {
                Ok(outcome) => break Ok(outcome),
                Err(error) if error.is_transient() => {
                    processor.current().metrics().retry(error.retry_stage());
                    tracing::warn!(doc_id = event.doc_id(), source = %origin.source,
                        offset = origin.offset, %error, retry_in_ms = backoff.delay().as_millis() as u64,
                        "transient failure; retrying");
                    if backoff.wait(&mut shutdown).await {
                        return; // Not finished: not committed, delivered again after restart.
                    }
                }
                Err(error) => break Err(error),
            }
        };
        let sent = match processed {
            Ok(outcome) => {
                let finished = Done::new(item.receipt, document, outcome, None);
                done.send(finished).await.is_ok()
            }
            Err(error) => {
                // The dead-letter stage reports it when the letter is stored.
                let payload = item.original.payload(event);
                let letter = DeadLetter {
                    origin,
                    key: item.key,
                    payload,
                    reason: error.reason(),
                    detail: error.to_string(),
                };
                let letter = Letter {
                    letter,
                    document,
                    receipt: item.receipt,
                };
                letters.send(letter).await.is_ok()
            }
        };
        if !sent {
            return;
        }
    }
}

/// Resolves `grace` after shutdown fires (never, if it does not).
async fn grace_over(mut shutdown: watch::Receiver<bool>, grace: std::time::Duration) {
    if shutdown.wait_for(|&stop| stop).await.is_err() {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(grace).await;
}
