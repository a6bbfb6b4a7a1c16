//! Reads a revision log: JSON lines in the shape of the bundled sample and of
//! `shared/data/revisions` (`{doc_id, revision, title, format, content, change, path, seq}`),
//! plain or gzip-compressed. A line that cannot be decoded is reported with its number and
//! the reason; the lines after it are still read.

use std::io::{BufRead, BufReader};
use std::path::Path;

use casement_text::{Format, Revision};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
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
}

fn default_format() -> String {
    "markdown".to_owned()
}

impl LogEvent {
    pub fn is_delete(&self) -> bool {
        self.change == "delete"
    }

    pub fn to_revision(&self) -> Result<Revision, casement_text::Error> {
        Ok(Revision {
            doc_id: self.doc_id.clone(),
            revision: self.revision,
            title: self.title.clone(),
            url: self.path.clone(),
            tenant: None,
            format: self.format.parse::<Format>()?,
            content: self.content.clone(),
        })
    }
}

/// A line of the log that is not a valid event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedLine {
    pub line: usize,
    pub reason: String,
}

/// Reads every event of the log, in publish order (`seq`, else file order).
pub fn read(path: &Path) -> std::io::Result<(Vec<LogEvent>, Vec<RejectedLine>)> {
    let file = std::fs::File::open(path)?;
    let reader: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
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
