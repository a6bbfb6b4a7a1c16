//! Reads: document state, records, hybrid query, vectors, stats.

use std::collections::HashMap;

use casement_text::{DocRef, DocumentState, SentenceRecord};
use qdrant_client::qdrant::PayloadIncludeSelector;
use qdrant_client::qdrant::with_payload_selector::SelectorOptions;
use qdrant_client::qdrant::{
    Condition, CountPointsBuilder, Filter, GetPointsBuilder, PointId, PrefetchQueryBuilder, Query,
    QueryBatchPointsBuilder, QueryPointsBuilder, RrfBuilder, ScoredPoint, ScrollPointsBuilder,
    VectorInput, VectorsSelector, point_id::PointIdOptions,
    vector_output::Vector as VectorOutputKind,
};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{ServerStore, grpc};
use crate::error::{Error, Result};
use crate::schema::{
    ACCESS_GROUPS, DENSE_VECTOR, KIND, KIND_DOCUMENT, KIND_SENTENCE, PUBLIC, SPARSE_VECTOR,
    document_from_payload, document_point_id, sentence_from_payload,
};
use crate::{Hit, HybridQuery, MetadataValues, QueryFilter, Reader, StoreStats};

const SCROLL_PAGE: u32 = 1_000;

pub(super) fn keyword(key: &str, value: &str) -> Condition {
    Condition::matches(key, value.to_owned())
}

pub(super) fn sentence_filter(query: &QueryFilter) -> Filter {
    let mut must = vec![keyword(KIND, KIND_SENTENCE)];
    if let Some(tenant) = &query.tenant {
        must.push(keyword("tenant", tenant));
    }
    if !query.doc_ids.is_empty() {
        must.push(Condition::matches("doc_id", query.doc_ids.clone()));
    }
    for condition in &query.metadata {
        let key = crate::schema::metadata_field(&condition.key);
        must.push(match &condition.values {
            MetadataValues::Keywords(values) => Condition::matches(key, values.clone()),
            MetadataValues::Integers(values) => Condition::matches(key, values.clone()),
            MetadataValues::Bool(value) => Condition::matches(key, *value),
        });
    }
    if let Reader::Groups(groups) = &query.reader {
        // `Access::readable_by`: public (or written before access existed), or one of the
        // reader's groups.
        let mut should = vec![
            Condition::matches(PUBLIC, true),
            Condition::is_empty(PUBLIC),
        ];
        if !groups.is_empty() {
            should.push(Condition::matches(ACCESS_GROUPS, groups.clone()));
        }
        must.push(Filter::should(should).into());
    }
    Filter::must(must)
}

/// The sentence points of one document: its id, and its tenant (or none).
pub(super) fn document_sentences(doc: DocRef<'_>) -> Filter {
    let tenant = match doc.tenant {
        Some(tenant) => keyword("tenant", tenant),
        None => Condition::is_empty("tenant"),
    };
    Filter::must([
        keyword(KIND, KIND_SENTENCE),
        keyword("doc_id", doc.doc_id),
        tenant,
    ])
}

pub(super) fn point_id(id: Uuid) -> PointId {
    PointId::from(id.to_string())
}

pub(super) fn point_uuid(id: Option<PointId>) -> Result<Uuid> {
    match id.and_then(|id| id.point_id_options) {
        Some(PointIdOptions::Uuid(text)) => Uuid::parse_str(&text)
            .map_err(|e| Error::backend("read", format!("point id {text:?}: {e}"))),
        other => Err(Error::backend(
            "read",
            format!("point id {other:?} is not a UUID; Casement writes only UUIDs"),
        )),
    }
}

