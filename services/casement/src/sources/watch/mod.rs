//! Watched folders: every Markdown, HTML, text or wikitext file is a document, saving it
//! is a new revision, deleting it deletes the document. Folders are scanned every
//! `poll_ms` (a size or time change, then a content hash, says a file changed).
//!
//! A file's revision is its modification time in seconds, or one more than its last
//! revision when that is not newer (fast saves, a file restored with an old time), so
//! revisions only grow. What was sent is kept in `<data_dir>/watch.json`; at start every
//! known document is sent again at its recorded revision (the store plans nothing for a
//! revision it already holds, and finishes one that was cut off), then changes made
//! while the service was stopped are picked up like any other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use casement_events::{NativeEvent, NativeType};

use casement_pipeline::SourceId;

mod files;
mod state;

use files::scan;
pub use files::{doc_id, format_of, title_of};
pub use state::adopt;
use state::{Entry, STATE_FILE, now_secs};

use super::{Feeder, read_state, write_state};
use crate::config::WatchConfig;

#[derive(Debug)]
pub struct Watcher {
    config: WatchConfig,
    state_path: PathBuf,
    state: BTreeMap<String, Entry>,
    feeder: Feeder,
}

impl Watcher {
    pub fn new(config: WatchConfig, data_dir: &Path, feeder: Feeder) -> Self {
        let state_path = data_dir.join(STATE_FILE);
        let state = read_state(&state_path);
        Self {
            config,
            state_path,
            state,
            feeder,
        }
    }

    /// Sends every known document again (marked as resends: not news), then scans every
    /// `poll_ms` until the pipeline stops.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let mut known = Vec::new();
        for (doc_id, entry) in &self.state {
            if entry.deleted {
                known.push((doc_id.clone(), entry.clone(), None));
            } else if let Some(format) = format_of(&entry.path)
                && let Ok(content) = tokio::fs::read_to_string(&entry.path).await
                && xxhash_rust::xxh3::xxh3_64(content.as_bytes()) == entry.hash
            {
                known.push((doc_id.clone(), entry.clone(), Some((format, content))));
            }
        }
        for (doc_id, entry, file) in known {
            match file {
                None => self.send_delete(&doc_id, entry.revision, true).await?,
                Some((format, content)) => {
                    let revision = entry.revision;
                    self.send_upsert(&doc_id, &entry.path, format, content, revision, true)
                        .await?;
                }
            }
        }
        let mut tick = tokio::time::interval(Duration::from_millis(self.config.poll_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.poll().await?;
        }
    }

    /// One scan: sends what changed since the last one; returns how many events.
    pub async fn poll(&mut self) -> anyhow::Result<usize> {
        let (mut sent, mut dirty) = (0, false);
        let (roots, prefix) = (self.config.dirs.clone(), self.config.doc_id_prefix.clone());
        let found = tokio::task::spawn_blocking(move || scan(&roots, &prefix)).await?;
        let mut seen = std::collections::BTreeSet::new();
        for file in found {
            if !seen.insert(file.doc_id.clone()) {
                continue; // The same document id from two folders: the first one wins.
            }
            let known = self.state.get(&file.doc_id).cloned();
            if let Some(entry) = &known
                && !entry.deleted
                && entry.mtime_ns == file.mtime_ns
                && entry.len == file.len
            {
                continue;
            }
            let Ok(content) = tokio::fs::read_to_string(&file.path).await else {
                tracing::warn!(path = %file.path.display(), "skipping a file that is not UTF-8 text");
                continue;
            };
            let hash = xxhash_rust::xxh3::xxh3_64(content.as_bytes());
            let mtime_secs = (file.mtime_ns / 1_000_000_000) as u64;
            let unchanged = known.as_ref().is_some_and(|e| !e.deleted && e.hash == hash);
            let revision = match &known {
                Some(entry) if unchanged => entry.revision,
                Some(entry) => mtime_secs.max(entry.revision + 1),
                None => mtime_secs.max(1),
            };
            self.state.insert(
                file.doc_id.clone(),
                Entry {
                    path: file.path.clone(),
                    revision,
                    hash,
                    deleted: false,
                    mtime_ns: file.mtime_ns,
                    len: file.len,
                },
            );
            dirty = true;
            if !unchanged {
                tracing::info!(doc_id = %file.doc_id, revision, "file saved: indexing the new revision");
                self.send_upsert(
                    &file.doc_id,
                    &file.path,
                    file.format,
                    content,
                    revision,
                    false,
                )
                .await?;
                sent += 1;
            }
        }
        let gone: Vec<String> = self
            .state
            .iter()
            .filter(|(id, e)| !e.deleted && !seen.contains(*id))
            .map(|(id, _)| id.clone())
            .collect();
        for doc_id in gone {
            let Some(entry) = self.state.get_mut(&doc_id) else {
                continue;
            };
            entry.deleted = true;
            entry.revision = now_secs().max(entry.revision + 1);
            let revision = entry.revision;
            dirty = true;
            tracing::info!(%doc_id, revision, "file removed: deleting the document");
            self.send_delete(&doc_id, revision, false).await?;
            sent += 1;
        }
        // Once per scan, not per file. A crash before it only means the files are found
        // changed again at start and sent again (at the same revision for an upsert,
        // which the store re-plans idempotently).
        if dirty {
            self.save();
        }
        Ok(sent)
    }

    fn save(&self) {
        if let Err(error) = write_state(&self.state_path, &self.state) {
            tracing::warn!(%error, path = %self.state_path.display(), "cannot save the watch state");
        }
    }

    async fn send_upsert(
        &self,
        doc_id: &str,
        path: &Path,
        format: &str,
        content: String,
        revision: u64,
        resend: bool,
    ) -> anyhow::Result<()> {
        let event = NativeEvent {
            kind: NativeType::Upsert,
            doc_id: doc_id.to_owned(),
            revision,
            title: Some(title_of(path, &content)),
            format: Some(format.to_owned()),
            content: Some(content),
            tenant: None,
            url: Some(path.display().to_string()),
            metadata: Default::default(),
            event_time: None,
        };
        self.send(event, resend).await
    }

    async fn send_delete(&self, doc_id: &str, revision: u64, resend: bool) -> anyhow::Result<()> {
        self.send(NativeEvent::delete(doc_id, revision), resend)
            .await
    }

    async fn send(&self, event: NativeEvent, resend: bool) -> anyhow::Result<()> {
        self.feeder
            .send_native(SourceId::Watch, event, resend)
            .await
            .map(|_| ())
    }
}
