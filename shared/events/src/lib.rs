//! CMS change events: what the indexer consumes, from whichever format the CMS emits.
//!
//! [`decode`] turns the bytes of one message (and its key) into an [`Event`], or a
//! [`Rejection`] with a machine-readable reason (the dead-letter header) and a message for
//! people. Formats (see `schema/native-event.schema.json` for the native one):
//! - **native**: Casement's own JSON event;
//! - **CloudEvents 1.0**, structured JSON mode, with a native event as `data`;
//! - **Debezium** change events (`before` / `after` / `op`), columns mapped by config; a
//!   Kafka tombstone (no value) deletes the document named by the key;
//! - **MediaWiki `page_change`** (create, edit, move, undelete, delete,
//!   visibility_change), content from `revision.content_slots.main.content_body` or, when
//!   the event does not carry it, a revision to fetch ([`Change::Fetch`]).
//!
//! Pure: no I/O, so every decoder is tested on the real samples directly.

mod access;
mod cloudevents;
mod debezium;
mod encode;
mod mediawiki;
mod native;
pub mod revision_log;

use casement_text::Revision;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use access::{AccessConfig, AccessDefault};
pub use debezium::DebeziumColumns;
pub use encode::native_json;
pub use native::{NativeEvent, NativeType};

/// The native event's JSON Schema (2020-12), `schema/native-event.schema.json`: the one
/// description of the format, which the all-in-one's OpenAPI document embeds.
pub const NATIVE_EVENT_SCHEMA: &str = include_str!("../schema/native-event.schema.json");

/// The format of a message, or `auto` to tell from its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventFormat {
    Auto,
    Native,
    Cloudevents,
    Debezium,
    Mediawiki,
}

impl EventFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Native => "native",
            Self::Cloudevents => "cloudevents",
            Self::Debezium => "debezium",
            Self::Mediawiki => "mediawiki",
        }
    }
}

/// Decoder settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DecodeConfig {
    pub format: EventFormat,
    /// Messages larger than this are rejected (`too_large`), not decoded.
    pub max_event_bytes: usize,
    pub debezium: DebeziumColumns,
    /// The service's `[access]` (a section of its own, copied here by `with_access`): the
    /// default for events that do not say, and the MediaWiki namespace map.
    #[serde(skip)]
    pub access: AccessConfig,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            format: EventFormat::Auto,
            max_event_bytes: 4 * 1024 * 1024,
            debezium: DebeziumColumns::default(),
            access: AccessConfig::default(),
        }
    }
}

impl DecodeConfig {
    /// This config deciding access by `access` (the service's `[access]` section).
    pub fn with_access(mut self, access: AccessConfig) -> Self {
        self.access = access;
        self
    }

    /// The size limit must admit something and stay within what the segmenter takes.
    pub fn validate(&self) -> Result<(), String> {
        let max = casement_text::segmenter::MAX_DOCUMENT_BYTES;
        if self.max_event_bytes == 0 || self.max_event_bytes > max {
            return Err(format!(
                "events.max_event_bytes = {} must be between 1 and {max}",
                self.max_event_bytes
            ));
        }
        self.access.validate()
    }
}

/// What an event asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Upsert(Revision),
    /// An upsert that may bring back the document deleted at this same revision (a wiki's
    /// undelete, which makes no new revision); any other upsert at a tombstone's revision
    /// is stale.
    Restore(Revision),
    /// Upsert a revision whose content the event does not carry: the pipeline fetches it
    /// from the wiki (`casement_pipeline::fetch`) once the fence has let it through.
    Fetch(RevisionRef),
    /// Delete the document. `revision` is `None` when the source does not say (a Debezium
    /// tombstone): the delete then applies at the indexed revision.
    Delete {
        doc_id: String,
        /// The document's tenant: a document is its id within its tenant.
        tenant: Option<String>,
        revision: Option<u64>,
    },
}

/// A wiki revision named by an event without its content: what to fetch, and the
/// document it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRef {
    /// `<wiki_id>:<page_id>`: stable across moves.
    pub doc_id: String,
    pub tenant: Option<String>,
    /// The revision id: what is fetched, and the document's revision once indexed.
    pub revision: u64,
    /// The wiki's host name (`meta.domain`, e.g. `en.wikipedia.org`): which API to ask.
    pub domain: String,
    /// The page title as the event gives it (underscores for spaces).
    pub title: Option<String>,
    pub url: Option<String>,
    /// Who may read it (`None`: the source's default, given at decode).
    pub access: Option<casement_text::Access>,
    /// Brings back a document deleted at this same revision: an undelete, or a revision
    /// whose hidden content is visible again. Any other upsert at a tombstone's revision
    /// is stale.
    pub restore: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub change: Change,
    /// The format it was decoded from.
    pub format: EventFormat,
}

