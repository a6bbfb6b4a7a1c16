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
                    metrics
                        .freshness
                        .with_label_values(&[self.origin.label()])
                        .observe(seconds);
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
        let offset = self.origin.offset;
        match (self.is_news(), &self.outcome) {
            (true, Outcome::DeadLettered(_)) => tracing::warn!("{}", self.describe()),
            (true, _) => tracing::info!("{}", self.describe()),
            // Formatted only when debug is enabled: a backlog of thousands of events costs
            // nothing here otherwise.
            (false, _) => tracing::debug!(offset, "{}", self.describe()),
        }
    }

    /// A live edit made by a person now (watch, webhook), as opposed to a backlog.
    fn is_news(&self) -> bool {
        self.origin.source.is_live() && !self.resend
    }

    /// The log line.
    fn describe(&self) -> String {
        let source = self.origin.source;
        let (doc_id, revision) = self.document.clone().unwrap_or_default();
        let revision = revision.map_or_else(|| "-".to_owned(), |r| r.to_string());
        match self.outcome {
            Outcome::Applied(d) => format!(
                "{source}: indexed {doc_id} revision {revision}: {} sentences embedded, {} reused, {} payload updated, {} deleted, {} unchanged",
                d.embedded, d.reused, d.payload_updated, d.deleted, d.unchanged
            ),
            Outcome::Deleted(_) => format!("{source}: deleted {doc_id} (revision {revision})"),
            Outcome::Stale { indexed_revision } => format!(
                "{source}: {doc_id} revision {revision} is not newer than the indexed revision {indexed_revision}; nothing changed"
            ),
            Outcome::DeadLettered(reason) => format!(
                "{source}: rejected an event ({}): {}",
                reason.as_str(),
                self.detail.as_deref().unwrap_or("")
            ),
        }
    }
}
