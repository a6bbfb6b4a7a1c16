//! Store settings: which backend, where it lives, and the BM25 and fusion parameters that
//! both backends share.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Qdrant Edge in-process, persisted under `edge.path` (the embedded default).
    Edge,
    /// A Qdrant server or cluster through gRPC at `server.url`.
    Server,
}

impl Backend {
    /// The config value (`edge`, `server`), as logs and `casement_build_info` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Edge => "edge",
            Self::Server => "server",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    pub backend: Backend,
    /// Collection name on a server; recorded in the data directory on Edge.
    pub collection: String,
    pub edge: EdgeSettings,
    pub server: ServerSettings,
    pub bm25: Bm25Settings,
    /// Reciprocal rank fusion constant: score = Σ 1 / (k + rank). 10 favours each channel's
    /// first hits more than the RRF paper's 60; chosen on the tune half of `make eval`
    /// (SQuAD recall@5 0.969 against 0.958 with 60, SciFact nDCG@10 0.722 against 0.718).
    pub rrf_k: usize,
    /// Keys of the events' `metadata` that searches may filter on (`"metadata": {"team":
    /// "billing"}` in a search request): each gets a keyword payload index on
    /// `metadata.<key>`, created at open (also for a store that exists already). A filter
    /// on a key not listed here is refused (422), so no search scans unindexed payloads.
    pub indexed_metadata: Vec<String>,
    /// On a server, open `collection` itself (created without an alias when missing), not
    /// the collection an alias of that name points at: a migration's new collection and its
    /// serving one. Not configurable.
    #[serde(skip)]
    pub exact_collection: bool,
}

/// Most keys in `store.indexed_metadata`.
pub const MAX_INDEXED_METADATA: usize = 32;

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Edge,
            collection: "casement".to_owned(),
            edge: EdgeSettings::default(),
            server: ServerSettings::default(),
            bm25: Bm25Settings::default(),
            rrf_k: 10,
            indexed_metadata: Vec::new(),
            exact_collection: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EdgeSettings {
    /// Data directory (segments and write-ahead log); created when missing.
    pub path: PathBuf,
    /// Build the HNSW index once this many dense vectors are not indexed yet; below it a
    /// search scans them, which is fast at that size.
    pub index_after_points: usize,
    /// Flush the write-ahead log and segments to disk before events are acknowledged. One
    /// flush covers the writes of every event that finished meanwhile (group commit); while
    /// the index is being built in the background, it waits for the build's own flush at
    /// its end. Turn off for benchmarks only: Qdrant Edge 0.7.2 does not replay its
    /// write-ahead log at open, so a crash may lose writes acknowledged without a flush.
    /// (`flush_every_write`, its old name, is still read.)
    #[serde(alias = "flush_every_write")]
    pub sync_writes: bool,
    /// Compact the write-ahead log (close the engine, drop the log segments it never reads
    /// again, reopen; searches wait, nothing is lost) when it holds more than this many
    /// bytes and more than `compact_wal_ratio` times the segments: the trigger is
    /// `max(compact_wal_ratio × segments, this)`, so the disk follows the live index at
    /// every size (a small index is not left with hundreds of MiB of log). It must be over
    /// two log segments, which is what a compaction leaves. Qdrant Edge 0.7.2 never
    /// truncates the log itself: about 3.7 KiB per point written. It is also compacted at
    /// every open. 0: only at open.
    pub compact_wal_bytes: u64,
    /// The other half of the trigger: the log must also be over this multiple of the
    /// segments' bytes, so the disk stays within about (1 + this) times the live index.
    pub compact_wal_ratio: f64,
    /// Size of one write-ahead log segment of a new store (an existing store keeps the
    /// size it was created with). After a compaction the log holds the newest closed
    /// segment and the open one, so about twice this (Qdrant's default is 32 MiB).
    pub wal_segment_bytes: usize,
    /// Writes, flushes, index builds and compactions wait (the pipeline retries them) while
    /// the file system under `path` has less than this many bytes available: the engine
    /// writes through memory maps, and a page written on a full disk kills the process
    /// (SIGBUS). 0 turns the check off.
    pub min_free_bytes: u64,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        Self {
            path: PathBuf::from("data/index"),
            index_after_points: 20_000,
            sync_writes: true,
            compact_wal_bytes: 20 * 1024 * 1024,
            compact_wal_ratio: 1.0,
            wal_segment_bytes: 8 * 1024 * 1024,
            min_free_bytes: 128 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// gRPC endpoint; `https://` turns TLS on, verified against `ca_file` or else the
    /// system's roots.
    pub url: String,
    /// PEM file of the CA (or CAs) that signs the server's certificate, for a server behind
    /// a private CA; trusted instead of the system's roots. Needs an `https://` URL.
    pub ca_file: Option<std::path::PathBuf>,
    /// Sent as the `api-key` header; prefer the environment for it
    /// (`..._STORE__SERVER__API_KEY`).
    pub api_key: Option<casement_config::Secret>,
    pub timeout_secs: u64,
    pub connect_timeout_secs: u64,
    /// How often a running service looks where the collection alias points (`casement
    /// migrate` moves it). A query service follows a move to a collection of its model and
    /// window radius; otherwise reads stay on the collection this process started on (kept
    /// for a rollback) and writes are refused (retried, nothing committed past them) until
    /// the process restarts with the new settings. A writer also looks at every flush
    /// (`Store::sync`), before the pipeline commits. 0: only at flushes.
    pub follow_secs: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            url: "http://localhost:6334".to_owned(),
            ca_file: None,
            api_key: None,
            timeout_secs: 10,
            connect_timeout_secs: 5,
            follow_secs: 5,
        }
    }
}

