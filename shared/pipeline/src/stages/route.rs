//! Route stage: decodes each message and sends it to its document's lane (a document always
//! maps to the same lane, so its events run in order), or rejects it to the dead letters.

use std::hash::{DefaultHasher, Hash, Hasher};

use casement_events::{DecodeConfig, Event};
use tokio::sync::{mpsc, watch};

use super::decode::{self, Decoded, Original};
use crate::metrics::Metrics;
use crate::source::{DeadLetter, SourceMessage};
use crate::spawn::{Letter, Receipt};

/// A decoded event on its way through a lane.
#[derive(Debug)]
pub struct LaneItem {
    pub event: Box<Event>,
    pub key: Option<Vec<u8>>,
    /// What its dead letter would keep.
    pub original: Original,
    pub receipt: Receipt,
}

pub async fn run(
    mut input: mpsc::Receiver<SourceMessage>,
    lanes: Vec<mpsc::Sender<LaneItem>>,
    letters: mpsc::Sender<Letter>,
    config: DecodeConfig,
    metrics: Metrics,
    shutdown: watch::Receiver<bool>,
) {
    while let Some(message) = input.recv().await {
        if *shutdown.borrow() {
            break;
        }
        let receipt = Receipt {
            origin: message.origin,
            resend: message.resend,
            reply: message.reply,
        };
        let key = message.key;
        let sent = match decode::run(message.body, key.as_deref(), &config, &metrics) {
            Ok(Decoded { event, original }) => {
                let lane = lane_of(event.doc_id(), lanes.len());
                let item = LaneItem {
                    event,
                    key,
                    original,
                    receipt,
                };
                lanes[lane].send(item).await.is_ok()
            }
            Err(rejected) => {
                let letter = DeadLetter {
                    origin: receipt.origin,
                    key,
                    payload: rejected.payload,
                    reason: rejected.reason,
                    detail: rejected.detail,
                };
                letters
                    .send(Letter {
                        letter,
                        document: None,
                        receipt,
                    })
                    .await
                    .is_ok()
            }
        };
        if !sent {
            break;
        }
    }
}

/// The lane of a document among `lanes`: always the same for the same id.
pub fn lane_of(doc_id: &str, lanes: usize) -> usize {
    let mut hasher = DefaultHasher::new();
    doc_id.hash(&mut hasher);
    (hasher.finish() % lanes as u64) as usize
}
