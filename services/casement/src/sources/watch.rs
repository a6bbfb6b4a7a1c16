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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use casement_events::{NativeEvent, NativeType};
use serde::{Deserialize, Serialize};

use casement_pipeline::SourceId;

use super::{Feeder, read_state, write_state};

/// What was sent for each document, under the data directory.
const STATE_FILE: &str = "watch.json";
use crate::config::WatchConfig;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    path: PathBuf,
    revision: u64,
    hash: u64,
    deleted: bool,
    #[serde(default)]
    mtime_ns: u128,
    #[serde(default)]
    len: u64,
}

/// A file found by a scan.
#[derive(Debug)]
struct Found {
    doc_id: String,
    path: PathBuf,
    format: &'static str,
    mtime_ns: u128,
    len: u64,
}

#[derive(Debug)]
pub struct Watcher {
    config: WatchConfig,
    state_path: PathBuf,
    state: BTreeMap<String, Entry>,
    feeder: Feeder,
}

/// The format of a file by its extension; other files are not documents.
pub fn format_of(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    if name.starts_with('.') || name.ends_with('~') {
        return None;
    }
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "md" | "markdown" => Some("markdown"),
        "html" | "htm" => Some("html"),
        "txt" | "text" => Some("text"),
        "wiki" | "mediawiki" => Some("wikitext"),
        _ => None,
    }
}

/// `prefix` + the path under `root` without its extension, with `/` separators.
pub fn doc_id(prefix: &str, root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?.with_extension("");
    let parts: Vec<&str> = relative
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    Some(format!("{prefix}{}", parts.join("/")))
}

/// The title: a YAML front-matter `title:`, else the first Markdown `# ` heading or HTML
/// `<title>`, else the file name.
pub fn title_of(path: &Path, content: &str) -> String {
    let front_matter = content
        .strip_prefix("---\n")
        .and_then(|rest| rest.split("\n---").next())
        .and_then(|block| block.lines().find_map(|l| l.strip_prefix("title:")));
    let heading = || content.lines().find_map(|l| l.strip_prefix("# "));
    let html = || {
        let start = content.find("<title>")? + "<title>".len();
        let end = content[start..].find("</title>")?;
        Some(&content[start..start + end])
    };
    front_matter
        .or_else(heading)
        .or_else(html)
        .map(|t| t.trim().trim_matches('"').to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| {
            path.file_stem().map_or_else(String::new, |s| {
                s.to_string_lossy().replace(['-', '_'], " ")
            })
        })
}

/// Every document file under `roots` (recursively, hidden entries skipped).
fn scan(roots: &[PathBuf], prefix: &str) -> Vec<Found> {
    let mut found = Vec::new();
    for root in roots {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let hidden = entry.file_name().to_string_lossy().starts_with('.');
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_dir() && !hidden {
                    stack.push(path);
                } else if let (true, Some(format), Some(doc_id)) = (
                    meta.is_file(),
                    format_of(&path),
                    doc_id(prefix, root, &path),
                ) {
                    let mtime_ns = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_nanos());
                    found.push(Found {
                        doc_id,
                        path,
                        format,
                        mtime_ns,
                        len: meta.len(),
                    });
                }
            }
        }
    }
    found.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
    found
}

fn now_secs() -> u64 {
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
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        state.insert(
            doc_id.clone(),
            Entry {
                path: path.clone(),
                revision: *revision,
                hash: xxhash_rust::xxh3::xxh3_64(&content),
                deleted: false,
                mtime_ns,
                len: meta.len(),
            },
        );
    }
    write_state(&state_path, &state)?;
    Ok(())
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
        let event = NativeEvent {
            kind: NativeType::Delete,
            doc_id: doc_id.to_owned(),
            revision,
            title: None,
            format: None,
            content: None,
            tenant: None,
            url: None,
            metadata: Default::default(),
            event_time: None,
        };
        self.send(event, resend).await
    }

    async fn send(&self, event: NativeEvent, resend: bool) -> anyhow::Result<()> {
        self.feeder
            .send_native(SourceId::Watch, event, resend)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_ids_formats_and_titles() {
        let root = Path::new("/docs");
        assert_eq!(
            doc_id("kb:", root, Path::new("/docs/a/b-c.md")).as_deref(),
            Some("kb:a/b-c")
        );
        assert_eq!(format_of(Path::new("x.MD")), Some("markdown"));
        assert_eq!(format_of(Path::new("x.htm")), Some("html"));
        assert_eq!(format_of(Path::new(".x.md")), None);
        assert_eq!(format_of(Path::new("x.md~")), None);
        assert_eq!(format_of(Path::new("x.png")), None);
        let p = Path::new("/docs/changing-your-name.md");
        assert_eq!(
            title_of(p, "---\ntitle: Changing your name\n---\nText."),
            "Changing your name"
        );
        assert_eq!(title_of(p, "Intro.\n# Heading\n"), "Heading");
        assert_eq!(title_of(p, "<html><title> Page </title>"), "Page");
        assert_eq!(title_of(p, "no title"), "changing your name");
    }
}
