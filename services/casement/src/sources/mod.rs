//! Local event sources: a revision-log replay, watched folders, the webhook and a
//! MediaWiki's change stream. Each is a
//! source of the pipeline (`casement_pipeline::source`) with its own [`SourceId`] and its
//! messages numbered in the order it sends them. Replay and watch hand the pipeline events
//! they built; the webhook hands it bytes to decode and waits for the outcome. The
//! pipeline's commits (only past durably written, stale or dead-lettered events) move the
//! replay position kept in `<data_dir>/sources.json`.

pub mod dead_letters;
pub mod journal;
pub mod mediawiki;
pub mod replay;
pub mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use casement_events::{Event, EventFormat, NativeEvent};
use casement_pipeline::{
    Acknowledge, Body, Finished, Offsets, Origin, SourceId, SourceMessage, now_ms,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::metrics::LocalMetrics;

/// When the change happened at the source, as the event says (ms since the epoch): the
/// native `event_time`, CloudEvents' `time`, MediaWiki's `meta.dt` (or `dt`), Debezium's
/// `ts_ms` (of the envelope or its `payload`). Freshness is measured from it.
pub fn event_time_ms(json: &serde_json::Value) -> Option<i64> {
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_millis())
    };
    text(json.get("event_time"))
        .or_else(|| text(json.get("time")))
        .or_else(|| text(json.get("meta").and_then(|m| m.get("dt"))))
        .or_else(|| text(json.get("dt")))
        .or_else(|| json.get("ts_ms").and_then(serde_json::Value::as_i64))
        .or_else(|| {
            json.get("payload")
                .and_then(|p| p.get("ts_ms"))
                .and_then(serde_json::Value::as_i64)
        })
}

/// The time a live edit's freshness is measured from: when it changed at the source, if
/// that is known and plausible (not ahead of this clock by more than a second, not over
/// ten minutes old: a change found at a restart, or a clock that is off, counts from when
/// it was read), else now.
pub fn changed_at(changed_ms: Option<i64>, now: i64) -> i64 {
    match changed_ms {
        Some(at) if at <= now + 1_000 && at >= now - 600_000 => at.min(now),
        _ => now,
    }
}

/// Hands messages to the pipeline: per source, offsets in increasing order, each marked
/// started before it is sent. Waits while the pipeline is full.
#[derive(Debug, Clone)]
pub struct Feeder {
    input: mpsc::Sender<SourceMessage>,
    offsets: Offsets,
    next: Arc<HashMap<SourceId, Mutex<i64>>>,
    metrics: LocalMetrics,
    /// Everything it sends is a bulk load (`casement backfill`'s folders).
    bulk: bool,
}

impl Feeder {
    /// `replay_start`: the replay's first offset (its committed position).
    pub fn new(
        input: mpsc::Sender<SourceMessage>,
        offsets: Offsets,
        replay_start: i64,
        metrics: LocalMetrics,
    ) -> Self {
        let next = SourceId::LOCAL
            .into_iter()
            .map(|source| {
                let start = if source == SourceId::Replay {
                    replay_start
                } else {
                    0
                };
                (source, Mutex::new(start))
            })
            .collect();
        Self {
            input,
            offsets,
            next: Arc::new(next),
            metrics,
            bulk: false,
        }
    }

    /// The same feeder, marking everything it sends as part of a bulk load (a backfill's
    /// folders: freshness counted as `bulk`, deletes not counted by the mass-deletion
    /// guard).
    pub fn bulk(&self) -> Self {
        Self {
            bulk: true,
            ..self.clone()
        }
    }

