//! Casement's vector store: one async contract ([`Store`]) over two backends,
//! - [`EdgeStore`]: Qdrant Edge, the Qdrant engine in-process, persisted to a data
//!   directory with its write-ahead log (the embedded default);
//! - [`ServerStore`]: a Qdrant server or cluster through `qdrant-client` (gRPC).
//!
//! Both create the same schema (see [`schema`]), compute the same BM25 sparse vectors
//! ([`bm25`]) and pass the same contract suite (`tests/it/contract/mod.rs`).
//!
//! The index itself is the state (DESIGN.md): the differ plans from [`Store::records`], and
//! [`Store::apply`] writes a plan in its operation order (upserts, payload updates,
//! deletes, revision stamp, document state), so a write cut off anywhere heals when the
//! same revision is planned against what the store returns and applied again. That order
//! is planned once, in `write_steps`; each backend only executes the steps.

mod any;
pub mod bm25;
pub mod config;
mod documents;
mod edge;
mod error;
pub mod probe;
pub mod schema;
mod server;
mod settings;
mod write_steps;

use std::collections::HashMap;
use std::future::Future;

use casement_text::{ChangePlan, DocRef, DocumentState, SentenceRecord};
use uuid::Uuid;

pub use any::AnyStore;
pub use bm25::{Bm25, SparseVector};
pub use casement_text::Reader;
pub use config::{
    Backend, Bm25Settings, EdgeSettings, MAX_INDEXED_METADATA, ServerSettings, StoreConfig,
};
pub use documents::IndexedDocument;
pub use edge::{
    ClosedStore, EdgeStore, allocated_bytes, copy_sparse, copy_tree, lock_holder, note_lock_holder,
};
pub use error::{Error, Result};
pub use probe::StoreProbe;
pub use server::{Aliases, ServerStore};
pub use settings::{
    Access, IndexSettings, SAME_MODEL_COSINE, SETTINGS_PROBE, SettingsCheck, check_settings,
    differences as settings_differences,
};

/// What [`Store::apply`] did with a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Written (possibly only the first operations, with [`Store::apply_first`]).
    Written,
    /// The store holds a newer revision of the document, or a tombstone at or after the
    /// plan's revision: nothing was written.
    Stale { indexed_revision: u64 },
}

/// A payload filter on queries. An empty `doc_ids` means every document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryFilter {
    pub tenant: Option<String>,
    pub doc_ids: Vec<String>,
    /// Metadata conditions, all of which must hold (keys of `store.indexed_metadata`).
    pub metadata: Vec<MetadataCondition>,
    /// Who is reading: only points of documents it may read match (a condition on the
    /// indexed `public` and `access_groups` fields, inside the engine). The default,
    /// [`Reader::Operator`], reads everything: the query service always sets its caller's.
    pub reader: Reader,
}

/// `metadata.<key>` equals one of `values` (a point whose value there is an array matches
/// when any element does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataCondition {
    pub key: String,
    pub values: MetadataValues,
}

/// The values a metadata condition accepts: keywords, or integers (booleans as one
/// keyword match each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataValues {
    Keywords(Vec<String>),
    Integers(Vec<i64>),
    Bool(bool),
}

/// Which ranked lists a query fuses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channels {
    /// Dense and BM25 candidates fused by reciprocal rank fusion (the default).
    #[default]
    Hybrid,
    /// The dense channel alone (its order; scores are its RRF scores).
    Dense,
    /// The BM25 channel alone; a query with no indexed term finds nothing.
    Bm25,
}

impl Channels {
    pub fn dense(self) -> bool {
        self != Self::Bm25
    }

    pub fn bm25(self) -> bool {
        self != Self::Dense
    }
}

/// One hybrid query: dense and BM25 candidates fused by reciprocal rank fusion.
#[derive(Debug, Clone, PartialEq)]
pub struct HybridQuery {
    /// The query's dense embedding.
    pub dense: Vec<f32>,
    /// The query text, encoded to a BM25 sparse vector by the store.
    pub text: String,
    /// Fused hits to return.
    pub limit: usize,
    /// Candidates fetched from each channel before fusion.
    pub candidates: usize,
    pub filter: QueryFilter,
    /// The channels fused (both by default; one alone for ablations and baselines).
    pub channels: Channels,
    /// Also report each hit's rank in the dense and in the sparse channel alone (two more
    /// searches; for debugging and tests).
    pub channel_ranks: bool,
}

/// A sentence hit with its payload and fused score.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub record: SentenceRecord,
    /// Reciprocal-rank-fusion score.
    pub score: f32,
    /// 1-based rank among the dense candidates (when asked for and within `candidates`).
    pub dense_rank: Option<usize>,
    /// 1-based rank among the BM25 candidates (when asked for and within `candidates`).
    pub sparse_rank: Option<usize>,
}

/// Index-growth figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Sentence points.
    pub points: u64,
    /// Documents currently indexed (not deleted).
    pub documents: u64,
    /// Deleted documents whose tombstone is kept.
    pub tombstones: u64,
    /// Bytes on disk, where the backend knows it (Edge: its data directory; a Qdrant
    /// server's are the server's own).
    pub disk: Option<DiskUsage>,
    /// Bytes available to the store on its file system (Edge only).
    pub disk_available: Option<u64>,
    /// Compactions of an embedded store's write-ahead log since it was opened (the one at
    /// open included); `None` for a Qdrant server.
    pub compaction: Option<CompactionStats>,
    /// The collection alias this process opened names another collection now (a
    /// migration swapped it), made with other settings: this process reads the replaced
    /// one and writes nothing until it restarts with them. Always false on Edge.
    pub replaced: bool,
}

