//! Compaction of the write-ahead log (see ARCHITECTURE.md, "Known limit of Qdrant Edge
//! 0.7.2, and the compaction that bounds it").

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qdrant_edge::EdgeShard;

use super::{EdgeStore, Inner, blocking, lock_directory, read};
use crate::error::{Error, Result};
use crate::{CompactionStats, DiskUsage};

impl EdgeStore {
    /// Compacts the write-ahead log of the store at `path` while no process has it open
    /// (its lock is taken, so a running service makes this fail with the reason: it
    /// compacts by itself). Returns the bytes on disk before and after.
    pub fn compact_closed(path: &Path) -> Result<(DiskUsage, DiskUsage)> {
        let open_error = |message: String| Error::Open {
            path: path.to_owned(),
            message,
        };
        if !path.join("edge_config.json").exists() {
            return Err(open_error(
                "no embedded store here (no edge_config.json)".into(),
            ));
        }
        let _lock = lock_directory(path).map_err(open_error)?;
        let before = read::disk_usage_of(path);
        truncate_wal(path)
            .map_err(|e| open_error(format!("truncating the write-ahead log: {e}")))?;
        Ok((before, read::disk_usage_of(path)))
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

impl Inner {
    fn compact(&self) -> Result<u64> {
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let mut slot = self.shard.write().unwrap_or_else(|e| e.into_inner());
        // Dropping the engine flushes it and releases its files.
        drop(slot.take());
        let truncated = truncate_wal(&self.path).map_err(|e| Error::Open {
            path: self.path.clone(),
            message: format!("truncating the write-ahead log: {e}"),
        });
        let reopened = EdgeShard::load(&self.path, None).map_err(|e| Error::Open {
            path: self.path.clone(),
            message: format!("reopening after a compaction: {e}"),
        })?;
        *slot = Some(reopened);
        drop(slot);
        let reclaimed = truncated?;
        self.compaction
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(reclaimed, started.elapsed());
        Ok(reclaimed)
    }

    /// Compacts in the background when the write-ahead log has outgrown
    /// `compact_wal_bytes` and the segments; checked at most every 10 s.
    pub(super) fn compact_if_due(self: &Arc<Self>) {
        if self.compact_wal_bytes == 0 {
            return;
        }
        {
            let mut checked = self.wal_checked.lock().unwrap_or_else(|e| e.into_inner());
            if checked.elapsed() < Duration::from_secs(10) {
                return;
            }
            *checked = Instant::now();
        }
        let usage = read::disk_usage_of(&self.path);
        if usage.wal > self.compact_wal_bytes && usage.wal > usage.segments {
            let inner = self.clone();
            std::thread::spawn(move || {
                if let Err(error) = inner.compact() {
                    eprintln!("casement-store: compacting the write-ahead log failed: {error}");
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
    use std::os::unix::fs::MetadataExt;
    let wal = dir.join("wal");
    let entries = match std::fs::read_dir(&wal) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
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
