//! Casement's native event (`schema/native-event.schema.json`).

use casement_text::{Format, Revision};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Change, Event, EventFormat, Rejection, reject};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeType {
    Upsert,
    Delete,
}

/// The native event, as published (Kafka key = `doc_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NativeEvent {
    #[serde(rename = "type")]
    pub kind: NativeType,
    pub doc_id: String,
    /// Comparable per document: a newer revision has a larger number.
    pub revision: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `markdown`, `html`, `text` or `wikitext`; required for an upsert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The address of this revision (a permalink), beside the page's `url`: citations
    /// carry both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_url: Option<String>,
    /// Free-form; carried, not indexed.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Who may read the document: `{"groups": ["hr", "staff"]}`, `{"public": true}` (both:
    /// public). Absent: the source's default (`[access] default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<casement_text::Access>,
    /// RFC 3339 time of the change at the source. Accepted so producers may send it, not
    /// used: freshness is measured from the Kafka timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time: Option<String>,
}

pub(crate) fn decode(json: Value, format: EventFormat) -> Result<Event, Rejection> {
    let event = from_json(json).map_err(|e| reject("schema", format!("native event: {e}")))?;
    event.into_event(format)
}

/// A native event from JSON; the error names the field (`revision: invalid type: …`).
pub(crate) fn from_json(json: Value) -> Result<NativeEvent, String> {
    serde_path_to_error::deserialize(json).map_err(|e: serde_path_to_error::Error<_>| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}

impl NativeEvent {
    /// A delete of `doc_id` at `revision`.
    pub fn delete(doc_id: &str, revision: u64) -> Self {
        Self {
            kind: NativeType::Delete,
            doc_id: doc_id.to_owned(),
            revision,
            title: None,
            format: None,
            content: None,
            tenant: None,
            url: None,
            revision_url: None,
            metadata: Default::default(),
            access: None,
            event_time: None,
        }
    }

    pub fn into_event(self, format: EventFormat) -> Result<Event, Rejection> {
        if self.doc_id.trim().is_empty() {
            return Err(reject("schema", "doc_id is empty"));
        }
        let change = match self.kind {
            NativeType::Delete => Change::Delete {
                doc_id: self.doc_id,
                tenant: self.tenant,
                revision: Some(self.revision),
            },
            NativeType::Upsert => {
                let format_name = self
                    .format
                    .ok_or_else(|| reject("schema", "an upsert needs a format"))?;
                let format: Format = format_name
                    .parse()
                    .map_err(|e| reject("schema", format!("format: {e}")))?;
                let content = self
                    .content
                    .ok_or_else(|| reject("no_content", "an upsert needs content"))?;
                Change::Upsert(Revision {
                    access: crate::access::checked(self.access)?,
                    metadata: self.metadata,
                    doc_id: self.doc_id,
                    revision: self.revision,
                    title: self.title,
                    url: self.url,
                    tenant: self.tenant,
                    format,
                    content,
                    revision_url: self.revision_url,
                })
            }
        };
        Ok(Event { change, format })
    }
}
