//! Watched folders: every Markdown, HTML, text or wikitext file is a document, saving it
//! is a new revision, deleting it deletes the document. The folders are scanned when the
//! file system says something in them changed (inotify through the `notify` crate, the
//! notifications of a burst gathered for [`QUIET`]), or every `poll_ms` where it cannot
//! say (`sources.watch.notify = false`, a network file system, a watch that fails to
//! start: detected and logged); a size or time change, then a content hash, says a file
//! changed.
//!
//! A file's revision is its modification time in seconds, or one more than its last
//! revision when that is not newer (fast saves, a file restored with an old time), so
//! revisions only grow. What was sent is kept in `<data_dir>/watch.json`; at start every
//! known document is sent again at its recorded revision (the store plans nothing for a
//! revision it already holds, and finishes one that was cut off), then changes made
//! while the service was stopped are picked up like any other.
//!
//! A folder is input the service does not control, so:
//! - **Only regular files are opened.** FIFOs, sockets and devices are never opened (a
//!   FIFO's open waits for a writer, `/dev/zero` never ends). A symlink is followed only to
//!   a regular file inside the same watched folder (its `canonicalize`d target); symlinked
//!   folders are not entered. Files are opened non-blocking and checked again once open, so
//!   one swapped for a FIFO after the scan is refused too.
//! - **Reads are bounded.** A file over the size limit ([`WatchConfig::max_file_bytes`]:
//!   `events.max_event_bytes` when built with `CasementConfig::watch`, else the
//!   segmenter's 16 MiB, and a larger event is then dead-lettered by the decoder) is refused
//!   by its size before it is opened, and at most limit + 1 bytes are ever read (a file
//!   growing meanwhile is refused, not followed).
//! - **A file is read once it has settled.** A running watcher reads a changed file once
//!   it has not been written for `settle_ms` (100 ms: its modification time that far in
//!   the past), or two scans that far apart saw the same size and time, and sends it only
//!   if they are still the same once read: a file being written gives one revision when
//!   it is done, not one per scan. A file still settling is looked at again when it may
//!   have settled. A one-off scan ([`Watcher::poll`], `casement backfill`) has no later
//!   scan to compare with and reads files as they are.
//! - **Freshness from the save.** An edit's freshness is measured from the file's
//!   modification time, so the watcher's own delay shows in
//!   `casement_indexer_freshness_seconds{origin="live"}`.
//! - **Ready means caught up.** At start, the known documents are sent again and the
//!   folders scanned once; what that finds (edits made while the service was stopped) is
//!   applied before [`Watcher::run`] says it has caught up (`readiness`), so `/readyz`
//!   and the banner wait for it.
//! - **A file it cannot use is reported once.** A document file that is not a regular file,
//!   a symlink outside its folder, too large, not UTF-8, or cannot be opened (permission
//!   denied, a symlink loop: the system's error) is logged once at warn with that reason,
//!   and again only when its size, modification time or reason changes. One it cannot open
//!   is tried again every scan (a permission can be fixed without touching the file),
//!   silently while the error stays the same. A folder it cannot list likewise.
//! - **Unusable is not gone.** A known document whose file is still there but cannot be
//!   used keeps its last indexed revision: no delete is sent, so a permission change, a
//!   half-written save or a file swapped for something else does not empty the index. It
//!   is deleted when its file is really gone: removed, or a symlink to nothing. The files
//!   of a folder that cannot be listed count as still there.
//! - **An empty folder is not mounted.** A watched folder must exist at start
//!   ([`check_dirs`]: a typo fails the start with its path). One that lists no document
//!   file while documents indexed from it are live (a volume not mounted yet, a ConfigMap
//!   not synced) deletes nothing: its documents are held, logged once and counted in
//!   `casement_source_deletes_held{source="watch"}`, until a file appears in it (then the
//!   missing ones are deleted, through the pipeline's mass-deletion guard) or an operator
//!   releases the held deletes.
//! - **Access travels with the files.** A file's front matter (`access: [hr, staff]`,
//!   `access: public`) or the nearest `.access` file at or above its folder says who may
//!   read its document ([`access`]); a change of a `.access` file sends the documents
//!   below it again (a payload rewrite, nothing embedded).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use casement_events::{NativeEvent, NativeType};
use casement_pipeline::SourceId;
use tokio::time::Instant;

