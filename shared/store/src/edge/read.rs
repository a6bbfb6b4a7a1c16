//! Reads: document state, records, hybrid query, vectors, stats.

use std::collections::HashMap;
use std::path::Path;

use casement_text::{DocRef, DocumentState, SentenceRecord};
use qdrant_edge::{
    CountRequest, Filter, Fusion, NamedQuery, Payload, PointId, Prefetch, QueryEnum, QueryRequest,
    ScoringQuery, ScrollRequest, VectorInternal, VectorStructInternal, WithPayloadInterface,
    WithVector,
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{Inner, engine};
use crate::bm25::SparseVector;
use crate::error::{Error, Result};
use crate::schema::{
    ACCESS_GROUPS, DENSE_VECTOR, KIND, KIND_DOCUMENT, KIND_SENTENCE, PUBLIC, SPARSE_VECTOR,
    document_from_payload, document_point_id, sentence_from_payload,
};
use crate::{DiskUsage, Hit, HybridQuery, MetadataValues, QueryFilter, Reader, StoreStats};

const SCROLL_PAGE: usize = 1_000;

pub(super) fn filter(value: Value) -> Filter {
    serde_json::from_value(value).expect("filters built here are valid")
}

pub(super) fn keyword(key: &str, value: &str) -> Value {
    json!({ "key": key, "match": { "value": value } })
}

pub(super) fn sentence_filter(query: &QueryFilter) -> Filter {
    let mut must = vec![keyword(KIND, KIND_SENTENCE)];
    if let Some(tenant) = &query.tenant {
        must.push(keyword("tenant", tenant));
    }
    if !query.doc_ids.is_empty() {
        must.push(json!({ "key": "doc_id", "match": { "any": query.doc_ids } }));
    }
    for condition in &query.metadata {
        let key = crate::schema::metadata_field(&condition.key);
        must.push(match &condition.values {
            MetadataValues::Keywords(values) => json!({ "key": key, "match": { "any": values } }),
            MetadataValues::Integers(values) => json!({ "key": key, "match": { "any": values } }),
            MetadataValues::Bool(value) => json!({ "key": key, "match": { "value": value } }),
        });
    }
    if let Reader::Groups(groups) = &query.reader {
        // `Access::readable_by`: public (or written before access existed), or one of the
        // reader's groups.
        let mut should = vec![
            json!({ "key": PUBLIC, "match": { "value": true } }),
            json!({ "is_empty": { "key": PUBLIC } }),
        ];
        if !groups.is_empty() {
            should.push(json!({ "key": ACCESS_GROUPS, "match": { "any": groups } }));
        }
        must.push(json!({ "should": should }));
    }
    filter(json!({ "must": must }))
}

/// The sentence points of one document: its id, and its tenant (or none).
pub(super) fn document_sentences(doc: DocRef<'_>) -> Filter {
    let tenant = match doc.tenant {
        Some(tenant) => keyword("tenant", tenant),
        None => json!({ "is_empty": { "key": "tenant" } }),
    };
    filter(json!({ "must": [keyword(KIND, KIND_SENTENCE), keyword("doc_id", doc.doc_id), tenant] }))
}

pub(super) fn point_uuid(id: PointId) -> Result<Uuid> {
    match id {
        PointId::Uuid(uuid) => Ok(uuid),
        PointId::NumId(n) => Err(Error::backend(
            "read",
            format!("point {n} has a numeric id; Casement writes only UUIDs"),
        )),
    }
}

pub(super) fn payload_map(payload: Option<Payload>) -> Map<String, Value> {
    payload.map(|p| p.0).unwrap_or_default()
}

pub(super) fn sparse_internal(sparse: SparseVector) -> VectorInternal {
    VectorInternal::Sparse(qdrant_edge::SparseVector {
        indices: sparse.indices,
        values: sparse.values,
    })
}

impl Inner {
    pub(super) fn document(&self, doc: DocRef<'_>) -> Result<Option<DocumentState>> {
        let records = self
            .shard()?
            .retrieve(
                &[PointId::Uuid(document_point_id(doc))],
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

    pub(super) fn settings(&self) -> Result<Option<crate::IndexSettings>> {
        let records = self
            .shard()?
            .retrieve(
                &[PointId::Uuid(crate::schema::settings_point_id())],
                Some(WithPayloadInterface::Bool(true)),
                Some(WithVector::Bool(false)),
            )
            .map_err(engine("read settings"))?;
        records
            .into_iter()
            .next()
            .map(|r| crate::schema::settings_from_payload(payload_map(r.payload)))
            .transpose()
    }

    pub(super) fn records(&self, doc: DocRef<'_>) -> Result<Vec<SentenceRecord>> {
        let mut records = Vec::new();
        self.scroll_all(
            document_sentences(doc),
            WithPayloadInterface::Bool(true),
            |id, payload| {
                records.push(sentence_from_payload(point_uuid(id)?, payload)?);
                Ok(())
            },
        )?;
        Ok(records)
    }

    pub(super) fn documents(&self) -> Result<Vec<crate::IndexedDocument>> {
        let mut states = Vec::new();
        self.scroll_all(
            filter(json!({ "must": [keyword(KIND, KIND_DOCUMENT)] })),
            WithPayloadInterface::Bool(true),
            |_, payload| {
                states.push(document_from_payload(payload)?);
                Ok(())
            },
        )?;
        let mut tally = crate::documents::DocumentTally::default();
        let fields: WithPayloadInterface = serde_json::from_value(json!(["doc_id", "tenant"]))
            .expect("a list of payload keys is a valid selector");
        self.scroll_all(
            filter(json!({ "must": [keyword(KIND, KIND_SENTENCE)] })),
            fields,
            |_, payload| {
                let text = |key: &str| payload.get(key).and_then(Value::as_str);
                tally.sentence(text("tenant"), text("doc_id").unwrap_or_default());
                Ok(())
            },
        )?;
        Ok(tally.finish(states))
    }

    /// Every point `filter` selects, page by page, with the payload `with_payload` asks for.
    fn scroll_all(
        &self,
        filter: Filter,
        with_payload: WithPayloadInterface,
        mut each: impl FnMut(PointId, Map<String, Value>) -> Result<()>,
    ) -> Result<()> {
        let mut offset = None;
        loop {
            let (page, next) = self
                .shard()?
                .scroll(ScrollRequest {
                    offset,
                    limit: Some(SCROLL_PAGE),
                    filter: Some(filter.clone()),
                    with_payload: Some(with_payload.clone()),
                    with_vector: WithVector::Bool(false),
                    order_by: None,
                })
                .map_err(engine("scroll"))?;
            for record in page {
                each(record.id, payload_map(record.payload))?;
            }
            match next {
                Some(next) => offset = Some(next),
                None => return Ok(()),
            }
        }
    }

    pub(super) fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
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
        let mut prefetches = Vec::new();
        if query.channels.dense() {
            prefetches.push(prefetch(&dense));
        }
        if query.channels.bm25() {
            prefetches.extend(sparse.iter().map(prefetch));
        }
        if prefetches.is_empty() {
            return Ok(Vec::new());
        }
        let fused = self
            .shard()?
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
                .shard()?
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

    pub(super) fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        let ids: Vec<PointId> = ids.iter().copied().map(PointId::Uuid).collect();
        let records = self
            .shard()?
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
        self.shard()?
            .count(CountRequest {
                filter: Some(filter(value)),
                exact: true,
            })
            .map(|n| n as u64)
            .map_err(engine("count"))
    }

    pub(super) fn stats(&self) -> Result<StoreStats> {
        let documents = json!([keyword(KIND, KIND_DOCUMENT)]);
        let deleted = json!([{ "key": "deleted", "match": { "value": true } }]);
        Ok(StoreStats {
            points: self.count(json!({ "must": [keyword(KIND, KIND_SENTENCE)] }))?,
            documents: self.count(json!({ "must": documents, "must_not": deleted }))?,
            tombstones: self
                .count(json!({ "must": [keyword(KIND, KIND_DOCUMENT), deleted[0]] }))?,
            disk: Some(disk_usage_of(&self.path)),
            disk_available: fs4::available_space(&self.path).ok(),
            compaction: Some(self.compaction_stats()),
            replaced: false,
        })
    }
}

/// Bytes on disk of the store under `path`: its write-ahead log, and the rest.
pub(crate) fn disk_usage_of(path: &Path) -> DiskUsage {
    let (all, wal) = (disk_usage(path), disk_usage(&path.join("wal")));
    DiskUsage {
        segments: all.saturating_sub(wal),
        wal,
    }
}

/// Bytes allocated on disk under `path` (allocated blocks, not file lengths: the
/// write-ahead log preallocates its segments sparsely).
pub fn disk_usage(path: &Path) -> u64 {
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
