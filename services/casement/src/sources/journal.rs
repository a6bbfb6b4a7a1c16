//! The webhook's journal of accepted events: what keeps a 202 a promise.
//!
//! A request whose event is still in the pipeline after `sources.webhook.wait_ms` gets 202
//! only once its body is in the journal: one file per event in `<data_dir>/accepted/`,
//! written to a temporary name, synced, renamed and the folder synced. The file is removed
//! when the event's outcome is durable (applied, deleted, stale or dead-lettered). At start,
//! every file still there is sent through the pipeline again, in acceptance order, and
//! removed the same way; a repeat of an event already applied is stale (revisions are
//! fenced), so replaying is safe.
//!
//! The journal is bounded by `sources.webhook.journal_max_bytes`: when an event does not
//! fit, the request gets 503 with `Retry-After` instead of a promise that could not be kept
//! (the event may still be applied; posting it again is safe). It keeps the store's disk
//! reserve too (`store.edge.min_free_bytes`): an event that would leave less free is not
//! written (503), so accepting events never fills the disk the index needs, and a write
//! that fails leaves no temporary file behind.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use anyhow::Context;
use axum::body::Bytes;
use casement_pipeline::{Finished, SourceId, now_ms};
use tokio::sync::oneshot;

use super::Feeder;

/// Where the journal lives under the data directory.
pub const JOURNAL_DIR: &str = "accepted";

#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    max_bytes: u64,
    /// Free bytes the disk keeps: an event that would leave less is not written.
    min_free_bytes: u64,
    used: AtomicU64,
}

/// One kept event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    path: PathBuf,
    bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error(
        "the journal of accepted events is full ({used} of sources.webhook.journal_max_bytes = {max} bytes)"
    )]
    Full { used: u64, max: u64 },
    #[error(
        "the disk holding the journal of accepted events has {free} bytes free, within the \
         reserve store.edge.min_free_bytes = {reserve}"
    )]
    LowDisk { free: u64, reserve: u64 },
    #[error("cannot write the journal of accepted events: {0:#}")]
    Io(#[from] anyhow::Error),
}

