//! The consumer-group source: messages into the pipeline (pausing the assignment when the
//! pipeline is full), commits of finished prefixes, commit on revoke, lag from statistics.
//!
//! Flow control survives rebalances: librdkafka keeps a partition's pause flag across a
//! revoke and a later assignment, and `pause`/`resume` act only on the partitions assigned
//! when they are called. So the source's paused state lives in the context, and every new
//! assignment is paused or resumed to match it; otherwise a partition paused before a
//! rebalance that came back while the source resumed would never be read again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::sync::{mpsc, watch};

use casement_pipeline::{Acknowledge, Body, Metrics, Offsets, Origin, SourceId, SourceMessage};

use crate::config::KafkaConfig;

pub type KafkaConsumer = StreamConsumer<SourceContext>;

/// Rebalance and statistics callbacks (run on librdkafka's poll thread).
#[derive(Debug)]
pub struct SourceContext {
    topic: String,
    offsets: Offsets,
    metrics: Metrics,
    /// Whether the source wants its assignment paused (the pipeline is full). Held while
    /// the assignment is paused or resumed, so a rebalance and the source never interleave.
    paused: Mutex<bool>,
}

impl ClientContext for SourceContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        super::log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(target: "rdkafka", %error, reason, "client error");
    }

    fn stats(&self, statistics: Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else {
            return;
        };
        let tracked = self.offsets.lock();
        for (&partition, stats) in &topic.partitions {
            if tracked.contains_key(&SourceId::Kafka { partition }) && stats.consumer_lag >= 0 {
                self.metrics
                    .consumer_lag
                    .with_label_values(&[&partition.to_string()])
                    .set(stats.consumer_lag);
            }
        }
    }
}