pub mod access;
pub(crate) mod files;
mod state;
#[cfg(test)]
mod tests;
mod unusable;

use files::{Found, Stamp, Unusable, inspect, read_text, scan};
pub use files::{doc_id, format_of, title_of};
pub use state::adopt;
use state::{Entry, STATE_FILE, now_secs};

use super::{Feeder, read_state, write_state};
use crate::config::WatchConfig;

#[derive(Debug)]
pub struct Watcher {
    config: WatchConfig,
    /// The largest file read, in bytes.
    max_file_bytes: usize,
    state_path: PathBuf,
    state: BTreeMap<String, Entry>,
    feeder: Feeder,
    /// Changed files waiting to settle: the stamp a scan saw, and when.
    settling: HashMap<String, (Stamp, Instant)>,
    /// The `.access` files' answers, read once per scan.
    folders: access::Folders,
    /// What was reported for each path that cannot be used, so it is said once.
    reported: HashMap<PathBuf, (Stamp, Unusable)>,
    /// The mass-deletion guard: its releases let an empty folder's deletes go.
    guard: Option<casement_pipeline::DeleteGuard>,
    /// The guard's releases seen, and the folders held as not mounted (logged once).
    releases_seen: u64,
    held_roots: BTreeSet<PathBuf>,
    /// Changes still to apply before the start-up catch-up is done (0 once it is).
    catching_up: Option<Arc<AtomicUsize>>,
    /// Outcomes the start-up pass waits for.
    startup: Option<Vec<tokio::sync::oneshot::Receiver<casement_pipeline::Finished>>>,
}

/// How long a burst of notifications may keep coming before the scan it asks for.
pub const QUIET: Duration = Duration::from_millis(20);

/// Where notifications work, a scan this often all the same (a notification lost to an
/// overflowing queue is picked up).
const SAFETY_SCAN: Duration = Duration::from_secs(60);

/// Fails when a watched folder does not exist or cannot be listed, naming it.
pub fn check_dirs(dirs: &[PathBuf]) -> anyhow::Result<()> {
    for dir in dirs {
        let listed = std::fs::metadata(dir).and_then(|meta| {
            if meta.is_dir() {
                std::fs::read_dir(dir).map(drop)
            } else {
                Err(std::io::Error::other("not a folder"))
            }
        });
        if let Err(error) = listed {
            anyhow::bail!(
                "sources.watch.dirs: {}: {error}. A watched folder must exist and be readable \
                 at start: a mistyped or unmounted folder would look like every file deleted",
                dir.display()
            );
        }
    }
    Ok(())
}

/// What one scan did.
#[derive(Debug, Default)]
struct ScanOutcome {
    sent: usize,
    /// Files and folders reported as unusable by this scan (not those reported before).
    reported: Vec<(PathBuf, Unusable)>,
}

impl Watcher {
    pub fn new(config: WatchConfig, data_dir: &Path, feeder: Feeder) -> Self {
        let state_path = data_dir.join(STATE_FILE);
        let state = read_state(&state_path);
        let max_file_bytes = config
            .max_file_bytes
            .unwrap_or(casement_text::segmenter::MAX_DOCUMENT_BYTES);
        Self {
            config,
            max_file_bytes,
            state_path,
            state,
            feeder,
            settling: HashMap::new(),
            folders: access::Folders::default(),
            reported: HashMap::new(),
            guard: None,
            releases_seen: 0,
            held_roots: BTreeSet::new(),
            catching_up: None,
            startup: None,
        }
    }

    /// `count` holds one more until the start-up pass is done, then one per change it
    /// found until that change is applied (`/readyz` and the banner wait for 0).
    pub fn with_readiness(mut self, count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        self.catching_up = Some(count);
        self
    }

    /// Holds the documents of a folder that lists nothing until `guard` releases them.
    pub fn with_guard(mut self, guard: casement_pipeline::DeleteGuard) -> Self {
        self.releases_seen = guard.release_count();
        self.guard = Some(guard);
        self
    }

