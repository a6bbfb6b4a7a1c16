//! Qdrant server backend through `qdrant-client` (gRPC): for users who run Qdrant or a
//! Qdrant cluster. The collection is created when missing, with the same schema as on
//! Edge; every write waits until applied (`wait=true`).

use std::collections::HashMap;
use std::time::Duration;

use casement_text::{ChangePlan, DocumentState, Operation, SentenceRecord};
use qdrant_client::qdrant::{
    Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
    DeletePointsBuilder, Distance, FieldType as QdrantFieldType, Filter, GetPointsBuilder,
    Modifier, NamedVectors, PointId, PointStruct, PointsIdsList, PrefetchQueryBuilder, Query,
    QueryBatchPointsBuilder, QueryPointsBuilder, RrfBuilder, ScoredPoint, ScrollPointsBuilder,
    SetPayloadPointsBuilder, SparseVectorParamsBuilder, SparseVectorsConfigBuilder, Vector,
    VectorInput, VectorParamsBuilder, VectorsConfigBuilder, VectorsSelector,
    point_id::PointIdOptions, vector_output::Vector as VectorOutputKind,
    vectors_config::Config as VectorsConfigKind,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::bm25::Bm25;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::schema::{
    DENSE_VECTOR, FieldType, INDEXED_FIELDS, KIND, KIND_DOCUMENT, KIND_SENTENCE, SPARSE_VECTOR,
    document_from_payload, document_payload, document_point_id, sentence_from_payload,
    sentence_payload,
};
use crate::{Applied, Hit, HybridQuery, QueryFilter, Store, StoreStats, check_vectors, fence};

const SCROLL_PAGE: u32 = 1_000;
const UPSERT_BATCH: usize = 256;

/// A Qdrant server collection.
#[derive(Clone)]
pub struct ServerStore {
    client: std::sync::Arc<Qdrant>,
    collection: String,
    bm25: std::sync::Arc<Bm25>,
    dimension: usize,
    rrf_k: usize,
}

impl std::fmt::Debug for ServerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStore")
            .field("collection", &self.collection)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

fn grpc(operation: &'static str) -> impl FnOnce(QdrantError) -> Error {
    move |e| match e {
        QdrantError::ResponseError { status }
            if matches!(
                status.code() as i32,
                GRPC_UNAVAILABLE | GRPC_DEADLINE_EXCEEDED
            ) =>
        {
            Error::Unavailable(format!("{operation}: {}", status.message()))
        }
        other => Error::backend(operation, other),
    }
}

/// gRPC status codes worth a retry (numbering of the gRPC specification).
const GRPC_DEADLINE_EXCEEDED: i32 = 4;
const GRPC_UNAVAILABLE: i32 = 14;

fn keyword(key: &str, value: &str) -> Condition {
    Condition::matches(key, value.to_owned())
}

fn sentence_filter(query: &QueryFilter) -> Filter {
    let mut must = vec![keyword(KIND, KIND_SENTENCE)];
    if let Some(tenant) = &query.tenant {
        must.push(keyword("tenant", tenant));
    }
    if !query.doc_ids.is_empty() {
        must.push(Condition::matches("doc_id", query.doc_ids.clone()));
    }
    Filter::must(must)
}

fn document_sentences(doc_id: &str) -> Filter {
    Filter::must([keyword(KIND, KIND_SENTENCE), keyword("doc_id", doc_id)])
}

fn point_id(id: Uuid) -> PointId {
    PointId::from(id.to_string())
}

fn point_uuid(id: Option<PointId>) -> Result<Uuid> {
    match id.and_then(|id| id.point_id_options) {
        Some(PointIdOptions::Uuid(text)) => Uuid::parse_str(&text)
            .map_err(|e| Error::backend("read", format!("point id {text:?}: {e}"))),
        other => Err(Error::backend(
            "read",
            format!("point id {other:?} is not a UUID; Casement writes only UUIDs"),
        )),
    }
}

fn json_payload(payload: HashMap<String, qdrant_client::qdrant::Value>) -> Map<String, Value> {
    payload
        .into_iter()
        .map(|(k, v)| (k, v.into_json()))
        .collect()
}

impl ServerStore {
    /// Connects and creates the collection (with its payload indexes) when missing; fails
    /// when an existing collection has another dense dimension.
    pub async fn open(config: &StoreConfig, dimension: usize) -> Result<Self> {
        config.validate().map_err(Error::Config)?;
        let settings = &config.server;
        let client = Qdrant::from_url(&settings.url)
            .api_key(settings.api_key.clone())
            .timeout(Duration::from_secs(settings.timeout_secs))
            .connect_timeout(Duration::from_secs(settings.connect_timeout_secs))
            .skip_compatibility_check()
            .build()
            .map_err(|e| Error::Config(format!("store.server: {e}")))?;
        let store = Self {
            client: std::sync::Arc::new(client),
            collection: config.collection.clone(),
            bm25: std::sync::Arc::new(Bm25::new(&config.bm25).map_err(Error::Config)?),
            dimension,
            rrf_k: config.rrf_k,
        };
        store.ensure_collection().await?;
        Ok(store)
    }

    /// Drops the whole collection (tests and tear-down; the indexer never calls it).
    pub async fn delete_collection(&self) -> Result<()> {
        self.client
            .delete_collection(&self.collection)
            .await
            .map(drop)
            .map_err(grpc("delete collection"))
    }

    async fn ensure_collection(&self) -> Result<()> {
        let exists = self
            .client
            .collection_exists(&self.collection)
            .await
            .map_err(grpc("collection exists"))?;
        if exists {
            self.check_schema().await?;
        } else {
            let mut dense = VectorsConfigBuilder::default();
            dense.add_named_vector_params(
                DENSE_VECTOR,
                VectorParamsBuilder::new(self.dimension as u64, Distance::Cosine),
            );
            let mut sparse = SparseVectorsConfigBuilder::default();
            sparse.add_named_vector_params(
                SPARSE_VECTOR,
                SparseVectorParamsBuilder::default().modifier(Modifier::Idf),
            );
            self.client
                .create_collection(
                    CreateCollectionBuilder::new(&self.collection)
                        .vectors_config(dense)
                        .sparse_vectors_config(sparse),
                )
                .await
                .map_err(grpc("create collection"))?;
        }
        for (field, kind) in INDEXED_FIELDS {
            let kind = match kind {
                FieldType::Keyword => QdrantFieldType::Keyword,
                FieldType::Integer => QdrantFieldType::Integer,
            };
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(&self.collection, field, kind)
                        .wait(true),
                )
                .await
                .map_err(grpc("create payload index"))?;
        }
        Ok(())
    }

    async fn check_schema(&self) -> Result<()> {
        let info = self
            .client
            .collection_info(&self.collection)
            .await
            .map_err(grpc("collection info"))?;
        let mismatch = |message: String| Error::SchemaMismatch {
            location: format!("collection {}", self.collection),
            message,
        };
        let params = info
            .result
            .and_then(|r| r.config)
            .and_then(|c| c.params)
            .ok_or_else(|| mismatch("the server returned no collection parameters".into()))?;
        let dense = match params.vectors_config.and_then(|v| v.config) {
            Some(VectorsConfigKind::ParamsMap(map)) => map.map.get(DENSE_VECTOR).cloned(),
            _ => None,
        }
        .ok_or_else(|| mismatch(format!("it has no dense vector named {DENSE_VECTOR:?}")))?;
        if dense.size != self.dimension as u64 {
            return Err(mismatch(format!(
                "its dense vectors have dimension {}, the embedding model gives {}",
                dense.size, self.dimension
            )));
        }
        let sparse = params
            .sparse_vectors_config
            .and_then(|s| s.map.get(SPARSE_VECTOR).cloned())
            .ok_or_else(|| mismatch(format!("it has no sparse vector named {SPARSE_VECTOR:?}")))?;
        if sparse.modifier != Some(Modifier::Idf as i32) {
            return Err(mismatch(
                "its BM25 sparse vector lacks the IDF modifier".into(),
            ));
        }
        Ok(())
    }

    fn sentence_point(&self, record: &SentenceRecord, dense: &[f32]) -> Result<PointStruct> {
        let mut vectors =
            NamedVectors::default().add_vector(DENSE_VECTOR, Vector::new_dense(dense.to_vec()));
        let sparse = self.bm25.document(&record.embedding_input());
        if !sparse.is_empty() {
            vectors = vectors.add_vector(
                SPARSE_VECTOR,
                Vector::new_sparse(sparse.indices, sparse.values),
            );
        }
        Ok(PointStruct::new(
            point_id(record.id),
            vectors,
            Payload::from(sentence_payload(record)?),
        ))
    }

    async fn upsert(&self, points: Vec<PointStruct>) -> Result<()> {
        self.client
            .upsert_points(
                qdrant_client::qdrant::UpsertPointsBuilder::new(&self.collection, points)
                    .wait(true),
            )
            .await
            .map(drop)
            .map_err(grpc("upsert"))
    }

    async fn delete(&self, ids: Vec<PointId>) -> Result<()> {
        self.client
            .delete_points(
                DeletePointsBuilder::new(&self.collection)
                    .points(PointsIdsList { ids })
                    .wait(true),
            )
            .await
            .map(drop)
            .map_err(grpc("delete"))
    }

    async fn set_payload(&self, payload: Map<String, Value>, target: SetTarget) -> Result<()> {
        let builder =
            SetPayloadPointsBuilder::new(&self.collection, Payload::from(payload)).wait(true);
        let builder = match target {
            SetTarget::Point(id) => builder.points_selector(PointsIdsList {
                ids: vec![point_id(id)],
            }),
            SetTarget::Filter(filter) => builder.points_selector(filter),
        };
        self.client
            .set_payload(builder)
            .await
            .map(drop)
            .map_err(grpc("set payload"))
    }

    async fn count(&self, filter: Filter) -> Result<u64> {
        self.client
            .count(
                CountPointsBuilder::new(&self.collection)
                    .filter(filter)
                    .exact(true),
            )
            .await
            .map(|r| r.result.map_or(0, |c| c.count))
            .map_err(grpc("count"))
    }
}

