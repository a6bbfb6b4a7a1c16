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
            let mut from = std::fs::File::open(&path)?;
            let mut to = std::fs::File::create(&target)?;
            bytes += copy_sparse(&mut from, &mut to)?;
            to.sync_all()?;
        }
    }
    std::fs::File::open(dest)?.sync_all()?;
    Ok(bytes)
}

/// Copies `from` into `to` (both at their start) keeping holes: 4 KiB blocks of zeros are
/// skipped over, not written, and the length is set at the end. The engine's files are
/// preallocated and mostly empty: a plain copy makes a 2 MB index a 150 MB snapshot.
/// Returns the length copied.
pub fn copy_sparse(from: &mut std::fs::File, to: &mut std::fs::File) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom, Write};
    const BLOCK: usize = 4096;
    let mut buffer = vec![0u8; 64 * BLOCK];
    let mut length = 0u64;
    loop {
        // Fill the buffer (a short read is not the end).
        let mut filled = 0;
        while filled < buffer.len() {
            match from.read(&mut buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if filled == 0 {
            break;
        }
        for block in buffer[..filled].chunks(BLOCK) {
            if block.iter().all(|&b| b == 0) {
                to.seek(SeekFrom::Current(block.len() as i64))?;
            } else {
                to.write_all(block)?;
            }
        }
        length += filled as u64;
        if filled < buffer.len() {
            break;
        }
    }
    to.set_len(length)?;
    Ok(length)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// A sparse file stays sparse, and its bytes are the same.
    #[test]
    fn a_sparse_copy_keeps_holes_and_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("a"), dir.path().join("b"));
        let mut file = std::fs::File::create(&src).unwrap();
        file.write_all(b"head").unwrap();
        file.seek(SeekFrom::Start(32 << 20)).unwrap();
        file.write_all(b"tail").unwrap();
        drop(file);
        let copied = copy_sparse(
            &mut std::fs::File::open(&src).unwrap(),
            &mut std::fs::File::create(&dst).unwrap(),
        )
        .unwrap();
        assert_eq!(copied, (32 << 20) + 4);
        assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
        let allocated = std::fs::metadata(&dst).unwrap().blocks() * 512;
        assert!(
            allocated < 1 << 20,
            "{allocated} bytes allocated for 32 MiB of holes"
        );
        // Ending in a hole keeps the length.
        let mut file = std::fs::File::create(&src).unwrap();
        file.write_all(b"x").unwrap();
        file.set_len(1 << 20).unwrap();
        drop(file);
        copy_sparse(
            &mut std::fs::File::open(&src).unwrap(),
            &mut std::fs::File::create(&dst).unwrap(),
        )
        .unwrap();
        assert_eq!(std::fs::metadata(&dst).unwrap().len(), 1 << 20);
    }
}
