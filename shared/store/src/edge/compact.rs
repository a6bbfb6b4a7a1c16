//! Compaction of the write-ahead log (see ARCHITECTURE.md, "Known limit of Qdrant Edge
//! 0.7.2, and the compaction that bounds it").

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qdrant_edge::EdgeShard;

use super::snapshot::ClosedStore;
use super::write::panic_message;
use super::{EdgeStore, Inner, blocking, read};
use crate::error::{Error, Result};
use crate::{CompactionStats, DiskUsage};

impl EdgeStore {
    /// Compacts the write-ahead log of the store at `path` while no process has it open
    /// (its lock is taken, so a running service makes this fail with the reason: it
    /// compacts by itself). Returns the bytes on disk before and after.
    pub fn compact_closed(path: &Path) -> Result<(DiskUsage, DiskUsage)> {
        EdgeStore::lock_closed(path)?.compact()
    }

    /// Gives back the disk of the write-ahead log: waits for an index build to end and
    /// for the writes in progress, flushes, closes the engine, drops every closed log
    /// segment but the newest and opens it again. Searches wait for the reopen (no error,
    /// no missing point); a kill at any moment leaves a store that opens whole (the log is
    /// never replayed, and the segments were flushed). Returns the bytes reclaimed.
    pub async fn compact(&self) -> Result<u64> {
        let inner = self.inner.clone();
        blocking(move || inner.compact()).await
    }
}

impl ClosedStore {
    /// Compacts the write-ahead log of the locked store; returns the bytes on disk before
    /// and after.
    pub fn compact(&self) -> Result<(DiskUsage, DiskUsage)> {
        let before = read::disk_usage_of(self.path());
        truncate_wal(self.path()).map_err(|e| Error::Open {
            path: self.path().to_owned(),
            message: format!("truncating the write-ahead log: {e}"),
        })?;
        Ok((before, read::disk_usage_of(self.path())))
    }
}

impl Inner {
    fn compact(&self) -> Result<u64> {
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        // Reopening creates a log segment.
        self.check_free_space()?;
        let started = Instant::now();
        tracing::info!(path = %self.path.display(), "compacting the write-ahead log");
        let mut slot = self.shard.write().unwrap_or_else(|e| e.into_inner());
        // Flushed first, where a failure (the engine panics on a full disk) leaves the
        // engine open and the log whole; dropping it then releases its files.
        if let Some(shard) = slot.as_ref() {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shard.flush()))
                .map_err(|panic| Error::backend("compact", panic_message(&panic)))?;
            self.flushed();
        }
        drop(slot.take());
        let truncated = truncate_wal(&self.path).map_err(|e| Error::Open {
            path: self.path.clone(),
            message: format!("truncating the write-ahead log: {e}"),
        });
        // On failure the slot stays empty and the next access tries again (`Inner::shard`).
        let reopened = EdgeShard::load(&self.path, None).map_err(|e| {
            Error::Unavailable(format!(
                "reopening {} after a compaction: {e}",
                self.path.display()
            ))
        })?;
        *slot = Some(reopened);
        drop(slot);
        let reclaimed = truncated?;
        tracing::info!(
            reclaimed_bytes = reclaimed,
            seconds = started.elapsed().as_secs_f64(),
            "write-ahead log compacted"
        );
        self.compaction
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(reclaimed, started.elapsed());
        Ok(reclaimed)
    }

    /// Compacts in the background when the write-ahead log has outgrown
    /// `compact_wal_bytes` and `compact_wal_ratio` times the segments; checked at most
    /// every second (a stream of edits to long documents writes megabytes of log a second).
    pub(super) fn compact_if_due(self: &Arc<Self>) {
        if self.compact_wal_bytes == 0 {
            return;
        }
        {
            let mut checked = self.wal_checked.lock().unwrap_or_else(|e| e.into_inner());
            if checked.elapsed() < Duration::from_secs(1) {
                return;
            }
            *checked = Instant::now();
        }
        let usage = read::disk_usage_of(&self.path);
        if usage.wal > self.compact_wal_bytes
            && usage.wal as f64 > self.compact_wal_ratio * usage.segments as f64
        {
            let inner = self.clone();
            std::thread::spawn(move || {
                if let Err(error) = inner.compact() {
                    tracing::error!(%error, "compacting the write-ahead log failed");
                }
            });
        }
    }

    pub(super) fn compaction_stats(&self) -> CompactionStats {
        *self.compaction.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Deletes the write-ahead log's closed segments but the newest, oldest first (so what
/// stays is contiguous, whenever a kill stops it), and returns the bytes freed. Call only
/// while no engine has the log open.
///
/// Safe because Qdrant Edge 0.7.2 never reads its log back (opening does not replay it;
/// durability is the flushed segments). The newest closed segment stays because the
/// engine numbers new operations after it; with none, it would number them from 0 again,
/// below the versions the segments hold, and skip them.
pub(crate) fn truncate_wal(dir: &Path) -> std::io::Result<u64> {
    let wal = dir.join("wal");
    let mut closed = closed_segments(&wal)?;
    closed.pop();
    let mut freed = 0;
    for (_, path, bytes) in &closed {
        std::fs::remove_file(path)?;
        freed += bytes;
    }
    if freed > 0 {
        std::fs::File::open(&wal)?.sync_all()?;
    }
    Ok(freed)
}

/// The write-ahead log's closed segments in `wal`, oldest first: (first operation, path,
/// bytes on disk). None when there is no log.
pub(crate) fn closed_segments(wal: &Path) -> std::io::Result<Vec<(u64, PathBuf, u64)>> {
    use std::os::unix::fs::MetadataExt;
    let entries = match std::fs::read_dir(wal) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut closed = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(start) = name
            .to_str()
            .and_then(|n| n.strip_prefix("closed-"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        closed.push((start, entry.path(), entry.metadata()?.blocks() * 512));
    }
    closed.sort_by_key(|(start, _, _)| *start);
    Ok(closed)
}