impl Event {
    /// The revision the event carries (`None`: a delete that does not say, such as a
    /// Debezium tombstone).
    pub fn revision(&self) -> Option<u64> {
        match &self.change {
            Change::Upsert(revision) | Change::Restore(revision) => Some(revision.revision),
            Change::Fetch(reference) => Some(reference.revision),
            Change::Delete { revision, .. } => *revision,
        }
    }

    pub fn doc_id(&self) -> &str {
        match &self.change {
            Change::Upsert(revision) | Change::Restore(revision) => &revision.doc_id,
            Change::Fetch(reference) => &reference.doc_id,
            Change::Delete { doc_id, .. } => doc_id,
        }
    }

    pub fn tenant(&self) -> Option<&str> {
        match &self.change {
            Change::Upsert(revision) | Change::Restore(revision) => revision.tenant.as_deref(),
            Change::Fetch(reference) => reference.tenant.as_deref(),
            Change::Delete { tenant, .. } => tenant.as_deref(),
        }
    }

    /// Whether the event may bring back a document deleted at its own revision
    /// ([`Change::Restore`], [`RevisionRef::restore`]).
    pub fn restores(&self) -> bool {
        match &self.change {
            Change::Restore(_) => true,
            Change::Fetch(reference) => reference.restore,
            Change::Upsert(_) | Change::Delete { .. } => false,
        }
    }

    /// The document's identity: its id within its tenant.
    pub fn doc_ref(&self) -> casement_text::DocRef<'_> {
        casement_text::DocRef::new(self.tenant(), self.doc_id())
    }
}

/// Why an event can never be indexed. `reason` is one of a small fixed set (a metric label
/// and the dead-letter `casement-reason` header); `message` says what exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Rejection {
    pub reason: &'static str,
    pub message: String,
}

pub const REASONS: [&str; 6] = [
    "too_large",
    "not_utf8",
    "not_json",
    "schema",
    "no_content",
    "unsupported",
];

pub(crate) fn reject(reason: &'static str, message: impl Into<String>) -> Rejection {
    debug_assert!(REASONS.contains(&reason));
    Rejection {
        reason,
        message: message.into(),
    }
}

