//! Debezium change events: the envelope (`before`, `after`, `op`, `source`), with or
//! without the JSON converter's `{schema, payload}` wrapper. Row columns map to the
//! document by config; `c` (create), `r` (snapshot read) and `u` (update) upsert the `after`
//! row, `d` deletes the `before` row, and a Kafka tombstone (no value) deletes the document
//! named by the message key.

use casement_text::{Format, Revision};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Change, DecodeConfig, Event, EventFormat, Rejection, reject};

/// Which columns of the captured table make the document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebeziumColumns {
    pub doc_id: String,
    /// Prepended to the `doc_id` column's value (e.g. the table name), so ids of several
    /// tables cannot collide.
    pub doc_id_prefix: String,
    pub title: Option<String>,
    pub content: String,
    /// Format of the content column: `markdown`, `html`, `text` or `wikitext`.
    pub format: String,
    /// A column holding a per-row version; when unset, the source commit time
    /// (`source.ts_ms`) is the revision.
    pub revision: Option<String>,
    pub tenant: Option<String>,
    pub url: Option<String>,
    /// A column holding who may read the row's document: a JSON array of groups, the
    /// string `public`, or groups separated by commas (`null`: `[access] default`).
    pub access: Option<String>,
}

impl Default for DebeziumColumns {
    fn default() -> Self {
        Self {
            doc_id: "id".into(),
            doc_id_prefix: String::new(),
            title: Some("title".into()),
            content: "content".into(),
            format: "markdown".into(),
            revision: None,
            tenant: None,
            url: None,
            access: None,
        }
    }
}

fn unwrap_payload(json: Value) -> Value {
    match json {
        Value::Object(mut map) if map.contains_key("payload") && map.contains_key("schema") => {
            map.remove("payload").unwrap_or(Value::Null)
        }
        other => other,
    }
}

fn column_text(row: &Map<String, Value>, column: &str) -> Option<String> {
    match row.get(column)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn doc_id(row: &Map<String, Value>, columns: &DebeziumColumns) -> Result<String, Rejection> {
    column_text(row, &columns.doc_id)
        .filter(|id| !id.is_empty())
        .map(|id| format!("{}{id}", columns.doc_id_prefix))
        .ok_or_else(|| reject("schema", format!("row has no {:?} column", columns.doc_id)))
}

pub(crate) fn decode(json: Value, config: &DecodeConfig) -> Result<Event, Rejection> {
    let columns = &config.debezium;
    let envelope = unwrap_payload(json);
    let op = envelope
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| reject("schema", "Debezium envelope without op"))?;
    let source_ms = envelope
        .get("source")
        .and_then(|s| s.get("ts_ms"))
        .and_then(Value::as_i64)
        .or_else(|| envelope.get("ts_ms").and_then(Value::as_i64));
    let row = |field: &str| -> Result<Map<String, Value>, Rejection> {
        match envelope.get(field) {
            Some(Value::Object(row)) => Ok(row.clone()),
            _ => Err(reject(
                "schema",
                format!("op {op:?} without a {field:?} row"),
            )),
        }
    };
    let revision_of = |row: &Map<String, Value>| -> Result<u64, Rejection> {
        match &columns.revision {
            Some(column) => row.get(column).and_then(Value::as_u64).ok_or_else(|| {
                reject(
                    "schema",
                    format!("no non-negative integer in column {column:?}"),
                )
            }),
            None => source_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .ok_or_else(|| reject("schema", "no source.ts_ms to use as the revision")),
        }
    };
    let change = match op {
        "c" | "r" | "u" => {
            let after = row("after")?;
            let format: Format = columns
                .format
                .parse()
                .map_err(|e| reject("schema", format!("debezium.format: {e}")))?;
            let content = column_text(&after, &columns.content).ok_or_else(|| {
                reject(
                    "no_content",
                    format!("row has no {:?} column", columns.content),
                )
            })?;
            Change::Upsert(Revision {
                access: match &columns.access {
                    Some(column) => crate::access::from_column(after.get(column), column)?,
                    None => None,
                },
                metadata: Default::default(),
                doc_id: doc_id(&after, columns)?,
                revision: revision_of(&after)?,
                title: columns
                    .title
                    .as_deref()
                    .and_then(|c| column_text(&after, c)),
                url: columns.url.as_deref().and_then(|c| column_text(&after, c)),
                tenant: columns
                    .tenant
                    .as_deref()
                    .and_then(|c| column_text(&after, c)),
                format,
                content,
                revision_url: None,
            })
        }
        "d" => {
            let before = row("before")?;
            Change::Delete {
                doc_id: doc_id(&before, columns)?,
                tenant: columns
                    .tenant
                    .as_deref()
                    .and_then(|c| column_text(&before, c)),
                revision: Some(revision_of(&before).or_else(|_| {
                    source_ms
                        .and_then(|ms| u64::try_from(ms).ok())
                        .ok_or_else(|| reject("schema", "delete without a revision"))
                })?),
            }
        }
        other => {
            return Err(reject(
                "unsupported",
                format!("Debezium op {other:?} (c, r, u and d are indexed)"),
            ));
        }
    };
    Ok(Event {
        change,
        format: EventFormat::Debezium,
    })
}

/// A Kafka tombstone: delete the document the key names.
pub(crate) fn tombstone(key: Option<&[u8]>, config: &DecodeConfig) -> Result<Event, Rejection> {
    let key = key.ok_or_else(|| reject("schema", "a message without value and without key"))?;
    let text = std::str::from_utf8(key).map_err(|e| reject("not_utf8", format!("key: {e}")))?;
    let columns = &config.debezium;
    let doc_id = match serde_json::from_str::<Value>(text).map(unwrap_payload) {
        Ok(Value::Object(row)) => doc_id(&row, columns)?,
        Ok(Value::String(id)) => format!("{}{id}", columns.doc_id_prefix),
        Ok(Value::Number(id)) => format!("{}{id}", columns.doc_id_prefix),
        _ if !text.trim().is_empty() => format!("{}{}", columns.doc_id_prefix, text.trim()),
        _ => return Err(reject("schema", "a tombstone with an empty key")),
    };
    Ok(Event {
        // A tombstone's key names no tenant: it deletes the document without one.
        change: Change::Delete {
            doc_id,
            tenant: None,
            revision: None,
        },
        format: EventFormat::Debezium,
    })
}
