//! Qdrant Edge backend: the Qdrant engine in-process, persisted under a data directory with
//! its write-ahead log.
//!
//! Edge calls are blocking; they run on tokio's blocking pool. Writes (and flushes) are
//! serialised by one lock: the engine's `flush` expects no concurrent writer. Index
//! building (`optimize`) runs on its own thread beside writes and queries, and flushes wait
//! until it is done.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use casement_text::{ChangePlan, DocumentState, Operation, SentenceRecord};
use qdrant_edge::{
    CountRequest, CreateIndex, Distance, EdgeConfigBuilder, EdgeShard,
    EdgeSparseVectorParamsBuilder, EdgeVectorParamsBuilder, FieldIndexOperations, Filter, Fusion,
    JsonPath, Modifier, NamedQuery, Payload, PayloadFieldSchema, PayloadOps, PayloadSchemaType,
    PointId, PointInsertOperations, PointOperations, PointStructPersisted, Prefetch, QueryEnum,
    QueryRequest, ScoringQuery, ScrollRequest, SetPayloadOp, UpdateOperation, VectorInternal,
    VectorStructInternal, WithPayloadInterface, WithVector,
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::bm25::{Bm25, SparseVector};
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::schema::{
    DENSE_VECTOR, FieldType, INDEXED_FIELDS, KIND, KIND_DOCUMENT, KIND_SENTENCE, SPARSE_VECTOR,
    document_from_payload, document_payload, document_point_id, sentence_from_payload,
    sentence_payload,
};
use crate::{Applied, Hit, HybridQuery, QueryFilter, Store, StoreStats, check_vectors, fence};

const SCROLL_PAGE: usize = 1_000;
/// Points per upsert operation (one WAL record each).
const UPSERT_BATCH: usize = 256;

/// The embedded store. Cheap to clone; clones share one engine.
#[derive(Debug, Clone)]
pub struct EdgeStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shard: EdgeShard,
    writes: Mutex<()>,
    /// Held while the index is built: one build at a time.
    building: Mutex<()>,
    /// Set (under `writes`) while an index build runs; flushes wait for it.
    optimizing: AtomicBool,
    /// Dense vectors written since the last index build.
    unindexed: AtomicUsize,
    bm25: Bm25,
    dimension: usize,
    rrf_k: usize,
    index_after_points: usize,
    flush_every_write: bool,
    path: PathBuf,
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
        let existing = path.join("edge_config.json").exists();
        let shard = if existing {
            let shard = EdgeShard::load(&path, None).map_err(|e| open_error(e.to_string()))?;
            check_schema(&shard, &path, dimension)?;
            shard
        } else {
            EdgeShard::new(&path, edge_config(dimension)).map_err(|e| open_error(e.to_string()))?
        };
        let info = shard.info();
        for (field, kind) in INDEXED_FIELDS {
            if info.payload_schema.contains_key(&json_path(field)) {
                continue;
            }
            let schema = match kind {
                FieldType::Keyword => PayloadSchemaType::Keyword,
                FieldType::Integer => PayloadSchemaType::Integer,
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
        let store = Self {
            inner: Arc::new(Inner {
                shard,
                writes: Mutex::new(()),
                building: Mutex::new(()),
                optimizing: AtomicBool::new(false),
                unindexed: AtomicUsize::new(unindexed),
                bm25,
                dimension,
                rrf_k: config.rrf_k,
                index_after_points: config.edge.index_after_points,
                flush_every_write: config.edge.flush_every_write,
                path,
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

    /// Flushes the write-ahead log and segments to disk.
    pub async fn flush(&self) -> Result<()> {
        let inner = self.inner.clone();
        blocking(move || inner.flush()).await
    }
}

fn json_path(field: &str) -> JsonPath {
    field
        .parse()
        .expect("indexed field names are valid JSON paths")
}

fn edge_config(dimension: usize) -> qdrant_edge::EdgeConfig {
    EdgeConfigBuilder::new()
        .vector(
            DENSE_VECTOR,
            EdgeVectorParamsBuilder::new(dimension, Distance::Cosine).build(),
        )
        .sparse_vector(
            SPARSE_VECTOR,
            EdgeSparseVectorParamsBuilder::new()
                .modifier(Modifier::Idf)
                .build(),
        )
        .build()
}

fn check_schema(shard: &EdgeShard, path: &Path, dimension: usize) -> Result<()> {
    let config = shard.config();
    let mismatch = |message: String| Error::SchemaMismatch {
        location: path.display().to_string(),
        message,
    };
    let dense = config
        .vectors
        .get(DENSE_VECTOR)
        .ok_or_else(|| mismatch(format!("it has no dense vector named {DENSE_VECTOR:?}")))?;
    if dense.size != dimension {
        return Err(mismatch(format!(
            "its dense vectors have dimension {}, the embedding model gives {dimension}",
            dense.size
        )));
    }
    if dense.distance != Distance::Cosine {
        return Err(mismatch(format!(
            "its dense distance is {:?}, not cosine",
            dense.distance
        )));
    }
    let sparse = config
        .sparse_vectors
        .get(SPARSE_VECTOR)
        .ok_or_else(|| mismatch(format!("it has no sparse vector named {SPARSE_VECTOR:?}")))?;
    if sparse.modifier != Some(Modifier::Idf) {
        return Err(mismatch(
            "its BM25 sparse vector lacks the IDF modifier".into(),
        ));
    }
    Ok(())
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::backend("edge task", e))?
}

fn engine(operation: &'static str) -> impl FnOnce(qdrant_edge::OperationError) -> Error {
    move |e| Error::backend(operation, e)
}

fn filter(value: Value) -> Filter {
    serde_json::from_value(value).expect("filters built here are valid")
}

fn keyword(key: &str, value: &str) -> Value {
    json!({ "key": key, "match": { "value": value } })
}

fn sentence_filter(query: &QueryFilter) -> Filter {
    let mut must = vec![keyword(KIND, KIND_SENTENCE)];
    if let Some(tenant) = &query.tenant {
        must.push(keyword("tenant", tenant));
    }
    if !query.doc_ids.is_empty() {
        must.push(json!({ "key": "doc_id", "match": { "any": query.doc_ids } }));
    }
    filter(json!({ "must": must }))
}

fn document_sentences(doc_id: &str) -> Filter {
    filter(json!({ "must": [keyword(KIND, KIND_SENTENCE), keyword("doc_id", doc_id)] }))
}

fn point_uuid(id: PointId) -> Result<Uuid> {
    match id {
        PointId::Uuid(uuid) => Ok(uuid),
        PointId::NumId(n) => Err(Error::backend(
            "read",
            format!("point {n} has a numeric id; Casement writes only UUIDs"),
        )),
    }
}

fn payload_map(payload: Option<Payload>) -> Map<String, Value> {
    payload.map(|p| p.0).unwrap_or_default()
}

fn upsert(points: Vec<PointStructPersisted>) -> UpdateOperation {
    UpdateOperation::PointOperation(PointOperations::UpsertPoints(
        PointInsertOperations::PointsList(points),
    ))
}

fn set_payload(
    payload: Map<String, Value>,
    points: Option<Vec<PointId>>,
    on: Option<Filter>,
) -> UpdateOperation {
    UpdateOperation::PayloadOperation(PayloadOps::SetPayload(SetPayloadOp {
        payload: Payload(payload),
        points,
        filter: on,
        key: None,
    }))
}

fn sparse_internal(sparse: SparseVector) -> VectorInternal {
    VectorInternal::Sparse(qdrant_edge::SparseVector {
        indices: sparse.indices,
        values: sparse.values,
    })
}

impl Inner {
    fn document(&self, doc_id: &str) -> Result<Option<DocumentState>> {
        let records = self
            .shard
            .retrieve(
                &[PointId::Uuid(document_point_id(doc_id))],
                Some(WithPayloadInterface::Bool(true)),
                Some(WithVector::Bool(false)),
            )
            .map_err(engine("read document"))?;
        records
            .into_iter()
            .next()
            .map(|r| document_from_payload(payload_map(r.payload)))
            .transpose()
    }

    fn records(&self, doc_id: &str) -> Result<Vec<SentenceRecord>> {
        let mut records = Vec::new();
        let mut offset = None;
        loop {
            let (page, next) = self
                .shard
                .scroll(ScrollRequest {
                    offset,
                    limit: Some(SCROLL_PAGE),
                    filter: Some(document_sentences(doc_id)),
                    with_payload: Some(WithPayloadInterface::Bool(true)),
                    with_vector: WithVector::Bool(false),
                    order_by: None,
                })
                .map_err(engine("scroll"))?;
            for record in page {
                records.push(sentence_from_payload(
                    point_uuid(record.id)?,
                    payload_map(record.payload),
                )?);
            }
            match next {
                Some(next) => offset = Some(next),
                None => return Ok(records),
            }
        }
    }

    fn sentence_point(
        &self,
        record: &SentenceRecord,
        dense: &[f32],
    ) -> Result<PointStructPersisted> {
        let mut vectors = HashMap::from([(
            DENSE_VECTOR.to_owned(),
            VectorInternal::Dense(dense.to_vec()),
        )]);
        let sparse = self.bm25.document(&record.embedding_input());
        if !sparse.is_empty() {
            vectors.insert(SPARSE_VECTOR.to_owned(), sparse_internal(sparse));
        }
        Ok(PointStructPersisted {
            id: PointId::Uuid(record.id),
            vector: VectorStructInternal::Named(vectors).into(),
            payload: Some(Payload(sentence_payload(record)?)),
        })
    }

    fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        check_vectors(plan, vectors, self.dimension)?;
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stale) = fence(self.document(&plan.doc_id)?.as_ref(), plan) {
            return Ok(stale);
        }
        let dense: HashMap<Uuid, &[f32]> = plan
            .embed
            .iter()
            .zip(vectors)
            .map(|(r, v)| (r.id, v.as_slice()))
            .collect();
        let mut batch: Vec<PointStructPersisted> = Vec::new();
        let mut deletes: Vec<PointId> = Vec::new();
        let mut upserted = 0;
        for operation in plan.operations().take(count) {
            if !matches!(operation, Operation::Upsert(_)) && !batch.is_empty() {
                upserted += batch.len();
                self.update("upsert", upsert(std::mem::take(&mut batch)))?;
            }
            if !matches!(operation, Operation::Delete(_)) && !deletes.is_empty() {
                let ids = std::mem::take(&mut deletes);
                self.update(
                    "delete",
                    UpdateOperation::PointOperation(PointOperations::DeletePoints { ids }),
                )?;
            }
            match operation {
                Operation::Upsert(record) => {
                    batch.push(self.sentence_point(record, dense[&record.id])?);
                    if batch.len() == UPSERT_BATCH {
                        upserted += batch.len();
                        self.update("upsert", upsert(std::mem::take(&mut batch)))?;
                    }
                }
                Operation::SetPayload(record) => {
                    // Only on an existing point: a payload update must never create one.
                    let payload = sentence_payload(record)?;
                    self.update(
                        "set payload",
                        set_payload(payload, Some(vec![PointId::Uuid(record.id)]), None),
                    )?;
                }
                Operation::Delete(id) => deletes.push(PointId::Uuid(id)),
                Operation::StampRevision { doc_id, revision } => {
                    let mut payload = Map::new();
                    payload.insert("revision".into(), Value::from(revision));
                    self.update(
                        "stamp revision",
                        set_payload(payload, None, Some(document_sentences(doc_id))),
                    )?;
                }
                Operation::PutDocument(state) => {
                    let point = PointStructPersisted {
                        id: PointId::Uuid(document_point_id(&state.doc_id)),
                        vector: VectorStructInternal::Named(HashMap::new()).into(),
                        payload: Some(Payload(document_payload(state)?)),
                    };
                    self.update("put document", upsert(vec![point]))?;
                }
            }
        }
        if !batch.is_empty() {
            upserted += batch.len();
            self.update("upsert", upsert(batch))?;
        }
        if !deletes.is_empty() {
            self.update(
                "delete",
                UpdateOperation::PointOperation(PointOperations::DeletePoints { ids: deletes }),
            )?;
        }
        if self.flush_every_write {
            self.flush_locked();
        }
        self.unindexed.fetch_add(upserted, Ordering::Relaxed);
        Ok(Applied::Written)
    }

    fn update(&self, operation: &'static str, update: UpdateOperation) -> Result<()> {
        self.shard.update(update).map_err(engine(operation))
    }

    /// Flushes unless an index build runs (the engine's flush must not race it); the caller
    /// holds `writes`.
    fn flush_locked(&self) {
        if !self.optimizing.load(Ordering::Acquire) {
            self.shard.flush();
        }
    }

    fn flush(&self) -> Result<()> {
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        self.flush_locked();
        Ok(())
    }

    /// Builds the index; with `wait`, after a build in progress, else not at all then.
    fn optimize(&self, wait: bool) -> Result<bool> {
        let _building = match self.building.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::WouldBlock) if wait => {
                self.building.lock().unwrap_or_else(|e| e.into_inner())
            }
            Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        };
        {
            let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
            if self.optimizing.swap(true, Ordering::AcqRel) {
                return Ok(false);
            }
        }
        let before = self.unindexed.load(Ordering::Relaxed);
        let result = self.shard.optimize().map_err(engine("optimize"));
        {
            let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
            self.optimizing.store(false, Ordering::Release);
            if result.is_ok() {
                let _ = self
                    .unindexed
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        Some(n.saturating_sub(before))
                    });
                self.shard.flush();
            }
        }
        result
    }

    fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
        if query.dense.len() != self.dimension {
            return Err(Error::Dimension {
                expected: self.dimension,
                got: query.dense.len(),
            });
        }
        let filter = sentence_filter(&query.filter);
        let dense = ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery {
            query: VectorInternal::Dense(query.dense.clone()),
            using: Some(DENSE_VECTOR.to_owned()),
        }));
        let sparse_vector = self.bm25.query(&query.text);
        let sparse = (!sparse_vector.is_empty()).then(|| {
            ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery {
                query: sparse_internal(sparse_vector),
                using: Some(SPARSE_VECTOR.to_owned()),
            }))
        });
        let prefetch = |scoring: &ScoringQuery| Prefetch {
            prefetches: Vec::new(),
            query: Some(scoring.clone()),
            limit: query.candidates,
            params: None,
            filter: Some(filter.clone()),
            score_threshold: None,
        };
        let mut prefetches = vec![prefetch(&dense)];
        prefetches.extend(sparse.iter().map(prefetch));
        let fused = self
            .shard
            .query(QueryRequest {
                prefetches,
                query: Some(ScoringQuery::Fusion(Fusion::Rrf {
                    k: self.rrf_k,
                    weights: None,
                })),
                filter: Some(filter.clone()),
                score_threshold: None,
                limit: query.limit,
                offset: 0,
                params: None,
                with_vector: WithVector::Bool(false),
                with_payload: WithPayloadInterface::Bool(true),
            })
            .map_err(engine("query"))?;
        let ranks = |scoring: Option<&ScoringQuery>| -> Result<HashMap<PointId, usize>> {
            let Some(scoring) = scoring.filter(|_| query.channel_ranks) else {
                return Ok(HashMap::new());
            };
            let points = self
                .shard
                .query(QueryRequest {
                    prefetches: Vec::new(),
                    query: Some(scoring.clone()),
                    filter: Some(filter.clone()),
                    score_threshold: None,
                    limit: query.candidates,
                    offset: 0,
                    params: None,
                    with_vector: WithVector::Bool(false),
                    with_payload: WithPayloadInterface::Bool(false),
                })
                .map_err(engine("query"))?;
            Ok(points
                .iter()
                .enumerate()
                .map(|(i, p)| (p.id, i + 1))
                .collect())
        };
        let dense_ranks = ranks(Some(&dense))?;
        let sparse_ranks = ranks(sparse.as_ref())?;
        fused
            .into_iter()
            .map(|point| {
                Ok(Hit {
                    dense_rank: dense_ranks.get(&point.id).copied(),
                    sparse_rank: sparse_ranks.get(&point.id).copied(),
                    score: point.score,
                    record: sentence_from_payload(
                        point_uuid(point.id)?,
                        payload_map(point.payload),
                    )?,
                })
            })
            .collect()
    }

    fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        let ids: Vec<PointId> = ids.iter().copied().map(PointId::Uuid).collect();
        let records = self
            .shard
            .retrieve(
                &ids,
                Some(WithPayloadInterface::Bool(false)),
                Some(WithVector::Selector(vec![DENSE_VECTOR.to_owned()])),
            )
            .map_err(engine("retrieve"))?;
        let mut vectors = HashMap::with_capacity(records.len());
        for record in records {
            let id = point_uuid(record.id)?;
            if let Some(VectorStructInternal::Named(mut named)) = record.vector
                && let Some(VectorInternal::Dense(dense)) = named.remove(DENSE_VECTOR)
            {
                vectors.insert(id, dense);
            }
        }
        Ok(vectors)
    }

    fn count(&self, value: Value) -> Result<u64> {
        self.shard
            .count(CountRequest {
                filter: Some(filter(value)),
                exact: true,
            })
            .map(|n| n as u64)
            .map_err(engine("count"))
    }

    fn stats(&self) -> Result<StoreStats> {
        let documents = json!([keyword(KIND, KIND_DOCUMENT)]);
        let deleted = json!([{ "key": "deleted", "match": { "value": true } }]);
        Ok(StoreStats {
            points: self.count(json!({ "must": [keyword(KIND, KIND_SENTENCE)] }))?,
            documents: self.count(json!({ "must": documents, "must_not": deleted }))?,
            tombstones: self
                .count(json!({ "must": [keyword(KIND, KIND_DOCUMENT), deleted[0]] }))?,
            disk_bytes: Some(disk_usage(&self.path)),
        })
    }
}

