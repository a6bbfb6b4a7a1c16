//! Which index of the data directory is served: the embedded store's equivalent of a
//! Qdrant collection alias. `<data_dir>/serving.json` names the index directory every
//! command opens (`index` when the file is absent), the one kept for a rollback, and a
//! migration under way (so that a killed one resumes). It is replaced atomically (written
//! aside, synced, renamed), so a reader sees the old pointer or the new one, never half.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::{Deserialize, Serialize};

pub const FILE: &str = "serving.json";
/// The index directory of a data directory that never migrated.
pub const FIRST: &str = "index";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Serving {
    /// The served index: a directory of the data directory (`index`, `index.2`, ...).
    pub index: String,
    /// The index served before the last swap, kept for `casement migrate --rollback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Previous>,
    /// A migration started and not swapped yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<Underway>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Previous {
    pub index: String,
    /// Unix seconds after which `casement migrate` deletes it.
    pub keep_until: u64,
    /// The `--set` pairs that turn the serving configuration into the one it was built
    /// with (what a rollback brings it up to date with).
    #[serde(default)]
    pub restore: Vec<String>,
    /// The pairs that built the served index over this one's configuration: what the
    /// configuration file must set to describe the served index. A rollback whose file
    /// still describes this index (an online migration's pairs never set) reads the served
    /// one's configuration from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Underway {
    /// The index being built.
    pub target: String,
    /// The settings it is built with (`--set` pairs, as given).
    pub set: Vec<String>,
}

impl Default for Serving {
    fn default() -> Self {
        Self {
            index: FIRST.to_owned(),
            previous: None,
            migration: None,
        }
    }
}

/// Index directory names: `index` or `index.<n>`, nothing that leaves the data directory.
pub fn valid_name(name: &str) -> bool {
    name == FIRST
        || name
            .strip_prefix("index.")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Serving {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(FILE)
    }

    /// The pointer of `data_dir` (the first index when there is none); a malformed one is
    /// an error, never a silent fallback to another index.
    pub fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let path = Self::path(data_dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let serving: Self = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a serving pointer", path.display()))?;
        let names = std::iter::once(&serving.index)
            .chain(serving.previous.as_ref().map(|p| &p.index))
            .chain(serving.migration.as_ref().map(|m| &m.target));
        for name in names {
            anyhow::ensure!(
                valid_name(name),
                "{}: `{name}` is not an index directory name (index or index.<n>)",
                path.display()
            );
        }
        Ok(serving)
    }

    /// The directory of index `name`.
    pub fn dir(data_dir: &Path, name: &str) -> PathBuf {
        data_dir.join(name)
    }

    /// Replaces the pointer atomically and durably.
    pub fn save(&self, data_dir: &Path) -> anyhow::Result<()> {
        let path = Self::path(data_dir);
        let aside = data_dir.join(format!("{FILE}.new"));
        let text = serde_json::to_string_pretty(self)? + "\n";
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::File::create(&aside)?;
            std::io::Write::write_all(&mut file, text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&aside, &path)?;
            std::fs::File::open(data_dir)?.sync_all()
        };
        write().with_context(|| format!("writing {}", path.display()))
    }

    /// A name for a new index: `index.<n>`, n above every index the directory holds.
    pub fn next_name(&self, data_dir: &Path) -> String {
        let mut highest = 1;
        if let Ok(entries) = std::fs::read_dir(data_dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(n) = name
                    .strip_prefix("index.")
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    highest = highest.max(n);
                }
            }
        }
        format!("index.{}", highest + 1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn absent_is_the_first_index_and_names_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Serving::load(dir.path()).unwrap().index, "index");
        let serving = Serving {
            index: "index.3".into(),
            previous: Some(Previous {
                index: "index".into(),
                keep_until: 7,
                restore: vec!["embedder.precision=fp32".into()],
                applied: Vec::new(),
            }),
            migration: None,
        };
        serving.save(dir.path()).unwrap();
        assert_eq!(Serving::load(dir.path()).unwrap(), serving);
        std::fs::create_dir(dir.path().join("index.7")).unwrap();
        assert_eq!(serving.next_name(dir.path()), "index.8");

        std::fs::write(Serving::path(dir.path()), r#"{"index": "../elsewhere"}"#).unwrap();
        let error = Serving::load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not an index directory name"), "{error}");
        std::fs::write(Serving::path(dir.path()), "{").unwrap();
        assert!(Serving::load(dir.path()).is_err());
    }
}