/// Parameters of the BM25 document vectors. IDF is applied by Qdrant (the sparse vector's
/// IDF modifier), so only term frequency and length normalisation happen here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Bm25Settings {
    /// Language of stopwords and stemmer, as Qdrant names it (`english`, `german`, ...).
    pub language: String,
    pub k1: f64,
    pub b: f64,
    /// Average length in tokens of what is indexed (a sentence with its context preamble).
    pub avg_len: f64,
}

impl Default for Bm25Settings {
    fn default() -> Self {
        Self {
            language: "english".to_owned(),
            k1: 1.2,
            b: 0.75,
            avg_len: 24.0,
        }
    }
}

impl StoreConfig {
    pub fn validate(&self) -> Result<(), String> {
        // A migration's collections are `<collection>.<n>`.
        let name = match self.collection.rsplit_once('.') {
            Some((name, n)) if self.exact_collection && n.parse::<u64>().is_ok() => name,
            _ => self.collection.as_str(),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "store.collection = {:?} must be non-empty ASCII letters, digits, '_' or '-'",
                self.collection
            ));
        }
        if self.server.ca_file.is_some() && !self.server.url.starts_with("https://") {
            return Err(format!(
                "store.server.ca_file is set but store.server.url = {:?} is not https://: \
                 a CA file is for TLS",
                self.server.url
            ));
        }
        if self.rrf_k == 0 {
            return Err("store.rrf_k must be at least 1".into());
        }
        if self.indexed_metadata.len() > MAX_INDEXED_METADATA {
            return Err(format!(
                "store.indexed_metadata has {} keys; at most {MAX_INDEXED_METADATA}",
                self.indexed_metadata.len()
            ));
        }
        for (i, key) in self.indexed_metadata.iter().enumerate() {
            if key.is_empty()
                || key.len() > 64
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "store.indexed_metadata[{i}] = {key:?} must be 1 to 64 ASCII letters, digits, '_' or '-'"
                ));
            }
            if self.indexed_metadata[..i].contains(key) {
                return Err(format!("store.indexed_metadata lists {key:?} twice"));
            }
        }
        if self.edge.wal_segment_bytes < 64 * 1024 {
            return Err(format!(
                "store.edge.wal_segment_bytes = {} must be at least 65536",
                self.edge.wal_segment_bytes
            ));
        }
        let two_segments = 2 * self.edge.wal_segment_bytes as u64;
        if self.edge.compact_wal_bytes != 0 && self.edge.compact_wal_bytes < two_segments {
            return Err(format!(
                "store.edge.compact_wal_bytes = {} must be 0 or at least twice \
                 store.edge.wal_segment_bytes ({two_segments}): a compaction leaves two log \
                 segments, and a lower trigger would compact again at once",
                self.edge.compact_wal_bytes
            ));
        }
        if !(self.edge.compact_wal_ratio.is_finite() && self.edge.compact_wal_ratio >= 0.0) {
            return Err(format!(
                "store.edge.compact_wal_ratio = {} must be a number ≥ 0",
                self.edge.compact_wal_ratio
            ));
        }
        if self.edge.path.as_os_str().is_empty() {
            return Err("store.edge.path must not be empty".into());
        }
        if self.backend == Backend::Server
            && !(self.server.url.starts_with("http://") || self.server.url.starts_with("https://"))
        {
            return Err(format!(
                "store.server.url = {:?} must start with http:// or https://",
                self.server.url
            ));
        }
        if self.server.timeout_secs == 0 || self.server.connect_timeout_secs == 0 {
            return Err("store.server timeouts must be at least 1 second".into());
        }
        crate::bm25::Bm25::new(&self.bm25).map(|_| ())
    }
}