/// Bytes allocated on disk under `path` (allocated blocks, not file lengths: the
/// write-ahead log preallocates its segments sparsely).
fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_usage(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

impl Store for EdgeStore {
    fn dimension(&self) -> usize {
        self.inner.dimension
    }

    async fn document(&self, doc_id: &str) -> Result<Option<DocumentState>> {
        let (inner, doc_id) = (self.inner.clone(), doc_id.to_owned());
        blocking(move || inner.document(&doc_id)).await
    }

    async fn records(&self, doc_id: &str) -> Result<Vec<SentenceRecord>> {
        let (inner, doc_id) = (self.inner.clone(), doc_id.to_owned());
        blocking(move || inner.records(&doc_id)).await
    }

    async fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        let (inner, plan, vectors) = (self.inner.clone(), plan.clone(), vectors.to_vec());
        let applied = blocking({
            let inner = inner.clone();
            move || inner.apply_first(&plan, &vectors, count)
        })
        .await?;
        let due = inner.index_after_points > 0
            && inner.unindexed.load(Ordering::Relaxed) >= inner.index_after_points
            && !inner.optimizing.load(Ordering::Acquire);
        if due {
            // In the background: writes and queries go on while the index is built.
            std::thread::spawn(move || {
                if let Err(error) = inner.optimize(false) {
                    eprintln!("casement-store: building the vector index failed: {error}");
                }
            });
        }
        Ok(applied)
    }

    async fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
        let (inner, query) = (self.inner.clone(), query.clone());
        blocking(move || inner.query(&query)).await
    }

    async fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        let (inner, ids) = (self.inner.clone(), ids.to_vec());
        blocking(move || inner.dense_vectors(&ids)).await
    }

    async fn stats(&self) -> Result<StoreStats> {
        let inner = self.inner.clone();
        blocking(move || inner.stats()).await
    }
}
