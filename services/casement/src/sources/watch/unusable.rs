//! Why the watcher does not read an entry of a watched folder: what it logs once (again
//! when the entry changes).

use std::fmt;
use std::path::PathBuf;

/// Why a document file of a watched folder is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Unusable {
    /// A FIFO, socket, device or directory (itself or behind a symlink): opening a FIFO
    /// blocks until a writer comes, reading a device may never end.
    NotRegular(&'static str),
    /// A symlink whose target is outside the watched folder.
    OutsideFolder(PathBuf),
    /// A symlink to a folder: not entered, wherever it points (inside the watched folder
    /// its files are found under their own path; outside, they are not the folder's).
    SymlinkedFolder {
        target: PathBuf,
        inside: bool,
    },
    /// A document-named symlink to nothing: no document (one indexed before is deleted).
    Dangling(PathBuf),
    TooLarge {
        len: u64,
        limit: usize,
    },
    NotUtf8,
    /// The file or folder cannot be opened or read (permission denied, a symlink loop, …).
    Io(String),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRegular(kind) => write!(f, "not a regular file ({kind})"),
            Self::OutsideFolder(target) => write!(
                f,
                "a symlink to {}, outside the watched folder",
                target.display()
            ),
            Self::SymlinkedFolder {
                target,
                inside: true,
            } => write!(
                f,
                "a symlink to the folder {}, inside the watched folder: not entered (its files are indexed under their own path)",
                target.display()
            ),
            Self::SymlinkedFolder {
                target,
                inside: false,
            } => write!(
                f,
                "a symlink to the folder {}, outside the watched folder: not entered",
                target.display()
            ),
            Self::Dangling(target) => write!(
                f,
                "a symlink to {}, which does not exist: no document",
                target.display()
            ),
            Self::TooLarge { len, limit } => write!(
                f,
                "too large: {len} bytes, over the event size limit of {limit}"
            ),
            Self::NotUtf8 => f.write_str("not UTF-8 text"),
            Self::Io(error) => f.write_str(error),
        }
    }
}

impl From<std::io::Error> for Unusable {
    fn from(error: std::io::Error) -> Self {
        Self::Io(error.to_string())
    }
}
