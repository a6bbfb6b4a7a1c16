//! Routing decoded events to lanes (by document), and the lanes themselves.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use casement_events::{DecodeConfig, Event};
use casement_store::Store;
use tokio::sync::{mpsc, watch};

use super::decode::{self, Decoded};
use super::{Finish, Finished, backoff, now_ms};
use crate::config::PipelineConfig;
use crate::metrics::Metrics;
use crate::process::{Outcome, Processor};
use crate::source::{DeadLetter, SourceMessage};

#[derive(Debug)]
pub struct LaneItem {
    message: SourceMessage,
    event: Box<Event>,
}

/// Decodes each message and sends it to its document's lane (or to the dead letters).
pub async fn route(
    mut input: mpsc::Receiver<SourceMessage>,
    lanes: Vec<mpsc::Sender<LaneItem>>,
    letters: mpsc::Sender<DeadLetter>,
    config: DecodeConfig,
    metrics: Metrics,
    shutdown: watch::Receiver<bool>,
) {
    while let Some(message) = input.recv().await {
        if *shutdown.borrow() {
            break;
        }
        let sent = match decode::run(&message, &config, &metrics) {
            Decoded::Event(event) => {
                let mut hasher = DefaultHasher::new();
                event.doc_id().hash(&mut hasher);
                let lane = (hasher.finish() % lanes.len() as u64) as usize;
                lanes[lane].send(LaneItem { message, event }).await.is_ok()
            }
            Decoded::Rejected(letter) => letters.send(letter).await.is_ok(),
        };
        if !sent {
            break;
        }
    }
}

/// Processes a lane's events one by one. A transient failure (store, model) retries with
/// exponential backoff and holds the lane; a permanent one dead-letters the event.
pub async fn run<S: Store>(
    mut items: mpsc::Receiver<LaneItem>,
    processor: Arc<Processor<S>>,
    config: PipelineConfig,
    letters: mpsc::Sender<DeadLetter>,
    done: mpsc::Sender<Finished>,
    mut shutdown: watch::Receiver<bool>,
) {
    while let Some(LaneItem { message, event }) = items.recv().await {
        if *shutdown.borrow() {
            return;
        }
        let mut delay = config.retry_initial();
        let finish = loop {
            match processor.process(&event).await {
                Ok(Outcome::Applied(d)) => break Finish::Applied(d),
                Ok(Outcome::Deleted(d)) => break Finish::Deleted(d),
                Ok(Outcome::Stale { .. }) => break Finish::Stale,
                Err(error) if error.is_transient() => {
                    processor
                        .metrics()
                        .retries
                        .with_label_values(&[error.reason()])
                        .inc();
                    tracing::warn!(doc_id = event.doc_id(), partition = message.partition,
                        offset = message.offset, %error, retry_in_ms = delay.as_millis() as u64,
                        "transient failure; retrying");
                    if backoff(delay, &mut shutdown).await {
                        return; // Not finished: not committed, delivered again after restart.
                    }
                    delay = (delay * 2).min(config.retry_max());
                }
                Err(error) => {
                    tracing::warn!(doc_id = event.doc_id(), %error, "cannot index; dead-lettering");
                    let letter = DeadLetter {
                        message: message.clone(),
                        reason: error.reason(),
                        detail: error.to_string(),
                    };
                    if letters.send(letter).await.is_err() {
                        return;
                    }
                    break Finish::DeadLettered(error.reason());
                }
            }
        };
        if let Finish::DeadLettered(_) = finish {
            continue; // The dead-letter stage reports it when the letter is stored.
        }
        let revision = match &event.change {
            casement_events::Change::Upsert(revision) => Some(revision.revision),
            casement_events::Change::Delete { revision, .. } => *revision,
        };
        let finished = Finished {
            document: Some((event.doc_id().to_owned(), revision)),
            partition: message.partition,
            offset: message.offset,
            timestamp_ms: message.timestamp_ms,
            finished_ms: now_ms(),
            finish,
            detail: None,
        };
        if done.send(finished).await.is_err() {
            return;
        }
    }
}
