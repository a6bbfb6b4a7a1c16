//! `casement-indexer replay FILE`: publishes a revision log (the shape of
//! `../shared/data/revisions`: create, update, rename, delete) to the topic as native
//! events, key = `doc_id`, in publish order, waiting for every acknowledgement.

use std::path::Path;
use std::time::{Duration, Instant};

use casement_events::revision_log;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;

use crate::config::KafkaConfig;
use crate::kafka::producer::HEADER_BULK;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplaySummary {
    pub published: usize,
    pub skipped_lines: usize,
}

/// Publishes `input` to `config.topic`; `pace` waits between events (to watch live sync).
pub async fn run(
    config: &KafkaConfig,
    input: &Path,
    pace: Option<Duration>,
    progress: bool,
) -> anyhow::Result<ReplaySummary> {
    let (events, rejected) = revision_log::read(input)
        .map_err(|e| anyhow::anyhow!("cannot read revision log {}: {e}", input.display()))?;
    for line in &rejected {
        eprintln!("skipping line {}: {}", line.line, line.reason);
    }
    let producer = crate::kafka::producer::producer(config)?;
    let started = Instant::now();
    let mut pending = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let payload = serde_json::to_vec(&event.to_native())?;
        let mut record = FutureRecord::to(&config.topic)
            .key(event.doc_id.as_bytes())
            .payload(&payload);
        // A paced replay stands for live edits; an unpaced one is a bulk load.
        if pace.is_none() {
            record = record.headers(OwnedHeaders::new().insert(Header {
                key: HEADER_BULK,
                value: Some("true"),
            }));
        }
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| anyhow::anyhow!("producing to {}: {e}", config.topic))?;
        pending.push(delivery);
        if let Some(pace) = pace {
            tokio::time::sleep(pace).await;
        }
        if pending.len() >= 256 || pace.is_some() {
            for delivery in pending.drain(..) {
                delivery
                    .await
                    .map_err(|_| anyhow::anyhow!("producer closed"))?
                    .map_err(|(e, _)| anyhow::anyhow!("delivery to {}: {e}", config.topic))?;
            }
        }
        if progress && (i + 1) % 500 == 0 {
            eprintln!("published {}/{} events", i + 1, events.len());
        }
    }
    for delivery in pending {
        delivery
            .await
            .map_err(|_| anyhow::anyhow!("producer closed"))?
            .map_err(|(e, _)| anyhow::anyhow!("delivery to {}: {e}", config.topic))?;
    }
    if progress {
        eprintln!(
            "published {} events to {} in {:.1} s",
            events.len(),
            config.topic,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ReplaySummary {
        published: events.len(),
        skipped_lines: rejected.len(),
    })
}