    /// Sends every known document again (marked as resends: not news) and scans once,
    /// waits for what that found to be applied (the catch-up), then scans whenever the
    /// file system says something changed (or every `poll_ms`) until the pipeline stops.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        self.startup = Some(Vec::new());
        self.resend_known().await?;
        self.scan(Some(Instant::now())).await?;
        let waiting = self.startup.take().unwrap_or_default();
        let count = waiting.len();
        if let Some(catching_up) = &self.catching_up {
            catching_up.fetch_add(count, Ordering::SeqCst);
            catching_up.fetch_sub(1, Ordering::SeqCst);
        }
        if count > 0 {
            tracing::info!(changes = count, "watch: catching up with the folders");
        }
        let catching_up = self.catching_up.clone();
        let caught_up = async move {
            for outcome in waiting {
                let _ = outcome.await;
                if let Some(catching_up) = &catching_up {
                    catching_up.fetch_sub(1, Ordering::SeqCst);
                }
            }
            if count > 0 {
                tracing::info!(
                    changes = count,
                    seconds = started.elapsed().as_secs_f64(),
                    "watch: caught up with the folders"
                );
            }
        };
        tokio::pin!(caught_up);
        let mut caught = false;
        let (_notifier, mut notified) = self.notifications();
        let poll = Duration::from_millis(self.config.poll_ms);
        loop {
            // The next look: a notification (once its burst is over), a file that may have
            // settled, the poll (or the safety scan where notifications work).
            let every = if notified.is_some() {
                SAFETY_SCAN
            } else {
                poll
            };
            let settle = Duration::from_millis(self.config.settle_ms.max(1));
            let wait = if self.settling.is_empty() {
                every
            } else {
                every.min(settle)
            };
            let tick = tokio::time::sleep(wait);
            tokio::pin!(tick);
            tokio::select! {
                () = &mut caught_up, if !caught => { caught = true; continue; }
                () = &mut tick => {}
                Some(()) = async {
                    match notified.as_mut() {
                        Some(receiver) => receiver.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(receiver) = notified.as_mut() {
                        // The burst of one save (write, close, rename) is one scan.
                        while let Ok(Some(())) = tokio::time::timeout(QUIET, receiver.recv()).await {}
                    }
                }
            }
            // The time of this look: after a slow scan the schedule lags.
            self.scan(Some(Instant::now())).await?;
        }
    }

