//! Recording a finished event: one call both counts it (outcome, sentence decisions, dead
//! letter reason, freshness) and logs it, so metrics and logs cannot disagree. The ack stage
//! calls [`Finished::emit`] once per event, after the write or dead letter is durable.
//!
//! Live edits (watched files, webhook events) are logged one line each (`info`, a rejection
//! `warn`); a backlog (Kafka, a replay, start-up resends) at `debug`, so a replay of
//! thousands of events does not flood the log: its outcomes are in the metrics and its
//! rejections in the dead letters.

use crate::metrics::Metrics;
use crate::outcome::{Finished, Outcome};

impl Finished {
    pub fn emit(&self, metrics: &Metrics) {
        metrics
            .events
            .with_label_values(&[self.outcome.label()])
            .inc();
        match &self.outcome {
            Outcome::Applied(decisions) | Outcome::Deleted(decisions) => {
                for (decision, n) in decisions.counts() {
                    metrics
                        .sentences
                        .with_label_values(&[decision.as_str()])
                        .inc_by(n as u64);
                }
                if let Some(ts) = self.origin.timestamp_ms {
                    let seconds = (self.finished_ms - ts).max(0) as f64 / 1000.0;
                    metrics.freshness.observe(seconds);
                }
            }
            Outcome::DeadLettered(reason) => {
                metrics
                    .dead_letters
                    .with_label_values(&[reason.as_str()])
                    .inc();
            }
            Outcome::Stale { .. } => {}
        }
        self.log();
    }

    fn log(&self) {
        let source = self.origin.source;
        let news = source.is_live() && !self.resend;
        let (doc_id, revision) = self.document.clone().unwrap_or_default();
        let revision = revision.map_or_else(|| "-".to_owned(), |r| r.to_string());
        if let Outcome::DeadLettered(reason) = self.outcome {
            let detail = self.detail.as_deref().unwrap_or("");
            let offset = self.origin.offset;
            if news {
                tracing::warn!(
                    "{source}: rejected an event ({}): {detail}",
                    reason.as_str()
                );
            } else {
                // A backlog's rejections are counted and kept in the dead letters; one line
                // each would bury the progress of a replay.
                tracing::debug!(
                    offset,
                    "{source}: rejected an event ({}): {detail}",
                    reason.as_str()
                );
            }
            return;
        }
        let line = match self.outcome {
            Outcome::Applied(d) => format!(
                "{source}: indexed {doc_id} revision {revision}: {} sentences embedded, {} reused, {} payload updated, {} deleted, {} unchanged",
                d.embedded, d.reused, d.payload_updated, d.deleted, d.unchanged
            ),
            Outcome::Deleted(_) => format!("{source}: deleted {doc_id} (revision {revision})"),
            Outcome::Stale { indexed_revision } => format!(
                "{source}: {doc_id} revision {revision} is not newer than the indexed revision {indexed_revision}; nothing changed"
            ),
            Outcome::DeadLettered(_) => return,
        };
        if news {
            tracing::info!("{line}");
        } else {
            tracing::debug!(offset = self.origin.offset, "{line}");
        }
    }
}