impl SourceContext {
    fn is_paused(&self) -> bool {
        *self.paused.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ConsumerContext for SourceContext {
    /// Commits what finished in the revoked partitions, and forgets them: events still in
    /// the pipeline for them finish, but are not committed by this member.
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else {
            return;
        };
        let mut tracked = self.offsets.lock();
        let mut positions = TopicPartitionList::new();
        for element in revoked.elements() {
            let partition = element.partition();
            let _ = self
                .metrics
                .consumer_lag
                .remove_label_values(&[&partition.to_string()]);
            if let Some(state) = tracked.remove(&SourceId::Kafka { partition })
                && let Some(next) = state.committable()
                && let Err(error) =
                    positions.add_partition_offset(element.topic(), partition, Offset::Offset(next))
            {
                tracing::warn!(%error, partition, "commit on revoke");
            }
        }
        drop(tracked);
        tracing::info!(partitions = revoked.count(), "partitions revoked");
        if positions.count() > 0
            && let Err(error) = consumer.commit(&positions, CommitMode::Sync)
        {
            tracing::warn!(%error, "commit on revoke failed (events after the last commit will be delivered again)");
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Error(error) = rebalance {
            tracing::warn!(%error, "rebalance error");
        }
        // A partition comes back with the pause flag it had when it was revoked: bring the
        // whole assignment to the source's current state.
        let paused = self.paused.lock().unwrap_or_else(|e| e.into_inner());
        apply_pause(consumer, *paused);
        drop(paused);
        let assigned = consumer.assignment().map_or(0, |a| a.count());
        self.metrics.partitions.set(assigned as i64);
        tracing::info!(partitions = assigned, "partitions assigned");
    }

    fn commit_callback(
        &self,
        result: rdkafka::error::KafkaResult<()>,
        _offsets: &TopicPartitionList,
    ) {
        if let Err(error) = result {
            tracing::warn!(%error, "offset commit failed (retried with the next commit)");
        }
    }
}

/// Creates the group consumer and subscribes to the topic.
pub fn connect(
    config: &KafkaConfig,
    offsets: Offsets,
    metrics: Metrics,
) -> anyhow::Result<Arc<KafkaConsumer>> {
    let client = super::client_config(
        config,
        &[
            ("group.id", &config.group_id),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("auto.offset.reset", "earliest"),
            ("enable.partition.eof", "false"),
            ("statistics.interval.ms", "5000"),
            // An idle consumer's fetch waits at most this long. Brokers that answer a
            // waiting fetch only at its deadline (librdkafka's mock cluster: measured
            // ~400 ms freshness at the default 500) add up to this much latency to an edit;
            // Kafka answers at once. Costs ≤ 10 empty fetches/s per broker when idle.
            ("fetch.wait.max.ms", "100"),
        ],
    );
    let context = SourceContext {
        topic: config.topic.clone(),
        offsets,
        metrics,
        paused: Mutex::new(false),
    };
    let consumer: KafkaConsumer = client
        .create_with_context(context)
        .map_err(|e| anyhow::anyhow!("creating the Kafka consumer: {e}"))?;
    consumer
        .subscribe(&[&config.topic])
        .map_err(|e| anyhow::anyhow!("subscribing to {:?}: {e}", config.topic))?;
    Ok(Arc::new(consumer))
}

/// Reads messages into the pipeline until shutdown. When as many messages wait for room as
/// the pipeline's input holds, the assignment is paused (the group membership stays alive);
/// it is resumed when they are all in. Pausing drops what librdkafka prefetched and resuming
/// fetches it again (a fetch round, up to a second on the mock cluster), so the source does
/// not pause for every message that finds the pipeline full: it would crawl.
pub async fn consume(
    consumer: Arc<KafkaConsumer>,
    input: mpsc::Sender<SourceMessage>,
    offsets: Offsets,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backlog: VecDeque<SourceMessage> = VecDeque::new();
    let high = input.max_capacity().max(1);
    loop {
        while !backlog.is_empty() {
            match input.try_reserve() {
                Ok(permit) => permit.send(backlog.pop_front().unwrap_or_else(|| unreachable!())),
                Err(mpsc::error::TrySendError::Full(())) => break,
                Err(mpsc::error::TrySendError::Closed(())) => return,
            }
        }
        let paused = consumer.context().is_paused();
        let pause = if paused {
            !backlog.is_empty()
        } else {
            backlog.len() >= high
        };
        if pause != paused {
            set_paused(&consumer, pause);
        }
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            permit = input.reserve(), if !backlog.is_empty() => match permit {
                Ok(permit) => permit.send(backlog.pop_front().unwrap_or_else(|| unreachable!())),
                Err(_) => return,
            },
            received = consumer.recv() => match received {
                Ok(message) => {
                    let origin = Origin {
                        source: SourceId::Kafka { partition: message.partition() },
                        offset: message.offset(),
                        timestamp_ms: message.timestamp().to_millis(),
                        bulk: message.headers().is_some_and(|headers| {
                            headers.iter().any(|h| h.key == super::producer::HEADER_BULK)
                        }),
                    };
                    let message = SourceMessage::new(
                        origin,
                        message.key().map(<[u8]>::to_vec),
                        Body::Bytes(message.payload().map(<[u8]>::to_vec)),
                    );
                    offsets.started(&origin);
                    backlog.push_back(message);
                }
                Err(error) => {
                    tracing::warn!(%error, "Kafka consumer error (retrying)");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            },
        }
    }
}

/// Pauses or resumes the assignment, and records the state for the next rebalance
/// (see [`SourceContext`]).
fn set_paused(consumer: &KafkaConsumer, pause: bool) {
    let mut paused = consumer
        .context()
        .paused
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    *paused = pause;
    apply_pause(consumer, pause);
}

fn apply_pause<C: Consumer<SourceContext>>(consumer: &C, pause: bool) {
    let Ok(assignment) = consumer.assignment() else {
        return;
    };
    if assignment.count() == 0 {
        return;
    }
    let result = if pause {
        consumer.pause(&assignment)
    } else {
        consumer.resume(&assignment)
    };
    match result {
        Ok(()) => tracing::debug!(pause, "consumer flow control"),
        Err(error) => tracing::warn!(%error, pause, "pausing/resuming the assignment"),
    }
}

/// Commits through the consumer (asynchronously; a failed commit is retried by the next).
pub struct KafkaAck {
    pub consumer: Arc<KafkaConsumer>,
    pub topic: String,
}

impl std::fmt::Debug for KafkaAck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaAck")
            .field("topic", &self.topic)
            .finish()
    }
}

impl KafkaAck {
    /// The Kafka partitions among `positions` (other sources have none here).
    fn list(&self, positions: &[(SourceId, i64)]) -> TopicPartitionList {
        let mut list = TopicPartitionList::new();
        for &(source, next) in positions {
            if let SourceId::Kafka { partition } = source {
                let _ = list.add_partition_offset(&self.topic, partition, Offset::Offset(next));
            }
        }
        list
    }

    /// A synchronous commit, for shutdown.
    pub fn commit_sync(&self, positions: &[(SourceId, i64)]) -> anyhow::Result<()> {
        if positions.is_empty() {
            return Ok(());
        }
        self.consumer
            .commit(&self.list(positions), CommitMode::Sync)
            .map_err(|e| anyhow::anyhow!("final offset commit: {e}"))
    }
}

impl Acknowledge for KafkaAck {
    fn commit(&self, positions: &[(SourceId, i64)]) {
        if let Err(error) = self
            .consumer
            .commit(&self.list(positions), CommitMode::Async)
        {
            tracing::warn!(%error, "offset commit failed (retried with the next)");
        }
    }
}