pub(super) fn json_payload(
    payload: HashMap<String, qdrant_client::qdrant::Value>,
) -> Map<String, Value> {
    payload
        .into_iter()
        .map(|(k, v)| (k, v.into_json()))
        .collect()
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

impl ServerStore {
    pub(super) async fn read_document(&self, doc: DocRef<'_>) -> Result<Option<DocumentState>> {
        let response = self
            .client
            .get_points(
                GetPointsBuilder::new(self.collection(), vec![point_id(document_point_id(doc))])
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

    pub(super) async fn read_settings(&self) -> Result<Option<crate::IndexSettings>> {
        settings_of(&self.client, &self.collection()).await
    }

    pub(super) async fn read_records(&self, doc: DocRef<'_>) -> Result<Vec<SentenceRecord>> {
        let mut records = Vec::new();
        self.scroll_all(
            document_sentences(doc),
            SelectorOptions::Enable(true),
            |id, payload| {
                records.push(sentence_from_payload(point_uuid(id)?, payload)?);
                Ok(())
            },
        )
        .await?;
        Ok(records)
    }

    pub(super) async fn read_documents(&self) -> Result<Vec<crate::IndexedDocument>> {
        let mut states = Vec::new();
        let documents = Filter::must([keyword(KIND, KIND_DOCUMENT)]);
        self.scroll_all(documents, SelectorOptions::Enable(true), |_, payload| {
            states.push(document_from_payload(payload)?);
            Ok(())
        })
        .await?;
        let mut tally = crate::documents::DocumentTally::default();
        let sentence_points = Filter::must([keyword(KIND, KIND_SENTENCE)]);
        let fields = SelectorOptions::Include(PayloadIncludeSelector {
            fields: vec!["doc_id".to_owned(), "tenant".to_owned()],
        });
        self.scroll_all(sentence_points, fields, |_, payload| {
            let text = |key: &str| payload.get(key).and_then(Value::as_str);
            tally.sentence(text("tenant"), text("doc_id").unwrap_or_default());
            Ok(())
        })
        .await?;
        Ok(tally.finish(states))
    }

    /// Every point `filter` selects, page by page, with the payload `with_payload` asks for.
    async fn scroll_all(
        &self,
        filter: Filter,
        with_payload: SelectorOptions,
        mut each: impl FnMut(Option<PointId>, Map<String, Value>) -> Result<()>,
    ) -> Result<()> {
        // One collection for every page, even if a reader's alias moves meanwhile.
        let collection = self.collection();
        let mut offset: Option<PointId> = None;
        loop {
            let mut request = ScrollPointsBuilder::new(&collection)
                .filter(filter.clone())
                .limit(SCROLL_PAGE)
                .with_payload(with_payload.clone())
                .with_vectors(false);
            if let Some(offset) = offset.take() {
                request = request.offset(offset);
            }
            let page = self.client.scroll(request).await.map_err(grpc("scroll"))?;
            for point in page.result {
                each(point.id, json_payload(point.payload))?;
            }
            match page.next_page_offset {
                Some(next) => offset = Some(next),
                None => return Ok(()),
            }
        }
    }

    pub(super) async fn read_query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
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
        if !query.channels.dense() && sparse_query.is_none() {
            return Ok(Vec::new());
        }
        // One collection for the whole query, even if a reader's alias moves meanwhile.
        let collection = self.collection();
        let mut fused = QueryPointsBuilder::new(&collection)
            .query(Query::new_rrf(RrfBuilder::with_k(self.rrf_k as u32)))
            .filter(filter.clone())
            .limit(query.limit as u64)
            .with_payload(true);
        if query.channels.dense() {
            fused = fused.add_prefetch(
                PrefetchQueryBuilder::default()
                    .query(dense_query.clone())
                    .using(DENSE_VECTOR)
                    .filter(filter.clone())
                    .limit(query.candidates as u64),
            );
        }
        if let Some(sparse_query) = sparse_query.as_ref().filter(|_| query.channels.bm25()) {
            fused = fused.add_prefetch(
                PrefetchQueryBuilder::default()
                    .query(sparse_query.clone())
                    .using(SPARSE_VECTOR)
                    .filter(filter.clone())
                    .limit(query.candidates as u64),
            );
        }
        let channel = |q: &Query, using: &str| {
            QueryPointsBuilder::new(&collection)
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
            .query_batch(QueryBatchPointsBuilder::new(&collection, requests))
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

    pub(super) async fn read_dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        let response = self
            .client
            .get_points(
                GetPointsBuilder::new(
                    self.collection(),
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

    pub(super) async fn read_stats(&self) -> Result<StoreStats> {
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
            disk: None,
            disk_available: None,
            compaction: None,
            replaced: self.writable().is_err(),
        })
    }

    async fn count(&self, filter: Filter) -> Result<u64> {
        self.client
            .count(
                CountPointsBuilder::new(self.collection())
                    .filter(filter)
                    .exact(true),
            )
            .await
            .map(|r| r.result.map_or(0, |c| c.count))
            .map_err(grpc("count"))
    }
}

/// The settings recorded in `collection` (the settings point), if any.
pub(super) async fn settings_of(
    client: &super::grpc::Grpc,
    collection: &str,
) -> Result<Option<crate::IndexSettings>> {
    let response = client
        .get_points(
            GetPointsBuilder::new(
                collection,
                vec![point_id(crate::schema::settings_point_id())],
            )
            .with_payload(true)
            .with_vectors(false),
        )
        .await
        .map_err(grpc("read settings"))?;
    response
        .result
        .into_iter()
        .next()
        .map(|point| crate::schema::settings_from_payload(json_payload(point.payload)))
        .transpose()
}