impl Journal {
    /// Opens (creates) the journal in `data_dir` and lists the events it still holds, in
    /// acceptance order.
    pub fn open(
        data_dir: &Path,
        max_bytes: u64,
        min_free_bytes: u64,
    ) -> anyhow::Result<(Self, Vec<Entry>)> {
        let dir = data_dir.join(JOURNAL_DIR);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut entries = Vec::new();
        for item in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let item = item?;
            let path = item.path();
            if path.extension().is_some_and(|e| e == "event") {
                entries.push(Entry {
                    bytes: item.metadata()?.len(),
                    path,
                });
            } else if path.extension().is_some_and(|e| e == "tmp") {
                // Never renamed: its request was not answered 202.
                let _ = std::fs::remove_file(&path);
            }
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let used = entries.iter().map(|e| e.bytes).sum();
        let journal = Self {
            dir,
            max_bytes,
            min_free_bytes,
            used: AtomicU64::new(used),
        };
        Ok((journal, entries))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes of the events it holds.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Keeps `body` durably (synced), or says why not.
    pub async fn keep(&self, offset: i64, body: Bytes) -> Result<Entry, KeepError> {
        let bytes = body.len() as u64;
        let reserved = self.used.fetch_add(bytes, Ordering::Relaxed);
        if reserved + bytes > self.max_bytes {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(KeepError::Full {
                used: reserved,
                max: self.max_bytes,
            });
        }
        if self.min_free_bytes > 0
            && let Ok(free) = fs4::available_space(&self.dir)
            && free < self.min_free_bytes.saturating_add(bytes)
        {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(KeepError::LowDisk {
                free,
                reserve: self.min_free_bytes,
            });
        }
        // Acceptance order across restarts: the time, then the run's offset.
        let name = format!("{:013}-{offset:010}", now_ms());
        let path = self.dir.join(format!("{name}.event"));
        let tmp = self.dir.join(format!("{name}.tmp"));
        let (dir, target) = (self.dir.clone(), path.clone());
        let written = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            use std::io::Write;
            let written = (|| -> std::io::Result<()> {
                let mut file = std::fs::File::create(&tmp)?;
                file.write_all(&body)?;
                file.sync_all()?;
                std::fs::rename(&tmp, &target)?;
                std::fs::File::open(&dir)?.sync_all()
            })();
            if written.is_err() {
                // A full disk stays full while a half-written temporary remains.
                let _ = std::fs::remove_file(&tmp);
            }
            Ok(written?)
        })
        .await
        .map_err(anyhow::Error::from)
        .and_then(|r| r);
        if let Err(error) = written {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(KeepError::Io(error));
        }
        Ok(Entry { path, bytes })
    }

    /// Removes an event whose outcome is durable.
    pub fn forget(&self, entry: &Entry) {
        match std::fs::remove_file(&entry.path) {
            Ok(()) => {
                self.used.fetch_sub(entry.bytes, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(path = %entry.path.display(), %error,
                    "cannot remove an applied event from the journal (it will be replayed, safely)");
            }
        }
    }

    /// Removes `entry` once `outcome` arrives; keeps it when the pipeline stops first.
    pub fn forget_when_done(
        self: &Arc<Self>,
        entry: Entry,
        outcome: oneshot::Receiver<Finished>,
    ) -> tokio::task::JoinHandle<()> {
        let journal = self.clone();
        tokio::spawn(async move {
            if outcome.await.is_ok() {
                journal.forget(&entry);
            }
        })
    }

    /// Sends the events a previous run accepted but did not finish, in order; each is
    /// removed when its outcome is durable.
    /// `catching_up` counts down as each is applied (readiness waits for it); the caller
    /// added `entries.len()` to it.
    pub async fn replay(
        self: Arc<Self>,
        feeder: Feeder,
        entries: Vec<Entry>,
        catching_up: Arc<AtomicUsize>,
    ) -> anyhow::Result<()> {
        if !entries.is_empty() {
            tracing::info!(events = entries.len(), dir = %self.dir.display(),
                "replaying events accepted (202) but not finished before the last stop");
        }
        for entry in entries {
            let body = match tokio::fs::read(&entry.path).await {
                Ok(body) => body,
                Err(error) => {
                    tracing::warn!(path = %entry.path.display(), %error, "cannot read a journaled event");
                    catching_up.fetch_sub(1, Ordering::SeqCst);
                    continue;
                }
            };
            let (_, outcome) = feeder
                .send_waiting(SourceId::Webhook, body, true, None)
                .await?;
            let (journal, catching_up) = (self.clone(), catching_up.clone());
            tokio::spawn(async move {
                if outcome.await.is_ok() {
                    journal.forget(&entry);
                }
                catching_up.fetch_sub(1, Ordering::SeqCst);
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn files(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// An event that would eat into the disk's reserve is not written (503), and nothing
    /// is left behind; with room, it is kept.
    #[tokio::test]
    async fn the_journal_keeps_the_disk_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let free = fs4::available_space(dir.path()).unwrap();
        let (journal, _) = Journal::open(dir.path(), 1 << 20, free + (1 << 30)).unwrap();
        let refused = journal
            .keep(1, Bytes::from_static(b"{\"type\": \"delete\"}"))
            .await
            .unwrap_err();
        assert!(matches!(refused, KeepError::LowDisk { .. }), "{refused}");
        assert!(refused.to_string().contains("min_free_bytes"), "{refused}");
        assert_eq!(journal.used(), 0);
        assert!(
            files(journal.dir()).is_empty(),
            "{:?}",
            files(journal.dir())
        );
        let (journal, _) = Journal::open(dir.path(), 1 << 20, 1).unwrap();
        journal.keep(2, Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(files(journal.dir()).len(), 1);
    }
}
