//! Qdrant Edge backend: the Qdrant engine in-process, persisted under a data directory with
//! its write-ahead log.
//!
//! Edge calls are blocking; they run on tokio's blocking pool. Writes (and flushes) are
//! serialised by one lock: the engine's `flush` expects no concurrent writer. A write is not
//! flushed by itself: [`Store::sync`] flushes once for every write before it (group commit). Index
//! building (`optimize`) runs on its own thread beside writes and queries; flushes are deferred
//! until it is done (the engine's flush must not race it).

mod compact;
mod journal;
mod read;
mod schema;
mod snapshot;
mod store;
mod write;

pub use read::disk_usage as allocated_bytes;
pub use snapshot::{ClosedStore, copy_sparse, copy_tree};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::Instant;

use qdrant_edge::{
    CreateIndex, EdgeShard, FieldIndexOperations, PayloadFieldSchema, PayloadSchemaType,
    UpdateOperation,
};

use crate::CompactionStats;
use crate::bm25::Bm25;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::schema::{FieldType, indexed_fields};
use compact::truncate_wal;
use schema::{check_schema, edge_config, json_path};

/// The embedded store. Cheap to clone; clones share one engine.
#[derive(Debug, Clone)]
pub struct EdgeStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The engine; `None` only while a compaction reopens it (under `writes` and
    /// `building`, so no write or build sees it) or if reopening failed.
    shard: RwLock<Option<EdgeShard>>,
    writes: Mutex<()>,
    /// Held while the index is built: one build at a time.
    building: Mutex<()>,
    /// Set (under `writes`) while an index build runs; flushes are deferred to its end.
    optimizing: AtomicBool,
    /// Dense vectors written since the last index build.
    unindexed: AtomicUsize,
    bm25: Bm25,
    dimension: usize,
    rrf_k: usize,
    index_after_points: usize,
    sync_writes: bool,
    /// Bulk loading: no index build until it is turned off.
    bulk: AtomicBool,
    /// Compact when the write-ahead log is over this many bytes and over the segments' size
    /// (`store.edge.compact_wal_bytes`; 0: only at open and on request).
    compact_wal_bytes: u64,
    /// `store.edge.compact_wal_ratio`.
    compact_wal_ratio: f64,
    /// `store.edge.min_free_bytes`: writes wait below it (`check_free_space`).
    min_free_bytes: u64,
    compaction: Mutex<CompactionStats>,
    /// When the write-ahead log's size was last checked (`compact_if_due`).
    wal_checked: Mutex<Instant>,
    /// The documents written since the last flush (see `journal`).
    journal: journal::Journal,
    path: PathBuf,
    /// An exclusive lock on `casement.lock` in the data directory, held while the store is
    /// open: two processes on one Edge directory would corrupt it.
    _lock: std::fs::File,
}

/// Writes this process's id into a lock file it has just locked, for [`lock_holder`].
pub fn note_lock_holder(mut file: &std::fs::File) {
    use std::io::Write;
    // Best effort: the lock is what counts, the id only helps the one who meets it.
    let _ = file
        .set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.flush());
}

/// Who holds a lock file, as its holder wrote it (`note_lock_holder`): "process 1234
/// (casement)", with the program's name where `/proc` shows it.
pub fn lock_holder(lock_file: &Path) -> Option<String> {
    let pid: u32 = std::fs::read_to_string(lock_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let program = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|cmdline| {
            let first = cmdline.split(|b| *b == 0).next()?.to_vec();
            let first = String::from_utf8(first).ok()?;
            Path::new(&first)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        });
    Some(match program {
        Some(program) => format!("process {pid} ({program})"),
        None => format!("process {pid}"),
    })
}