    /// File-system notifications for the folders, when they can be had: the watcher (kept
    /// alive by the caller) and its receiver. `None` (logged) where they cannot: turned
    /// off, a network file system (changes made on another machine raise none), or a
    /// watch that fails to start.
    fn notifications(
        &self,
    ) -> (
        Option<notify::RecommendedWatcher>,
        Option<tokio::sync::mpsc::UnboundedReceiver<()>>,
    ) {
        use notify::Watcher as _;
        let poll_ms = self.config.poll_ms;
        if !self.config.notify {
            tracing::info!(
                poll_ms,
                "watch: scanning every poll_ms (sources.watch.notify = false)"
            );
            return (None, None);
        }
        if let Some(root) = self
            .config
            .dirs
            .iter()
            .find(|root| files::is_network_fs(root))
        {
            tracing::warn!(folder = %root.display(), poll_ms,
                "watch: a network file system (no notifications for changes made elsewhere): scanning every poll_ms");
            return (None, None);
        }
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |_event: notify::Result<notify::Event>| {
            // Any event, an error (an overflowing queue) too, asks for a scan.
            let _ = sender.send(());
        });
        let mut watcher = match watcher {
            Ok(watcher) => watcher,
            Err(error) => {
                tracing::warn!(%error, poll_ms, "watch: file-system notifications unavailable: scanning every poll_ms");
                return (None, None);
            }
        };
        for root in &self.config.dirs {
            if let Err(error) = watcher.watch(root, notify::RecursiveMode::Recursive) {
                tracing::warn!(folder = %root.display(), %error, poll_ms,
                    "watch: file-system notifications unavailable: scanning every poll_ms");
                return (None, None);
            }
        }
        tracing::debug!("watch: following file-system notifications");
        (Some(watcher), Some(receiver))
    }

    /// One scan that reads every changed file as it is, without waiting for it to settle
    /// (a backfill's single scan); returns how many events it sent.
    pub async fn poll(&mut self) -> anyhow::Result<usize> {
        Ok(self.scan(None).await?.sent)
    }

    /// Sends each known document at its recorded revision: a deleted one as a delete, a
    /// file only while it still has the content that was sent (read by the same rules as
    /// a scan; a file that changed is picked up by the first scan).
    async fn resend_known(&mut self) -> anyhow::Result<()> {
        self.folders.clear();
        for (doc_id, entry) in self.state.clone() {
            let doc_id = &doc_id;
            if entry.deleted {
                self.send_delete(doc_id, entry.revision, true).await?;
                continue;
            }
            let (Some(format), Some(root)) = (
                format_of(&entry.path),
                self.config
                    .dirs
                    .iter()
                    .find(|root| entry.path.starts_with(root)),
            ) else {
                continue;
            };
            let (root, path, limit) = (root.clone(), entry.path.clone(), self.max_file_bytes);
            let content = tokio::task::spawn_blocking(move || {
                let root = std::fs::canonicalize(root).ok()?;
                let (_, target) = inspect(&root, &path, limit)?;
                read_text(&target.ok()?, limit).ok()
            })
            .await?;
            if let Some((content, _)) = content
                && xxhash_rust::xxh3::xxh3_64(content.as_bytes()) == entry.hash
            {
                self.send_upsert(
                    doc_id,
                    &entry.path,
                    format,
                    content,
                    entry.revision,
                    true,
                    None,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// One scan: sends what changed since the last one. With `now` (a running watcher), a
    /// changed file is read only once it has settled.
    async fn scan(&mut self, now: Option<Instant>) -> anyhow::Result<ScanOutcome> {
        let mut outcome = ScanOutcome::default();
        let mut dirty = false;
        let (roots, prefix) = (self.config.dirs.clone(), self.config.doc_id_prefix.clone());
        let limit = self.max_file_bytes;
        let scan = tokio::task::spawn_blocking(move || scan(&roots, &prefix, limit)).await?;
        self.folders.clear();
        for (path, why) in scan.unlisted.iter().chain(&scan.skipped) {
            self.report(&mut outcome, path, Stamp::default(), why);
        }
        let mut present: HashSet<PathBuf> = scan
            .unlisted
            .iter()
            .chain(&scan.skipped)
            .map(|(path, _)| path.clone())
            .collect();
        present.extend(scan.found.iter().map(|f| f.path.clone()));
        let mut seen = BTreeSet::new();
        for file in scan.found {
            if !seen.insert(file.doc_id.clone()) {
                continue; // The same document id from two folders: the first one wins.
            }
            if self.index(file, now, &mut outcome).await? {
                dirty = true;
            }
        }
        let held = self.empty_folders(&present);
        let gone: Vec<String> = self
            .state
            .iter()
            .filter(|(id, e)| !e.deleted && !seen.contains(*id))
            .filter(|(_, e)| !scan.unlisted.iter().any(|(d, _)| e.path.starts_with(d)))
            .filter(|(_, e)| !held.iter().any(|root| e.path.starts_with(root)))
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
            outcome.sent += 1;
        }
        // Forget what is no longer there: a file that comes back is news again.
        self.settling.retain(|doc_id, _| seen.contains(doc_id));
        self.reported.retain(|path, _| present.contains(path));
        // Once per scan, not per file. A crash before it only means the files are found
        // changed again at start and sent again (at the same revision for an upsert,
        // which the store re-plans idempotently).
        if dirty {
            self.save();
        }
        Ok(outcome)
    }

    /// The watched folders that list no document file while documents indexed from them
    /// are live: taken as not mounted, their documents kept (the guard's count says how
    /// many), until a file appears or an operator releases the held deletes.
    fn empty_folders(&mut self, present: &HashSet<PathBuf>) -> Vec<PathBuf> {
        let Some(guard) = &self.guard else {
            return Vec::new();
        };
        let releases = guard.release_count();
        let released = releases != self.releases_seen;
        self.releases_seen = releases;
        let mut held = Vec::new();
        let mut documents = 0;
        for root in &self.config.dirs {
            let live = self
                .state
                .values()
                .filter(|e| !e.deleted && e.path.starts_with(root))
                .count();
            let empty = !present.iter().any(|path| path.starts_with(root));
            if live == 0 || !empty {
                self.held_roots.remove(root);
                continue;
            }
            if released {
                tracing::warn!(folder = %root.display(), documents = live,
                    "the held deletes were released: deleting the documents of the empty folder");
                self.held_roots.remove(root);
                continue;
            }
            if self.held_roots.insert(root.clone()) {
                tracing::warn!(folder = %root.display(), documents = live,
                    "the watched folder lists no document file but documents indexed from it are live: taken as not mounted, nothing deleted until a file appears in it or an operator releases the held deletes (POST /v1/admin/deletes/release, `casement release-deletes`)");
            }
            documents += live;
            held.push(root.clone());
        }
        guard.set_held(SourceId::Watch, documents as i64);
        held
    }

    /// Reads a found file if it changed (and has settled), sends it if its content did;
    /// returns whether the state changed.
    async fn index(
        &mut self,
        file: Found,
        now: Option<Instant>,
        outcome: &mut ScanOutcome,
    ) -> anyhow::Result<bool> {
        let target = match &file.file {
            Ok(target) => target.clone(),
            Err(why) => {
                self.settling.remove(&file.doc_id);
                self.report(outcome, &file.path, file.stamp, why);
                return Ok(false);
            }
        };
        let known = self.state.get(&file.doc_id).cloned();
        let alive = known.as_ref().filter(|e| !e.deleted);
        let root = self.root_of(&file.path);
        let folder_access = root.map_or(0, |root| self.folders.stamp(&root, &file.path));
        let same_file =
            alive.is_some_and(|e| e.mtime_ns == file.stamp.mtime_ns && e.len == file.stamp.len);
        if same_file && alive.is_some_and(|e| e.folder_access == folder_access) {
            self.settling.remove(&file.doc_id);
            self.reported.remove(&file.path);
            return Ok(false);
        }
        if self.reported_as_is(&file) {
            return Ok(false);
        }
        // The modification time says when the last write was only when it moved past the
        // one indexed: a file truncated for a rewrite can show its new length under its old
        // time for a moment.
        let time_moved = known
            .as_ref()
            .is_none_or(|e| file.stamp.mtime_ns > e.mtime_ns);
        // (Only a `.access` file changed: the file itself is not being written.)
        if let Some(now) = now
            && !same_file
            && !self.settled(&file.doc_id, file.stamp, now, time_moved)
        {
            return Ok(false);
        }
        let limit = self.max_file_bytes;
        let (content, stamp) =
            match tokio::task::spawn_blocking(move || read_text(&target, limit)).await? {
                Ok(read) => read,
                Err(why) => {
                    self.report(outcome, &file.path, file.stamp, &why);
                    return Ok(false);
                }
            };
        if let Some(now) = now
            && stamp != file.stamp
        {
            // Changed since the scan: it has to settle again. (A one-off scan takes what
            // it read; the scan's stamp is kept, so a later scan sees the change.)
            self.settling.insert(file.doc_id.clone(), (stamp, now));
            return Ok(false);
        }
        self.settling.remove(&file.doc_id);
        self.reported.remove(&file.path);
        let hash = xxhash_rust::xxh3::xxh3_64(content.as_bytes());
        let mtime_secs = (file.stamp.mtime_ns / 1_000_000_000) as u64;
        let unchanged = alive.is_some_and(|e| e.hash == hash && e.folder_access == folder_access);
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
                mtime_ns: file.stamp.mtime_ns,
                len: file.stamp.len,
                folder_access,
            },
        );
        if !unchanged {
            tracing::info!(doc_id = %file.doc_id, revision, "file saved: indexing the new revision");
            self.send_upsert(
                &file.doc_id,
                &file.path,
                file.format,
                content,
                revision,
                false,
                Some(file.stamp.mtime_ns),
            )
            .await?;
            outcome.sent += 1;
        }
        Ok(true)
    }

    /// Whether a running watcher may read a changed file at `now`: it was last written at
    /// least `settle_ms` ago (by a modification time that moved: `time_moved`), or a scan
    /// at least that much earlier saw it with the same stamp. Otherwise its stamp is noted.
    fn settled(&mut self, doc_id: &str, stamp: Stamp, now: Instant, time_moved: bool) -> bool {
        let settle = Duration::from_millis(self.config.settle_ms);
        if settle.is_zero() {
            return true;
        }
        // Seen changing while it settled: still being written, so only scans that find it
        // the same settle it (a quiet moment between two writes does not).
        let growing = self
            .settling
            .get(doc_id)
            .is_some_and(|(seen, _)| *seen != stamp);
        let written = std::time::UNIX_EPOCH
            + Duration::from_nanos(u64::try_from(stamp.mtime_ns).unwrap_or(u64::MAX));
        if !growing
            && time_moved
            && SystemTime::now()
                .duration_since(written)
                .is_ok_and(|age| age >= settle)
        {
            return true;
        }
        match self.settling.get(doc_id) {
            Some((seen, since)) if *seen == stamp => now.duration_since(*since) >= settle,
            _ => {
                self.settling.insert(doc_id.to_owned(), (stamp, now));
                false
            }
        }
    }

    /// A file already reported, unchanged since, for what it holds (not UTF-8): not read
    /// again. One that could not be opened is tried again: a permission can change without
    /// the file changing.
    fn reported_as_is(&self, file: &Found) -> bool {
        matches!(self.reported.get(&file.path),
            Some((stamp, why)) if *stamp == file.stamp && !matches!(why, Unusable::Io(_)))
    }

    /// Logs that `path` cannot be used, unless that was said already for the same stamp.
    fn report(&mut self, outcome: &mut ScanOutcome, path: &Path, stamp: Stamp, why: &Unusable) {
        let report = (stamp, why.clone());
        if self.reported.get(path) == Some(&report) {
            return;
        }
        tracing::warn!(path = %path.display(), reason = %why,
            "watch: skipping an entry it cannot use (said again only when it changes)");
        self.reported.insert(path.to_owned(), report);
        outcome.reported.push((path.to_owned(), why.clone()));
    }

    /// The watched folder `path` is under.
    fn root_of(&self, path: &Path) -> Option<PathBuf> {
        self.config
            .dirs
            .iter()
            .find(|root| path.starts_with(root))
            .cloned()
    }

    fn save(&self) {
        if let Err(error) = write_state(&self.state_path, &self.state) {
            tracing::warn!(%error, path = %self.state_path.display(), "cannot save the watch state");
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn send_upsert(
        &mut self,
        doc_id: &str,
        path: &Path,
        format: &str,
        content: String,
        revision: u64,
        resend: bool,
        modified_ns: Option<u128>,
    ) -> anyhow::Result<()> {
        // Freshness runs from the save.
        let event_time = modified_ns
            .and_then(|ns| i64::try_from(ns / 1_000_000).ok())
            .and_then(chrono::DateTime::<chrono::Utc>::from_timestamp_millis)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let root = self.root_of(path);
        let access = self.folders.access(root.as_deref(), path, &content);
        let event = NativeEvent {
            access,
            kind: NativeType::Upsert,
            doc_id: doc_id.to_owned(),
            revision,
            title: Some(title_of(path, &content)),
            format: Some(format.to_owned()),
            content: Some(content),
            tenant: None,
            url: Some(path.display().to_string()),
            revision_url: None,
            metadata: Default::default(),
            event_time,
        };
        self.send(event, resend).await
    }

    async fn send_delete(
        &mut self,
        doc_id: &str,
        revision: u64,
        resend: bool,
    ) -> anyhow::Result<()> {
        self.send(NativeEvent::delete(doc_id, revision), resend)
            .await
    }

    /// Sends an event; during the start-up pass, keeps its outcome to wait for (a resend
    /// of what is indexed already is not a change, and not waited for).
    async fn send(&mut self, event: NativeEvent, resend: bool) -> anyhow::Result<()> {
        match &mut self.startup {
            Some(waiting) if !resend => {
                let outcome = self
                    .feeder
                    .send_native_waiting(SourceId::Watch, event, resend)
                    .await?;
                waiting.push(outcome);
                Ok(())
            }
            _ => self
                .feeder
                .send_native(SourceId::Watch, event, resend)
                .await
                .map(|_| ()),
        }
    }
}
