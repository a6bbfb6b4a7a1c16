//! Producing: the dead-letter topic, and publishing native events (the `replay` command).

use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use casement_pipeline::{DeadLetter, DeadLetterSink, SourceId};

use crate::config::KafkaConfig;

/// Header names on a dead letter (values are UTF-8 strings).
pub const HEADER_REASON: &str = "casement.dlq.reason";
pub const HEADER_MESSAGE: &str = "casement.dlq.message";
pub const HEADER_TOPIC: &str = "casement.dlq.source.topic";
/// On a change event: part of a bulk load (any value), not a live edit; its freshness is
/// counted apart (`casement_indexer_freshness_seconds{origin="bulk"}`). `replay` sets it.
pub const HEADER_BULK: &str = "casement.bulk";
pub const HEADER_PARTITION: &str = "casement.dlq.source.partition";
pub const HEADER_OFFSET: &str = "casement.dlq.source.offset";

/// An idempotent producer (acks from all replicas, ordered retries), lz4-compressed:
/// documents are large and compress well.
pub fn producer(config: &KafkaConfig) -> anyhow::Result<FutureProducer> {
    super::client_config(
        config,
        &[
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "5"),
            ("compression.type", "lz4"),
        ],
    )
    .create()
    .map_err(|e| anyhow::anyhow!("creating the Kafka producer: {e}"))
}

#[derive(Clone)]
pub struct KafkaDeadLetters {
    producer: FutureProducer,
    topic: String,
    /// The topic the letters' messages were consumed from.
    source_topic: String,
}

impl std::fmt::Debug for KafkaDeadLetters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaDeadLetters")
            .field("topic", &self.topic)
            .finish()
    }
}

impl KafkaDeadLetters {
    pub fn new(config: &KafkaConfig) -> anyhow::Result<Self> {
        Ok(Self {
            producer: producer(config)?,
            topic: config.dead_letter_topic(),
            source_topic: config.topic.clone(),
        })
    }
}

impl DeadLetterSink for KafkaDeadLetters {
    async fn send(&self, letter: &DeadLetter) -> anyhow::Result<()> {
        let partition = match letter.origin.source {
            SourceId::Kafka { partition } => partition.to_string(),
            other => other.name().to_owned(),
        };
        let offset = letter.origin.offset.to_string();
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: HEADER_REASON,
                value: Some(letter.reason.as_str()),
            })
            .insert(Header {
                key: HEADER_MESSAGE,
                value: Some(&letter.detail),
            })
            .insert(Header {
                key: HEADER_TOPIC,
                value: Some(&self.source_topic),
            })
            .insert(Header {
                key: HEADER_PARTITION,
                value: Some(&partition),
            })
            .insert(Header {
                key: HEADER_OFFSET,
                value: Some(&offset),
            });
        let mut record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(&self.topic).headers(headers);
        if let Some(key) = &letter.key {
            record = record.key(key.as_slice());
        }
        if let Some(payload) = &letter.payload {
            record = record.payload(payload.as_slice());
        }
        self.producer
            .send(record, Duration::from_secs(30))
            .await
            .map(|_| ())
            .map_err(|(error, _)| anyhow::anyhow!("producing to {}: {error}", self.topic))
    }
}