/// What compacting the embedded store's write-ahead log has done in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionStats {
    pub runs: u64,
    pub reclaimed_bytes: u64,
    /// Of the last run: how long writes waited (and searches, for the reopen).
    pub last_duration: std::time::Duration,
}

impl CompactionStats {
    pub(crate) fn record(&mut self, reclaimed: u64, took: std::time::Duration) {
        self.runs += 1;
        self.reclaimed_bytes += reclaimed;
        self.last_duration = took;
    }
}

/// Bytes allocated on disk by an embedded store, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskUsage {
    /// Segments (the points, their payloads and indexes) and everything else of the data
    /// directory but the write-ahead log.
    pub segments: u64,
    /// The write-ahead log.
    pub wal: u64,
}

impl DiskUsage {
    pub fn total(self) -> u64 {
        self.segments + self.wal
    }
}

/// The store contract. Every method is safe to call concurrently; writes of one document
/// must come from one caller at a time (the indexer orders events per document).
pub trait Store: Send + Sync {
    /// The dimension of the dense vectors this store holds.
    fn dimension(&self) -> usize;

    /// The indexed state of a document (or its tombstone), if any. A document is its id
    /// within its tenant ([`DocRef`]; a `&str` is an id without a tenant).
    fn document<'a>(
        &self,
        doc: impl Into<DocRef<'a>> + Send,
    ) -> impl Future<Output = Result<Option<DocumentState>>> + Send;

    /// The document's sentence records as stored (no vectors): what the differ consumes.
    fn records<'a>(
        &self,
        doc: impl Into<DocRef<'a>> + Send,
    ) -> impl Future<Output = Result<Vec<SentenceRecord>>> + Send;

    /// Writes `plan`, with `vectors[i]` the dense embedding of `plan.embed[i]`, unless the
    /// revision fence says the plan is stale.
    fn apply(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
    ) -> impl Future<Output = Result<Applied>> + Send {
        self.apply_first(plan, vectors, usize::MAX)
    }

    /// Writes only the first `count` operations of `plan` (in [`ChangePlan::operations`]
    /// order), as a write cut off by a crash would. The same fence applies.
    fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> impl Future<Output = Result<Applied>> + Send;

    /// Hybrid search: dense and BM25 candidates fused by RRF in one engine query.
    fn query(&self, query: &HybridQuery) -> impl Future<Output = Result<Vec<Hit>>> + Send;

    /// Stored dense vectors of the given sentence points (missing ids are left out).
    fn dense_vectors(
        &self,
        ids: &[Uuid],
    ) -> impl Future<Output = Result<HashMap<Uuid, Vec<f32>>>> + Send;

    fn stats(&self) -> impl Future<Output = Result<StoreStats>> + Send;

    /// Every document the index holds anything of: each document-state point (live or a
    /// tombstone) and each document that has sentence points, with how many; sorted by
    /// tenant, then id. What an audit compares with a source of truth (a sentence point
    /// without a live state is damage no write of Casement leaves once it finishes).
    fn documents(&self) -> impl Future<Output = Result<Vec<IndexedDocument>>> + Send;

    /// What the index was made with, if recorded ([`check_settings`]).
    fn settings(&self) -> impl Future<Output = Result<Option<IndexSettings>>> + Send;

    /// Records what the index is made with, durably (replacing what was recorded).
    fn record_settings(&self, settings: &IndexSettings) -> impl Future<Output = Result<()>> + Send;

    /// This process's settings and how it uses the index, once [`check_settings`] found
    /// them fit: what a store that can be moved under the process (a Qdrant collection
    /// alias a migration swaps) compares the new collection with. Others ignore it.
    fn bind_settings(&self, _ours: &IndexSettings, _access: Access) {}

    /// Makes every write that returned before this call durable: one flush of the
    /// write-ahead log and segments covers the writes of many events (group commit). A
    /// backend whose writes are durable when they return does nothing.
    fn sync(&self) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }
}

/// Deletes a document: every point goes and a tombstone at `revision` stays, so a later
/// event with an older revision cannot bring it back.
pub async fn delete_document<'a, S: Store>(
    store: &S,
    doc: impl Into<DocRef<'a>>,
    revision: u64,
) -> Result<Applied> {
    let doc = doc.into();
    let current = store.records(doc).await?;
    let indexed = store.document(doc).await?;
    let plan = casement_text::plan_delete(&current, indexed.as_ref(), doc, revision);
    store.apply(&plan, &[]).await
}

/// The revision fence at the store: the same rule the pipeline applies before planning.
pub(crate) fn fence(indexed: Option<&DocumentState>, plan: &ChangePlan) -> Option<Applied> {
    match casement_text::fence_restoring(indexed, plan.revision, plan.restore) {
        casement_text::Fence::Apply => None,
        casement_text::Fence::Stale { indexed_revision } => {
            Some(Applied::Stale { indexed_revision })
        }
    }
}
