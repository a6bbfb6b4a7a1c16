//! Writes: a plan in operation order, each call with `wait=true`.

use std::collections::HashMap;

use casement_text::{ChangePlan, Operation, SentenceRecord};
use qdrant_client::Payload;
use qdrant_client::qdrant::{
    DeletePointsBuilder, Filter, NamedVectors, PointId, PointStruct, PointsIdsList,
    SetPayloadPointsBuilder, UpsertPointsBuilder, Vector,
};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::read::{document_sentences, point_id};
use super::{ServerStore, grpc};
use crate::error::Result;
use crate::schema::{
    DENSE_VECTOR, SPARSE_VECTOR, document_payload, document_point_id, sentence_payload,
};
use crate::{Applied, check_vectors, fence};

const UPSERT_BATCH: usize = 256;

enum SetTarget {
    Point(Uuid),
    Filter(Filter),
}

impl ServerStore {
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
            .upsert_points(UpsertPointsBuilder::new(&self.collection, points).wait(true))
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

    pub(super) async fn write_apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        check_vectors(plan, vectors, self.dimension)?;
        if let Some(stale) = fence(self.read_document(&plan.doc_id).await?.as_ref(), plan) {
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
}