enum SetTarget {
    Point(Uuid),
    Filter(Filter),
}

fn hit(
    point: ScoredPoint,
    dense: &HashMap<Uuid, usize>,
    sparse: &HashMap<Uuid, usize>,
) -> Result<Hit> {
    let id = point_uuid(point.id)?;
    Ok(Hit {
        dense_rank: dense.get(&id).copied(),
        sparse_rank: sparse.get(&id).copied(),
        score: point.score,
        record: sentence_from_payload(id, json_payload(point.payload))?,
    })
}

impl Store for ServerStore {
    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn document(&self, doc_id: &str) -> Result<Option<DocumentState>> {
        let response = self
            .client
            .get_points(
                GetPointsBuilder::new(&self.collection, vec![point_id(document_point_id(doc_id))])
                    .with_payload(true)
                    .with_vectors(false),
            )
            .await
            .map_err(grpc("read document"))?;
        response
            .result
            .into_iter()
            .next()
            .map(|point| document_from_payload(json_payload(point.payload)))
            .transpose()
    }

    async fn records(&self, doc_id: &str) -> Result<Vec<SentenceRecord>> {
        let mut records = Vec::new();
        let mut offset: Option<PointId> = None;
        loop {
            let mut request = ScrollPointsBuilder::new(&self.collection)
                .filter(document_sentences(doc_id))
                .limit(SCROLL_PAGE)
                .with_payload(true)
                .with_vectors(false);
            if let Some(offset) = offset.take() {
                request = request.offset(offset);
            }
            let page = self.client.scroll(request).await.map_err(grpc("scroll"))?;
            for point in page.result {
                let id = point_uuid(point.id)?;
                records.push(sentence_from_payload(id, json_payload(point.payload))?);
            }
            match page.next_page_offset {
                Some(next) => offset = Some(next),
                None => return Ok(records),
            }
        }
    }