/// Takes the data directory's lock, or says who to blame.
fn lock_directory(path: &Path) -> std::result::Result<std::fs::File, String> {
    let lock_file = path.join("casement.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_file)
        .map_err(|e| format!("creating the lock file: {e}"))?;
    match file.try_lock() {
        Ok(()) => {
            note_lock_holder(&file);
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => Err(format!(
            "the data directory is in use (casement.lock is held by {}). An Edge store \
             belongs to one process: stop that one, or run the indexer and the query \
             service together in the all-in-one, or share a Qdrant server \
             (store.backend = \"server\")",
            lock_holder(&lock_file)
                .unwrap_or_else(|| "another open store, usually another process".into())
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("locking casement.lock: {e}")),
    }
}

impl EdgeStore {
    /// Opens the store under `config.edge.path`, creating it (with the schema) when the
    /// directory holds none. Fails when an existing store has another dense dimension.
    pub fn open(config: &StoreConfig, dimension: usize) -> Result<Self> {
        config.validate().map_err(Error::Config)?;
        if dimension == 0 {
            return Err(Error::Config(
                "the dense dimension must be at least 1".into(),
            ));
        }
        let path = config.edge.path.clone();
        let bm25 = Bm25::new(&config.bm25).map_err(Error::Config)?;
        let open_error = |message: String| Error::Open {
            path: path.clone(),
            message,
        };
        std::fs::create_dir_all(&path).map_err(|e| open_error(e.to_string()))?;
        let lock = lock_directory(&path).map_err(open_error)?;
        let existing = path.join("edge_config.json").exists();
        // Qdrant Edge 0.7.2 never replays or truncates its write-ahead log: what it holds
        // before the newest closed segment is never read again. Dropped here, while no
        // engine has it open (see `truncate_wal`).
        let started = Instant::now();
        let reclaimed = truncate_wal(&path)
            .map_err(|e| open_error(format!("truncating the write-ahead log: {e}")))?;
        let shard = if existing {
            let shard = EdgeShard::load(&path, None).map_err(|e| open_error(e.to_string()))?;
            check_schema(&shard, &path, dimension)?;
            shard
        } else {
            EdgeShard::new(&path, edge_config(dimension, config.edge.wal_segment_bytes))
                .map_err(|e| open_error(e.to_string()))?
        };
        let (journal, unflushed) =
            journal::Journal::open(&path).map_err(|e| open_error(format!("the journal: {e}")))?;
        if !unflushed.is_empty() {
            let points = journal::repair(&shard, &path, &unflushed)?;
            tracing::warn!(
                documents = unflushed.len(),
                points,
                "repaired: the points of the documents written after the last flush were \
                 written again as they read now"
            );
        }
        let info = shard.info();
        for (field, kind) in indexed_fields(&config.indexed_metadata) {
            let field = field.as_str();
            if info.payload_schema.contains_key(&json_path(field)) {
                continue;
            }
            let schema = match kind {
                FieldType::Keyword => PayloadSchemaType::Keyword,
                FieldType::Integer => PayloadSchemaType::Integer,
                FieldType::Bool => PayloadSchemaType::Bool,
            };
            shard
                .update(UpdateOperation::FieldIndexOperation(
                    FieldIndexOperations::CreateIndex(CreateIndex {
                        field_name: json_path(field),
                        field_schema: Some(PayloadFieldSchema::FieldType(schema)),
                    }),
                ))
                .map_err(|e| open_error(format!("creating the payload index on {field}: {e}")))?;
        }
        let unindexed = info.points_count.saturating_sub(info.indexed_vectors_count);
        let mut compaction = CompactionStats::default();
        if reclaimed > 0 {
            compaction.record(reclaimed, started.elapsed());
        }
        let store = Self {
            inner: Arc::new(Inner {
                shard: RwLock::new(Some(shard)),
                writes: Mutex::new(()),
                building: Mutex::new(()),
                optimizing: AtomicBool::new(false),
                unindexed: AtomicUsize::new(unindexed),
                bm25,
                dimension,
                rrf_k: config.rrf_k,
                index_after_points: config.edge.index_after_points,
                sync_writes: config.edge.sync_writes,
                bulk: AtomicBool::new(false),
                compact_wal_bytes: config.edge.compact_wal_bytes,
                compact_wal_ratio: config.edge.compact_wal_ratio,
                min_free_bytes: config.edge.min_free_bytes,
                compaction: Mutex::new(compaction),
                wal_checked: Mutex::new(Instant::now()),
                journal,
                path,
                _lock: lock,
            }),
        };
        store.inner.flush()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Builds the vector index and merges segments now, after any build already running,
    /// and returns when done (writes and queries go on meanwhile). Returns whether anything
    /// was optimised.
    pub async fn optimize(&self) -> Result<bool> {
        let inner = self.inner.clone();
        blocking(move || inner.optimize(true)).await
    }

    /// Bulk loading: while on, no vector index is built as points arrive (each build would
    /// index everything written so far again, and take the cores from the model); searches
    /// scan what is not indexed. Turning it off starts the build in the background when
    /// enough points wait for it; call [`EdgeStore::optimize`] to wait for a full index.
    pub fn set_bulk(&self, on: bool) {
        self.inner.bulk.store(on, Ordering::Release);
        if !on {
            self.inner.clone().build_if_due();
        }
    }

    /// Flushes the write-ahead log and segments to disk.
    pub async fn flush(&self) -> Result<()> {
        let inner = self.inner.clone();
        blocking(move || inner.flush()).await
    }
}

/// Reads through the engine while it is open ([`Inner::shard`]).
pub(super) struct Shard<'a>(RwLockReadGuard<'a, Option<EdgeShard>>);

impl std::ops::Deref for Shard<'_> {
    type Target = EdgeShard;

    fn deref(&self) -> &EdgeShard {
        match self.0.as_ref() {
            Some(shard) => shard,
            None => unreachable!("Inner::shard returns a Shard only when the engine is open"),
        }
    }
}

impl Inner {
    /// The engine. After a compaction that could not open it again (a full disk, say), each
    /// call tries once more, so the store comes back when the cause goes.
    pub(super) fn shard(&self) -> Result<Shard<'_>> {
        loop {
            let guard = self.shard.read().unwrap_or_else(|e| e.into_inner());
            if guard.is_some() {
                return Ok(Shard(guard));
            }
            drop(guard);
            let mut slot = self.shard.write().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                let shard = EdgeShard::load(&self.path, None).map_err(|e| {
                    Error::Unavailable(format!(
                        "the embedded store at {} could not be opened again after a compaction: {e}",
                        self.path.display()
                    ))
                })?;
                *slot = Some(shard);
            }
        }
    }

    /// Flushes the engine if it is open; the caller holds `writes`.
    pub(super) fn flush_shard(&self) {
        if let Some(shard) = self
            .shard
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            shard.flush();
            self.flushed();
        }
    }

    /// Every write so far is durable: the journal is emptied (a failure only means a
    /// needless repair at the next open).
    pub(super) fn flushed(&self) {
        if let Err(error) = self.journal.flushed() {
            tracing::warn!(%error, "emptying the journal of unflushed documents failed");
        }
    }
}

impl Drop for Inner {
    /// Closes the engine (which flushes), then empties the journal: a clean stop.
    fn drop(&mut self) {
        let shard = self
            .shard
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if shard.is_some() {
            drop(shard);
            self.flushed();
        }
    }
}

impl Inner {
    /// Starts an index build in the background when `index_after_points` vectors wait for
    /// one, unless one runs or bulk loading is on.
    fn build_if_due(self: Arc<Self>) {
        let due = self.index_after_points > 0
            && self.unindexed.load(Ordering::Relaxed) >= self.index_after_points
            && !self.bulk.load(Ordering::Acquire)
            && !self.optimizing.load(Ordering::Acquire);
        if due {
            // Writes and queries go on while the index is built.
            std::thread::spawn(move || {
                if let Err(error) = self.optimize(false) {
                    tracing::error!(%error, "building the vector index failed");
                }
            });
        }
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::backend("edge task", e))?
}

fn engine(operation: &'static str) -> impl FnOnce(qdrant_edge::OperationError) -> Error {
    move |e| Error::backend(operation, e)
}
