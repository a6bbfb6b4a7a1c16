//! The one vocabulary of what happened to an event: its [`Outcome`], the [`Decision`] taken
//! for each of its sentences, the [`Stage`] it spent time in, and the [`Reason`] it was
//! dead-lettered. Metric labels, log lines and the webhook's answers all come from these
//! enums, so a label value the code never produces cannot exist.

use crate::source::Origin;

/// How one event finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Applied(Decisions),
    Deleted(Decisions),
    /// Not newer than what is indexed (or than the tombstone): nothing written.
    Stale {
        indexed_revision: u64,
    },
    /// Can never be indexed: stored in the dead-letter sink.
    DeadLettered(Reason),
}

impl Outcome {
    /// Every `outcome` label value (pre-registered; a test holds it to [`Outcome::label`]).
    pub const LABELS: [&'static str; 4] = ["applied", "deleted", "stale", "dead_lettered"];

    pub fn label(&self) -> &'static str {
        match self {
            Self::Applied(_) => "applied",
            Self::Deleted(_) => "deleted",
            Self::Stale { .. } => "stale",
            Self::DeadLettered(_) => "dead_lettered",
        }
    }

    /// The sentence decisions of a written event.
    pub fn decisions(&self) -> Option<&Decisions> {
        match self {
            Self::Applied(d) | Self::Deleted(d) => Some(d),
            Self::Stale { .. } | Self::DeadLettered(_) => None,
        }
    }
}

/// What happened to a sentence of an applied event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// New embedding input, sent to the model.
    Embedded,
    /// New embedding input, whose vector was in the embedding cache (a revert, a replay).
    Reused,
    /// Same embedding input, new payload (its window or position moved): no embedding.
    PayloadUpdated,
    Deleted,
    Unchanged,
}

impl Decision {
    pub const ALL: [Self; 5] = [
        Self::Embedded,
        Self::Reused,
        Self::PayloadUpdated,
        Self::Deleted,
        Self::Unchanged,
    ];

    /// The `decision` label, log word and webhook field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Reused => "reused",
            Self::PayloadUpdated => "payload_updated",
            Self::Deleted => "deleted",
            Self::Unchanged => "unchanged",
        }
    }
}

/// Sentence counts of an applied event, by [`Decision`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decisions {
    pub embedded: usize,
    pub reused: usize,
    pub payload_updated: usize,
    pub deleted: usize,
    pub unchanged: usize,
}

impl Decisions {
    pub fn count(&self, decision: Decision) -> usize {
        match decision {
            Decision::Embedded => self.embedded,
            Decision::Reused => self.reused,
            Decision::PayloadUpdated => self.payload_updated,
            Decision::Deleted => self.deleted,
            Decision::Unchanged => self.unchanged,
        }
    }

    /// Every decision with its count, in [`Decision::ALL`] order.
    pub fn counts(&self) -> impl Iterator<Item = (Decision, usize)> + '_ {
        Decision::ALL.into_iter().map(|d| (d, self.count(d)))
    }
}

/// The timed stages of one event (the `stage` label of the stage-duration histogram).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Decode,
    Fence,
    Fetch,
    Read,
    Segment,
    Enrich,
    Plan,
    Embed,
    Write,
}

impl Stage {
    pub const ALL: [Self; 9] = [
        Self::Decode,
        Self::Fence,
        Self::Fetch,
        Self::Read,
        Self::Segment,
        Self::Enrich,
        Self::Plan,
        Self::Embed,
        Self::Write,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Decode => "decode",
            Self::Fence => "fence",
            Self::Fetch => "fetch",
            Self::Read => "read",
            Self::Segment => "segment",
            Self::Enrich => "enrich",
            Self::Plan => "plan",
            Self::Embed => "embed",
            Self::Write => "write",
        }
    }
}

/// Where a transient failure was retried (the `stage` label of the retry counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryStage {
    /// Reading the document's indexed state (the store).
    Fence,
    /// Fetching the revision's content from the wiki.
    Fetch,
    /// Reading the document's records (the store).
    Read,
    /// The embedding model.
    Embed,
    /// The durable write (the store).
    Write,
    /// Storing a dead letter.
    DeadLetter,
}

impl RetryStage {
    pub const ALL: [Self; 6] = [
        Self::Fence,
        Self::Fetch,
        Self::Read,
        Self::Embed,
        Self::Write,
        Self::DeadLetter,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fence => "fence",
            Self::Fetch => "fetch",
            Self::Read => "read",
            Self::Embed => "embed",
            Self::Write => "write",
            Self::DeadLetter => "dead_letter",
        }
    }
}

/// Why an event was dead-lettered (the `reason` label and the dead letter's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Rejected by the decoder (`casement_events::REASONS`).
    TooLarge,
    NotUtf8,
    NotJson,
    Schema,
    NoContent,
    Unsupported,
    /// The revision cannot be segmented (too large for the segmenter, ...).
    Text,
    /// The store refused the write for good (not a transient failure).
    Store,
    /// The revision to fetch is gone from the wiki: deleted, hidden or suppressed.
    Gone,
    /// The revision could not be fetched for `pipeline.fetch_give_up_secs` (the wiki
    /// down, slow, or answering what is not the API's JSON).
    FetchFailed,
}

impl Reason {
    pub const ALL: [Self; 10] = [
        Self::TooLarge,
        Self::NotUtf8,
        Self::NotJson,
        Self::Schema,
        Self::NoContent,
        Self::Unsupported,
        Self::Text,
        Self::Store,
        Self::Gone,
        Self::FetchFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooLarge => "too_large",
            Self::NotUtf8 => "not_utf8",
            Self::NotJson => "not_json",
            Self::Schema => "schema",
            Self::NoContent => "no_content",
            Self::Unsupported => "unsupported",
            Self::Text => "text",
            Self::Store => "store",
            Self::Gone => "gone",
            Self::FetchFailed => "fetch_failed",
        }
    }

    /// The reason of a decoder rejection (`casement_events::Rejection::reason`).
    pub fn of_rejection(reason: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == reason)
            .unwrap_or(Self::Schema)
    }
}

/// A finished event, as the ack stage records it and hands it to whoever waits.
#[derive(Debug, Clone)]
pub struct Finished {
    pub origin: Origin,
    /// The event's document and revision (none when it could not be decoded).
    pub document: Option<(String, Option<u64>)>,
    /// When the write (or dead letter) was durable, ms since the epoch.
    pub finished_ms: i64,
    pub outcome: Outcome,
    /// Why it was dead-lettered, in words (dead letters only).
    pub detail: Option<String>,
    /// A start-up resend (see [`crate::SourceMessage::resend`]).
    pub resend: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decoder_reason_has_a_reason() {
        for reason in casement_events::REASONS {
            assert_eq!(Reason::of_rejection(reason).as_str(), reason);
        }
    }

    #[test]
    fn outcome_labels_match_their_variants() {
        let d = Decisions::default();
        let outcomes = [
            Outcome::Applied(d),
            Outcome::Deleted(d),
            Outcome::Stale {
                indexed_revision: 1,
            },
            Outcome::DeadLettered(Reason::Text),
        ];
        let labels: Vec<_> = outcomes.iter().map(Outcome::label).collect();
        assert_eq!(labels, Outcome::LABELS);
    }
}