    async fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        check_vectors(plan, vectors, self.dimension)?;
        if let Some(stale) = fence(self.document(&plan.doc_id).await?.as_ref(), plan) {
            return Ok(stale);
        }
        let dense: HashMap<Uuid, &[f32]> = plan
            .embed
            .iter()
            .zip(vectors)
            .map(|(r, v)| (r.id, v.as_slice()))
            .collect();
        let mut batch = Vec::new();
        let mut deletes = Vec::new();
        for operation in plan.operations().take(count) {
            if !matches!(operation, Operation::Upsert(_)) && !batch.is_empty() {
                self.upsert(std::mem::take(&mut batch)).await?;
            }
            if !matches!(operation, Operation::Delete(_)) && !deletes.is_empty() {
                self.delete(std::mem::take(&mut deletes)).await?;
            }
            match operation {
                Operation::Upsert(record) => {
                    batch.push(self.sentence_point(record, dense[&record.id])?);
                    if batch.len() == UPSERT_BATCH {
                        self.upsert(std::mem::take(&mut batch)).await?;
                    }
                }
                Operation::SetPayload(record) => {
                    self.set_payload(sentence_payload(record)?, SetTarget::Point(record.id))
                        .await?;
                }
                Operation::Delete(id) => deletes.push(point_id(id)),
                Operation::StampRevision { doc_id, revision } => {
                    let mut payload = Map::new();
                    payload.insert("revision".into(), Value::from(revision));
                    self.set_payload(payload, SetTarget::Filter(document_sentences(doc_id)))
                        .await?;
                }
                Operation::PutDocument(state) => {
                    let point = PointStruct::new(
                        point_id(document_point_id(&state.doc_id)),
                        NamedVectors::default(),
                        Payload::from(document_payload(state)?),
                    );
                    self.upsert(vec![point]).await?;
                }
            }
        }
        if !batch.is_empty() {
            self.upsert(batch).await?;
        }
        if !deletes.is_empty() {
            self.delete(deletes).await?;
        }
        Ok(Applied::Written)
    }

    async fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
        if query.dense.len() != self.dimension {
            return Err(Error::Dimension {
                expected: self.dimension,
                got: query.dense.len(),
            });
        }
        let filter = sentence_filter(&query.filter);
        let sparse = self.bm25.query(&query.text);
        let dense_query = Query::new_nearest(query.dense.clone());
        let sparse_query = (!sparse.is_empty())
            .then(|| Query::new_nearest(VectorInput::new_sparse(sparse.indices, sparse.values)));
        let mut fused = QueryPointsBuilder::new(&self.collection)
            .add_prefetch(
                PrefetchQueryBuilder::default()
                    .query(dense_query.clone())
                    .using(DENSE_VECTOR)
                    .filter(filter.clone())
                    .limit(query.candidates as u64),
            )
            .query(Query::new_rrf(RrfBuilder::with_k(self.rrf_k as u32)))
            .filter(filter.clone())
            .limit(query.limit as u64)
            .with_payload(true);
        if let Some(sparse_query) = &sparse_query {
            fused = fused.add_prefetch(
                PrefetchQueryBuilder::default()
                    .query(sparse_query.clone())
                    .using(SPARSE_VECTOR)
                    .filter(filter.clone())
                    .limit(query.candidates as u64),
            );
        }
        let channel = |q: &Query, using: &str| {
            QueryPointsBuilder::new(&self.collection)
                .query(q.clone())
                .using(using)
                .filter(filter.clone())
                .limit(query.candidates as u64)
                .with_payload(false)
                .build()
        };
        let mut requests = vec![fused.build()];
        if query.channel_ranks {
            requests.push(channel(&dense_query, DENSE_VECTOR));
            if let Some(sparse_query) = &sparse_query {
                requests.push(channel(sparse_query, SPARSE_VECTOR));
            }
        }
        // One round trip for the fused query and, when asked, the two channels alone.
        let mut results = self
            .client
            .query_batch(QueryBatchPointsBuilder::new(&self.collection, requests))
            .await
            .map_err(grpc("query"))?
            .result
            .into_iter();
        let fused = results.next().map(|r| r.result).unwrap_or_default();
        let ranks = |points: Option<Vec<ScoredPoint>>| -> Result<HashMap<Uuid, usize>> {
            points
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(i, p)| Ok((point_uuid(p.id)?, i + 1)))
                .collect()
        };
        let dense_ranks = ranks(results.next().map(|r| r.result))?;
        let sparse_ranks = ranks(results.next().map(|r| r.result))?;
        fused
            .into_iter()
            .map(|point| hit(point, &dense_ranks, &sparse_ranks))
            .collect()
    }

    async fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        let response = self
            .client
            .get_points(
                GetPointsBuilder::new(
                    &self.collection,
                    ids.iter().copied().map(point_id).collect::<Vec<_>>(),
                )
                .with_payload(false)
                .with_vectors(VectorsSelector {
                    names: vec![DENSE_VECTOR.to_owned()],
                }),
            )
            .await
            .map_err(grpc("retrieve"))?;
        let mut vectors = HashMap::new();
        for point in response.result {
            let id = point_uuid(point.id)?;
            let dense = point
                .vectors
                .and_then(|v| v.get_vector_by_name(DENSE_VECTOR));
            if let Some(VectorOutputKind::Dense(dense)) = dense {
                vectors.insert(id, dense.data);
            }
        }
        Ok(vectors)
    }

    async fn stats(&self) -> Result<StoreStats> {
        let deleted = Condition::matches("deleted", true);
        Ok(StoreStats {
            points: self
                .count(Filter::must([keyword(KIND, KIND_SENTENCE)]))
                .await?,
            documents: self
                .count(Filter {
                    must: vec![keyword(KIND, KIND_DOCUMENT)],
                    must_not: vec![deleted.clone()],
                    ..Filter::default()
                })
                .await?,
            tombstones: self
                .count(Filter::must([keyword(KIND, KIND_DOCUMENT), deleted]))
                .await?,
            disk_bytes: None,
        })
    }
}
