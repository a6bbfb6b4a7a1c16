//! Reads a revision log: JSON lines in the shape of the bundled sample and of
//! `shared/data/revisions` (`{doc_id, revision, title, format, content, change, path, seq}`),
//! plain or gzip-compressed. A line that cannot be decoded is reported with its number and
//! the reason; the lines after it are still read.
//!
//! **Order.** [`read`] returns events in publish order: by `seq`, and by line number among
//! equal `seq`s; a line without `seq` counts as `seq` = its line index. Every reader of a
//! log (replay, backfill, the sample, the benches, the tests) goes through [`read`], so
//! they all see one order.

use std::io::{BufRead, BufReader};
use std::path::Path;

use casement_text::{Format, Revision};

use crate::{Event, EventFormat, NativeEvent, NativeType, Rejection};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogEvent {
    pub doc_id: String,
    pub revision: u64,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default = "default_format")]
    pub format: String,
    #[serde(default)]
    pub content: String,
    /// create | update | rename | rename+update | delete
    pub change: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub seq: Option<u64>,
    /// RFC 3339 time of the revision at the source.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// Who may read the document, as the native event's `access` (absent: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<casement_text::Access>,
}

fn default_format() -> String {
    "markdown".to_owned()
}

impl LogEvent {
    pub fn is_delete(&self) -> bool {
        self.change == "delete"
    }

    /// The native event a CMS would publish for this revision (Kafka key = `doc_id`).
    pub fn to_native(&self) -> NativeEvent {
        let delete = self.is_delete();
        NativeEvent {
            kind: if delete {
                NativeType::Delete
            } else {
                NativeType::Upsert
            },
            doc_id: self.doc_id.clone(),
            revision: self.revision,
            title: self.title.clone().filter(|_| !delete),
            format: (!delete).then(|| self.format.clone()),
            content: (!delete).then(|| self.content.clone()),
            tenant: None,
            url: self.path.clone().filter(|_| !delete),
            revision_url: None,
            metadata: Default::default(),
            access: self.access.clone().filter(|_| !delete),
            event_time: self.timestamp.clone(),
        }
    }

    /// The event, as the pipeline would decode it from [`LogEvent::to_native`].
    pub fn to_event(&self) -> Result<Event, Rejection> {
        self.to_native().into_event(EventFormat::Native)
    }

    pub fn to_revision(&self) -> Result<Revision, casement_text::Error> {
        Ok(Revision {
            access: self.access.clone(),
            metadata: Default::default(),
            doc_id: self.doc_id.clone(),
            revision: self.revision,
            title: self.title.clone(),
            url: self.path.clone(),
            tenant: None,
            format: self.format.parse::<Format>()?,
            content: self.content.clone(),
            revision_url: None,
        })
    }
}

/// A line of the log that is not a valid event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedLine {
    pub line: usize,
    pub reason: String,
}

/// Reads every event of the log file (`.gz`: gzip-compressed), in publish order.
pub fn read(path: &Path) -> std::io::Result<(Vec<LogEvent>, Vec<RejectedLine>)> {
    parse(open(path)?)
}

/// The file's lines, through gzip when it ends in `.gz`.
pub fn open(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path)?;
    Ok(if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    })
}

/// Reads every event of a log, in publish order (see the module docs).
pub fn parse(reader: impl BufRead) -> std::io::Result<(Vec<LogEvent>, Vec<RejectedLine>)> {
    let mut events = Vec::new();
    let mut rejected = Vec::new();
    for (index, line) in reader.split(b'\n').enumerate() {
        let bytes = line?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<LogEvent>(&bytes) {
            Ok(event) => events.push((event.seq.unwrap_or(index as u64), index, event)),
            Err(e) => rejected.push(RejectedLine {
                line: index + 1,
                reason: e.to_string(),
            }),
        }
    }
    events.sort_by_key(|(seq, index, _)| (*seq, *index));
    Ok((events.into_iter().map(|(_, _, e)| e).collect(), rejected))
}
