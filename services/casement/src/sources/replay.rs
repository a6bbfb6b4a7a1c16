//! Replay: revision logs (the shape of `../shared/data/revisions`: create, update, rename,
//! delete; JSONL, optionally `.gz`; a directory means every log in it, by name) sent to
//! the pipeline as events, optionally paced. The same conversion as the Kafka indexer's
//! `replay` command (`casement_events::revision_log::LogEvent::to_native`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use casement_events::revision_log::{self, LogEvent};
use casement_pipeline::SourceId;

use super::Feeder;

/// The events of every input, in order, and what identifies the inputs.
#[derive(Debug, Default)]
pub struct Replay {
    pub events: Vec<LogEvent>,
    /// Paths and sizes: a changed input replays from the start.
    pub identity: String,
    pub files: Vec<PathBuf>,
}

pub fn is_log(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")
}

/// The log files under `path`: the file itself, or a directory's logs sorted by name.
pub fn log_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("replay input {} cannot be read", path.display()))?;
    if meta.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading directory {}", path.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && is_log(p))
        .collect();
    files.sort();
    Ok(files)
}

/// Reads the logs; a line that is not a revision event is reported and skipped.
pub fn read(paths: &[PathBuf]) -> anyhow::Result<Replay> {
    let mut replay = Replay::default();
    for path in paths {
        for file in log_files(path)? {
            let (events, rejected) = revision_log::read(&file)
                .with_context(|| format!("reading revision log {}", file.display()))?;
            for line in rejected {
                tracing::warn!(file = %file.display(), line = line.line, reason = %line.reason,
                    "skipping a line that is not a revision event");
            }
            let size = std::fs::metadata(&file).map_or(0, |m| m.len());
            replay
                .identity
                .push_str(&format!("{}:{size};", file.display()));
            replay.events.extend(events);
            replay.files.push(file);
        }
    }
    Ok(replay)
}

/// Sends `events[start..]` (offset = index in `events`), waiting `pace` between events.
pub async fn run(
    feeder: Feeder,
    events: Vec<LogEvent>,
    start: usize,
    pace: Option<Duration>,
) -> anyhow::Result<()> {
    for event in events.iter().skip(start) {
        feeder
            .send_native(SourceId::Replay, event.to_native(), false)
            .await?;
        if let Some(pace) = pace {
            tokio::time::sleep(pace).await;
        }
    }
    Ok(())
}