    /// Sends a native event a source built (replay, watch), as an event: the pipeline does
    /// not decode it again. One that is not a valid event goes as its JSON bytes, so the
    /// decoder rejects it to the dead letters like any other. `resend` marks a start-up
    /// resend.
    pub async fn send_native(
        &self,
        source: SourceId,
        native: NativeEvent,
        resend: bool,
    ) -> anyhow::Result<i64> {
        let key = Some(native.doc_id.as_bytes().to_vec());
        let changed = native
            .event_time
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_millis());
        let body = match native.clone().into_event(EventFormat::Native) {
            Ok(event) => Body::Event(Box::new(event)),
            Err(_) => Body::Bytes(Some(serde_json::to_vec(&native)?)),
        };
        self.send(source, key, body, resend, None, changed).await
    }

    /// Sends an event built here (an audit's repair) as it is; the receiver gets its
    /// outcome once durable (or may be dropped).
    pub async fn send_event(
        &self,
        source: SourceId,
        event: Event,
    ) -> anyhow::Result<oneshot::Receiver<Finished>> {
        let key = Some(event.doc_id().as_bytes().to_vec());
        let (reply, outcome) = oneshot::channel();
        self.send(
            source,
            key,
            Body::Event(Box::new(event)),
            false,
            Some(reply),
            None,
        )
        .await?;
        Ok(outcome)
    }

    /// Sends bytes to decode (a stream's events), with nobody waiting for the outcome;
    /// `changed_ms`: when the change happened at the source, if known.
    pub async fn send_bytes(
        &self,
        source: SourceId,
        bytes: Vec<u8>,
        changed_ms: Option<i64>,
    ) -> anyhow::Result<i64> {
        self.send(
            source,
            None,
            Body::Bytes(Some(bytes)),
            false,
            None,
            changed_ms,
        )
        .await
    }

    /// Sends bytes to decode (the webhook, its journal); the receiver gets the outcome once
    /// durable. `resend` marks a start-up resend.
    pub async fn send_waiting(
        &self,
        source: SourceId,
        bytes: Vec<u8>,
        resend: bool,
        changed_ms: Option<i64>,
    ) -> anyhow::Result<(i64, oneshot::Receiver<Finished>)> {
        let (reply, outcome) = oneshot::channel();
        let offset = self
            .send(
                source,
                None,
                Body::Bytes(Some(bytes)),
                resend,
                Some(reply),
                changed_ms,
            )
            .await?;
        Ok((offset, outcome))
    }

    /// [`Feeder::send_native`], and the receiver of its outcome once durable (a watcher's
    /// catch-up at start, which readiness waits for).
    pub async fn send_native_waiting(
        &self,
        source: SourceId,
        native: NativeEvent,
        resend: bool,
    ) -> anyhow::Result<oneshot::Receiver<Finished>> {
        let key = Some(native.doc_id.as_bytes().to_vec());
        let body = match native.clone().into_event(EventFormat::Native) {
            Ok(event) => Body::Event(Box::new(event)),
            Err(_) => Body::Bytes(Some(serde_json::to_vec(&native)?)),
        };
        let (reply, outcome) = oneshot::channel();
        self.send(source, key, body, resend, Some(reply), None)
            .await?;
        Ok(outcome)
    }

    async fn send(
        &self,
        source: SourceId,
        key: Option<Vec<u8>>,
        body: Body,
        resend: bool,
        reply: Option<oneshot::Sender<Finished>>,
        changed_ms: Option<i64>,
    ) -> anyhow::Result<i64> {
        let slot = self
            .next
            .get(&source)
            .ok_or_else(|| anyhow::anyhow!("{source} is not a local source"))?;
        let mut next = slot.lock().await;
        let offset = *next;
        // A live edit's freshness runs from the change at the source; a bulk load's from
        // when it was read (its changes are history).
        let live = source.is_live() && !resend && !self.bulk;
        let now = now_ms();
        let origin = Origin {
            source,
            offset,
            timestamp_ms: Some(if live {
                changed_at(changed_ms, now)
            } else {
                now
            }),
            // A replay, a backfill and the start-up resends are bulk loads.
            bulk: !live,
        };
        self.offsets.started(&origin);
        let message = SourceMessage {
            origin,
            key,
            body,
            resend,
            reply,
        };
        self.input
            .send(message)
            .await
            .map_err(|_| anyhow::anyhow!("the pipeline has stopped"))?;
        *next += 1;
        self.metrics
            .source_events
            .with_label_values(&[source.name()])
            .inc();
        Ok(offset)
    }
}

/// A source's state file, or the default when it is missing or unreadable (every source
/// can start over safely: revisions are fenced).
pub fn read_state<T: serde::de::DeserializeOwned + Default>(path: &Path) -> T {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Writes a source's state file whole or not at all (a temporary file, then a rename).
pub fn write_state<T: Serialize>(path: &Path, state: &T) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)?;
    std::fs::rename(tmp, path)
}

/// What `sources.json` keeps: how far the replay got, for which inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Positions {
    /// Identifies the replayed inputs (paths and sizes); another input starts over.
    pub replay_inputs: String,
    /// Events of the replay durably handled (the next one to send).
    pub replay_next: i64,
}

impl Positions {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("sources.json")
    }

    /// The saved positions, or none (a missing or unreadable file starts over: replaying
    /// again is safe, since revisions are fenced).
    pub fn load(data_dir: &Path) -> Self {
        read_state(&Self::path(data_dir))
    }

    pub fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        write_state(&Self::path(data_dir), self)
    }
}

/// The pipeline's commits: the replay position goes to `sources.json`, the MediaWiki
/// stream's to `mediawiki.json`. The watch and webhook sources need none (the watcher
/// keeps its own state; a webhook caller gets its answer only once the event is durable).
#[derive(Debug)]
pub struct LocalAck {
    data_dir: PathBuf,
    positions: std::sync::Mutex<Positions>,
    stream: Option<Arc<mediawiki::StreamPosition>>,
}

impl LocalAck {
    pub fn new(
        data_dir: &Path,
        positions: Positions,
        stream: Option<Arc<mediawiki::StreamPosition>>,
    ) -> Self {
        Self {
            data_dir: data_dir.to_owned(),
            positions: std::sync::Mutex::new(positions),
            stream,
        }
    }
}

impl Acknowledge for LocalAck {
    fn commit(&self, positions: &[(SourceId, i64)]) {
        if let Some(stream) = &self.stream
            && let Some(&(_, next)) = positions.iter().find(|(s, _)| *s == SourceId::Mediawiki)
        {
            stream.committed(next);
        }
        let Some(&(_, next)) = positions.iter().find(|(s, _)| *s == SourceId::Replay) else {
            return;
        };
        let mut saved = self
            .positions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if next <= saved.replay_next {
            return;
        }
        saved.replay_next = next;
        if let Err(error) = saved.save(&self.data_dir) {
            tracing::warn!(%error, "cannot save the replay position (it will be replayed again, safely)");
        }
    }
}
