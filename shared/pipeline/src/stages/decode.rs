//! Decode stage: a message's bytes into an [`Event`] (`casement_events::decode`), or a
//! rejection with its reason. An event a local source built is not decoded again, but the
//! same size limit applies to it.

use std::time::Instant;

use casement_events::{Change, DecodeConfig, Event, decode};

use crate::metrics::Metrics;
use crate::outcome::{Reason, Stage};
use crate::source::Body;

/// Why a message is not an event: the dead letter's reason and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub reason: Reason,
    pub detail: String,
}

pub fn run(
    body: Body,
    key: Option<&[u8]>,
    config: &DecodeConfig,
    metrics: &Metrics,
) -> Result<Box<Event>, Rejected> {
    let started = Instant::now();
    let decoded = match body {
        Body::Bytes(bytes) => {
            decode(bytes.as_deref(), key, config)
                .map(Box::new)
                .map_err(|rejection| Rejected {
                    reason: Reason::of_rejection(rejection.reason),
                    detail: rejection.message,
                })
        }
        Body::Event(event) => within_limit(event, config),
    };
    metrics.stage(Stage::Decode, started.elapsed());
    decoded
}

fn within_limit(event: Box<Event>, config: &DecodeConfig) -> Result<Box<Event>, Rejected> {
    match &event.change {
        Change::Upsert(revision) if revision.content.len() > config.max_event_bytes => {
            Err(Rejected {
                reason: Reason::TooLarge,
                detail: format!(
                    "{} bytes of content, over max_event_bytes = {}",
                    revision.content.len(),
                    config.max_event_bytes
                ),
            })
        }
        _ => Ok(event),
    }
}
