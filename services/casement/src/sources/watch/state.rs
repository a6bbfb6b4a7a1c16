//! What the watcher has sent, per document, kept in `<data_dir>/watch.json` (written whole
//! or not at all, once per scan), and adopting files indexed by other means (the sample).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::super::{read_state, write_state};

/// What was sent for each document, under the data directory.
pub(super) const STATE_FILE: &str = "watch.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Entry {
    pub path: PathBuf,
    pub revision: u64,
    pub hash: u64,
    pub deleted: bool,
    #[serde(default)]
    pub mtime_ns: u128,
    #[serde(default)]
    pub len: u64,
    /// What the `.access` files above the file said when it was sent
    /// (`access::folder_stamp`; 0: none): a change sends the file again.
    #[serde(default)]
    pub folder_access: u64,
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Records files already indexed at `revision` (the sample's checkout) in the watch state
/// of `data_dir`, so the watcher takes them as known rather than as new saves.
pub fn adopt(data_dir: &Path, files: &[(String, PathBuf, u64)]) -> anyhow::Result<()> {
    let state_path = data_dir.join(STATE_FILE);
    let mut state: BTreeMap<String, Entry> = read_state(&state_path);
    for (doc_id, path, revision) in files {
        let content = std::fs::read(path)?;
        let meta = std::fs::metadata(path)?;
        state.insert(
            doc_id.clone(),
            Entry {
                path: path.clone(),
                revision: *revision,
                hash: xxhash_rust::xxh3::xxh3_64(&content),
                deleted: false,
                mtime_ns: super::files::mtime_ns(&meta),
                len: meta.len(),
                folder_access: 0,
            },
        );
    }
    write_state(&state_path, &state)?;
    Ok(())
}