/// Decodes one message. `value` is `None` for a Kafka tombstone.
pub fn decode(
    value: Option<&[u8]>,
    key: Option<&[u8]>,
    config: &DecodeConfig,
) -> Result<Event, Rejection> {
    let Some(bytes) = value else {
        return debezium::tombstone(key, config);
    };
    if bytes.len() > config.max_event_bytes {
        return Err(reject(
            "too_large",
            format!(
                "{} bytes, over max_event_bytes = {}",
                bytes.len(),
                config.max_event_bytes
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| reject("not_utf8", e.to_string()))?;
    let json: Value = serde_json::from_str(text).map_err(|e| reject("not_json", e.to_string()))?;
    let format = match config.format {
        EventFormat::Auto => detect(&json),
        other => other,
    };
    let mut event = match format {
        EventFormat::Native | EventFormat::Auto => native::decode(json, EventFormat::Native),
        EventFormat::Cloudevents => cloudevents::decode(json),
        EventFormat::Debezium => debezium::decode(json, config),
        EventFormat::Mediawiki => mediawiki::decode(json, &config.access),
    }?;
    event.check_limits()?;
    config.access.resolve(&mut event);
    Ok(event)
}

/// The longest document id and tenant name taken, in bytes (an id must fit in a URL path:
/// `GET /v1/documents/{doc_id}`).
pub const MAX_ID_BYTES: usize = 1024;

/// The largest revision taken: the store keeps revisions as signed 64-bit integers.
pub const MAX_REVISION: u64 = i64::MAX as u64;

impl Event {
    /// Limits every format shares: ids that fit in a URL, revisions the store can keep.
    pub fn check_limits(&self) -> Result<(), Rejection> {
        // Control characters (newlines, escapes, NUL) in a name would forge log lines,
        // colour terminals and break tools that read ids as text.
        let title = match &self.change {
            Change::Upsert(revision) | Change::Restore(revision) => revision.title.as_deref(),
            Change::Fetch(reference) => reference.title.as_deref(),
            Change::Delete { .. } => None,
        };
        for (field, value) in [
            ("doc_id", Some(self.doc_id())),
            ("tenant", self.tenant()),
            ("title", title),
        ] {
            if let Some(value) = value
                && let Some(bad) = value.chars().find(|c| c.is_control())
            {
                return Err(reject(
                    "schema",
                    format!(
                        "{field} holds the control character U+{:04X}; names are printable text",
                        u32::from(bad)
                    ),
                ));
            }
        }
        if self.doc_id().len() > MAX_ID_BYTES {
            return Err(reject(
                "schema",
                format!(
                    "doc_id is {} bytes, over {MAX_ID_BYTES}",
                    self.doc_id().len()
                ),
            ));
        }
        if let Some(tenant) = self.tenant()
            && (tenant.is_empty() || tenant.len() > MAX_ID_BYTES)
        {
            return Err(reject(
                "schema",
                format!("tenant must be 1 to {MAX_ID_BYTES} bytes"),
            ));
        }
        if let Some(revision) = self.revision()
            && revision > MAX_REVISION
        {
            return Err(reject(
                "schema",
                format!("revision {revision} is over 2^63 - 1"),
            ));
        }
        Ok(())
    }
}

/// Tells the format from the message's shape.
pub fn detect(json: &Value) -> EventFormat {
    let has = |key: &str| json.get(key).is_some();
    if has("specversion") {
        EventFormat::Cloudevents
    } else if has("page_change_kind")
        || json
            .get("$schema")
            .and_then(Value::as_str)
            .is_some_and(|s| s.starts_with("/mediawiki/"))
    {
        EventFormat::Mediawiki
    } else if json.get("payload").is_some_and(|p| p.get("op").is_some())
        || (has("op") && (has("after") || has("before")))
    {
        EventFormat::Debezium
    } else {
        EventFormat::Native
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(doc_id: &str, revision: &str, tenant: &str) -> Vec<u8> {
        format!(
            r#"{{"type": "upsert", "doc_id": "{doc_id}", "revision": {revision}, {tenant}
                "format": "text", "content": "Some text."}}"#
        )
        .into_bytes()
    }

    /// Ids must fit in a URL and revisions in the store; the rejection says so (schema).
    #[test]
    fn ids_over_1_kib_and_revisions_over_2_63_are_rejected_as_schema() {
        let config = DecodeConfig::default();
        let decode = |bytes: Vec<u8>| super::decode(Some(&bytes), None, &config);
        assert!(decode(native(&"d".repeat(MAX_ID_BYTES), "1", "")).is_ok());
        let long = decode(native(&"d".repeat(MAX_ID_BYTES + 1), "1", "")).expect_err("rejected");
        assert_eq!(long.reason, "schema");
        assert!(
            long.message.contains("doc_id is 1025 bytes"),
            "{}",
            long.message
        );
        assert!(decode(native("d", &MAX_REVISION.to_string(), "")).is_ok());
        let huge = decode(native("d", &(MAX_REVISION + 1).to_string(), "")).expect_err("rejected");
        assert_eq!(huge.reason, "schema");
        assert!(huge.message.contains("over 2^63 - 1"), "{}", huge.message);
        let tenant = format!(r#""tenant": "{}","#, "t".repeat(MAX_ID_BYTES + 1));
        assert_eq!(
            decode(native("d", "1", &tenant))
                .expect_err("rejected")
                .reason,
            "schema"
        );
    }

    /// A newline, an escape or a NUL in an id, a tenant or a title would forge a log line
    /// or colour a terminal: rejected as `schema` in every format.
    #[test]
    fn control_characters_in_ids_tenants_and_titles_are_rejected() {
        let config = DecodeConfig::default();
        let decode = |bytes: Vec<u8>| super::decode(Some(&bytes), None, &config);
        for bad in [
            r"kb:a\n2026-11-28T04:20:00Z ERROR migration failed",
            r"kb:\u001b[31mred",
            r"kb:\u0000nul",
            r"kb:\u0085next-line",
        ] {
            let rejected = decode(native(bad, "1", "")).expect_err(bad);
            assert_eq!(rejected.reason, "schema", "{bad}");
            assert!(rejected.message.contains("doc_id"), "{}", rejected.message);
            let tenant = format!(r#""tenant": "{bad}","#);
            assert_eq!(
                decode(native("d", "1", &tenant)).expect_err(bad).reason,
                "schema"
            );
            let title = format!(r#""title": "{bad}","#);
            assert_eq!(
                decode(native("d", "1", &title)).expect_err(bad).reason,
                "schema"
            );
        }
        let page_change = String::from(
            r#"{"$schema": "/mediawiki/page/change/1.1.0", "page_change_kind": "edit",
                "meta": {"domain": "en.wikipedia.org"}, "wiki_id": "enwiki",
                "page": {"page_id": 1, "page_title": "A\nB", "namespace_id": 0},
                "revision": {"rev_id": 5}}"#,
        );
        let rejected = decode(page_change.into_bytes()).expect_err("a title with a newline");
        assert_eq!(rejected.reason, "schema", "{rejected}");
        // Unicode text is fine.
        assert!(decode(native("kb:café-日本", "1", r#""title": "Ünïcode – ok","#)).is_ok());
    }
}
