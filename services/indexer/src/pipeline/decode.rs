//! Decode stage: bytes → [`Event`], or a dead letter with the rejection reason.

use std::time::Instant;

use casement_events::{DecodeConfig, Event, decode};

use crate::metrics::Metrics;
use crate::source::{DeadLetter, SourceMessage};

#[derive(Debug)]
pub enum Decoded {
    Event(Box<Event>),
    Rejected(DeadLetter),
}

pub fn run(message: &SourceMessage, config: &DecodeConfig, metrics: &Metrics) -> Decoded {
    let started = Instant::now();
    let decoded = decode(message.payload.as_deref(), message.key.as_deref(), config);
    metrics.stage("decode", started.elapsed());
    match decoded {
        Ok(event) => Decoded::Event(Box::new(event)),
        Err(rejection) => Decoded::Rejected(DeadLetter {
            message: message.clone(),
            reason: rejection.reason,
            detail: rejection.message,
        }),
    }
}
