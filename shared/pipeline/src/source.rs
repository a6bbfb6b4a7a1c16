//! The interface between event sources and the pipeline. Kafka implements it in the
//! indexer service; the all-in-one's replay, watched folders and webhook implement it too.
//!
//! A source sends [`SourceMessage`]s into the pipeline's bounded input channel, in order
//! per [`SourceId`], after calling [`crate::Offsets::started`]. The pipeline calls
//! [`Acknowledge::commit`] with positions whose every earlier message is durably written,
//! stale or dead-lettered, and hands messages that can never be indexed to a
//! [`DeadLetterSink`].

use std::fmt;
use std::future::Future;

use casement_events::Event;
use tokio::sync::oneshot;

use crate::outcome::{Finished, Reason};

/// Which ordered stream a message came from. A Kafka partition is one; each local source
/// is one (its messages numbered in the order it sent them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceId {
    Kafka {
        partition: i32,
    },
    Replay,
    Watch,
    Webhook,
    /// A MediaWiki's change stream (Server-Sent Events).
    Mediawiki,
    /// The repairs of `casement audit --fix`.
    Audit,
}

impl SourceId {
    /// The local sources of the all-in-one.
    pub const LOCAL: [Self; 5] = [
        Self::Replay,
        Self::Watch,
        Self::Webhook,
        Self::Mediawiki,
        Self::Audit,
    ];

    /// The `source` label and log field.
    pub fn name(self) -> &'static str {
        match self {
            Self::Kafka { .. } => "kafka",
            Self::Replay => "replay",
            Self::Watch => "watch",
            Self::Webhook => "webhook",
            Self::Mediawiki => "mediawiki",
            Self::Audit => "audit",
        }
    }

    /// Edits made by people right now (logged one line each), as opposed to a backlog.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Watch | Self::Webhook | Self::Mediawiki)
    }
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kafka { partition } => write!(f, "kafka partition {partition}"),
            other => f.write_str(other.name()),
        }
    }
}

/// Where and when a message entered the pipeline: what a commit, a dead letter and a
/// freshness measurement need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub source: SourceId,
    /// Position in the source's stream (a Kafka offset; a local source's sequence number).
    pub offset: i64,
    /// When the message entered the stream (Kafka's message timestamp), ms since the epoch.
    pub timestamp_ms: Option<i64>,
    /// Part of a bulk load (a replay, a backfill, a start-up resend, a Kafka message with
    /// the `casement.bulk` header) rather than a live edit: its freshness is counted apart
    /// (`origin="bulk"`), since a backlog's events wait behind each other.
    pub bulk: bool,
}

impl Origin {
    /// The `origin` label of the freshness histogram.
    pub fn label(&self) -> &'static str {
        if self.bulk { "bulk" } else { "live" }
    }
}

/// What a source hands over.
#[derive(Debug)]
pub enum Body {
    /// Bytes in one of the event formats, decoded by the pipeline (`None`: a Kafka
    /// tombstone).
    Bytes(Option<Vec<u8>>),
    /// An event the source built itself (a revision log, a watched file).
    Event(Box<Event>),
}

/// One message as a source delivered it.
#[derive(Debug)]
pub struct SourceMessage {
    pub origin: Origin,
    pub key: Option<Vec<u8>>,
    pub body: Body,
    /// A start-up resend of what the source already sent in an earlier run (a watched
    /// folder's known files): applied like any event, but not news.
    pub resend: bool,
    /// Where the outcome goes once it is durable, when the source waits for it.
    pub reply: Option<oneshot::Sender<Finished>>,
}

impl SourceMessage {
    /// A message with nobody waiting for its outcome.
    pub fn new(origin: Origin, key: Option<Vec<u8>>, body: Body) -> Self {
        Self {
            origin,
            key,
            body,
            resend: false,
            reply: None,
        }
    }
}

/// Commits positions back to the source.
pub trait Acknowledge: Send + Sync + 'static {
    /// `positions`: (stream, next offset to read). Must not block for long.
    fn commit(&self, positions: &[(SourceId, i64)]);
}

/// Where messages that can never succeed go, with why.
pub trait DeadLetterSink: Send + Sync + 'static {
    /// Durably stores the letter (or fails, and the pipeline retries).
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// A message that cannot be indexed: the original key and bytes (an event a local source
/// built is kept as its native JSON), the reason and a human-readable detail.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub origin: Origin,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub reason: Reason,
    pub detail: String,
}
