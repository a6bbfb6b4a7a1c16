//! Consistent copies of a closed embedded store (`casement snapshot` / `casement restore`):
//! its lock is held while it is copied, so no process writes it meanwhile.
//!
//! A copy holds the segments and the write-ahead log's segments from the newest closed one
//! on (what compaction keeps: the engine numbers new operations after it), never the lock.
//! Every file is fsynced, then its directory, so a snapshot that was reported done survives
//! a power cut.

use std::path::{Path, PathBuf};

use super::compact::closed_segments;
use super::{EdgeStore, lock_directory};
use crate::error::{Error, Result};

/// The lock file, which a copy never takes along.
const LOCK_FILE: &str = "casement.lock";

impl EdgeStore {
    /// Bytes allocated on disk by the store directory at `path` (open or not): the
    /// write-ahead log, and the rest.
    pub fn disk_usage(path: &Path) -> crate::DiskUsage {
        super::read::disk_usage_of(path)
    }

    /// Takes the lock of the store at `path`, which no process may have open (a running
    /// service makes this fail with the reason). While the returned value lives, no
    /// process opens the store.
    pub fn lock_closed(path: &Path) -> Result<ClosedStore> {
        let open_error = |message: String| Error::Open {
            path: path.to_owned(),
            message,
        };
        if !path.join("edge_config.json").exists() {
            return Err(open_error(
                "no embedded store here (no edge_config.json)".into(),
            ));
        }
        let lock = lock_directory(path).map_err(open_error)?;
        Ok(ClosedStore {
            path: path.to_owned(),
            _lock: lock,
        })
    }
}

/// A store no process has open, locked ([`EdgeStore::lock_closed`]).
#[derive(Debug)]
pub struct ClosedStore {
    path: PathBuf,
    _lock: std::fs::File,
}

impl ClosedStore {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies the store into `dest` (a new directory). Returns the bytes copied.
    pub fn snapshot(&self, dest: &Path) -> Result<u64> {
        copy_store(&self.path, dest).map_err(|e| copy_error(dest, &e))
    }
}

fn copy_error(dest: &Path, error: &std::io::Error) -> Error {
    Error::Backend {
        operation: "snapshot",
        message: format!("copying the store to {}: {error}", dest.display()),
    }
}

/// Copies the store directory `src` into `dest` (created; it must not exist), leaving out
/// the lock and the write-ahead log's closed segments but the newest; fsyncs everything.
pub(crate) fn copy_store(src: &Path, dest: &Path) -> std::io::Result<u64> {
    let mut obsolete = closed_segments(&src.join("wal"))?;
    obsolete.pop();
    let obsolete: Vec<_> = obsolete.into_iter().map(|(_, path, _)| path).collect();
    copy_tree(src, dest, &|path: &Path| {
        path.file_name().is_some_and(|name| name == LOCK_FILE) || obsolete.iter().any(|o| o == path)
    })
}

/// Copies a directory tree, skipping what `skip` names; fsyncs files and directories.
pub fn copy_tree(src: &Path, dest: &Path, skip: &dyn Fn(&Path) -> bool) -> std::io::Result<u64> {
    std::fs::create_dir(dest)?;
    let mut bytes = 0;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let path = entry.path();
        if skip(&path) {
            continue;
        }
        let target = dest.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            bytes += copy_tree(&path, &target, skip)?;
        } else if kind.is_file() {
            bytes += std::fs::copy(&path, &target)?;
            std::fs::File::open(&target)?.sync_all()?;
        }
    }
    std::fs::File::open(dest)?.sync_all()?;
    Ok(bytes)
}
