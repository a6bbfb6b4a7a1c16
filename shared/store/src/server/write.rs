//! Writes: a plan's write steps (`write_steps`), each call with `wait=true`.

use casement_text::{ChangePlan, SentenceRecord};
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
use crate::write_steps::{WriteStep, write_steps};
use crate::{Applied, fence};

enum SetTarget {
    Point(Uuid),
    Filter(Filter),
}

impl ServerStore {
    /// A batch's sentence points: dense vector, BM25 vector (unless the text has no terms)
    /// and the record as payload.
    fn sentence_points(&self, batch: Vec<(&SentenceRecord, &[f32])>) -> Result<Vec<PointStruct>> {
        let mut points = Vec::with_capacity(batch.len());
        for (record, dense) in batch {
            let mut vectors =
                NamedVectors::default().add_vector(DENSE_VECTOR, Vector::new_dense(dense.to_vec()));
            let sparse = self.bm25.document(&record.embedding_input());
            if !sparse.is_empty() {
                vectors = vectors.add_vector(
                    SPARSE_VECTOR,
                    Vector::new_sparse(sparse.indices, sparse.values),
                );
            }
            points.push(PointStruct::new(
                point_id(record.id),
                vectors,
                Payload::from(sentence_payload(record)?),
            ));
        }
        Ok(points)
    }

    pub(super) async fn write_settings(&self, settings: &crate::IndexSettings) -> Result<()> {
        let point = PointStruct::new(
            point_id(crate::schema::settings_point_id()),
            NamedVectors::default(),
            Payload::from(crate::schema::settings_payload(settings)?),
        );
        self.upsert(vec![point]).await
    }

    async fn upsert(&self, points: Vec<PointStruct>) -> Result<()> {
        self.writable()?;
        self.client
            .upsert_points(UpsertPointsBuilder::new(self.collection(), points).wait(true))
            .await
            .map(drop)
            .map_err(grpc("upsert"))
    }

    async fn delete(&self, ids: Vec<PointId>) -> Result<()> {
        self.writable()?;
        self.client
            .delete_points(
                DeletePointsBuilder::new(self.collection())
                    .points(PointsIdsList { ids })
                    .wait(true),
            )
            .await
            .map(drop)
            .map_err(grpc("delete"))
    }

    async fn set_payload(&self, payload: Map<String, Value>, target: SetTarget) -> Result<()> {
        self.writable()?;
        let builder =
            SetPayloadPointsBuilder::new(self.collection(), Payload::from(payload)).wait(true);
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
        let steps = write_steps(plan, vectors, self.dimension, count)?;
        if let Some(stale) = fence(self.read_document(plan.doc_ref()).await?.as_ref(), plan) {
            return Ok(stale);
        }
        for step in steps {
            match step {
                WriteStep::Upsert(batch) => self.upsert(self.sentence_points(batch)?).await?,
                WriteStep::SetPayload(record) => {
                    self.set_payload(sentence_payload(record)?, SetTarget::Point(record.id))
                        .await?;
                }
                WriteStep::Delete(ids) => {
                    self.delete(ids.into_iter().map(point_id).collect()).await?;
                }
                WriteStep::StampRevision {
                    doc,
                    revision,
                    revision_url,
                } => {
                    let mut payload = Map::new();
                    payload.insert("revision".into(), Value::from(revision));
                    payload.insert("revision_url".into(), Value::from(revision_url));
                    self.set_payload(payload, SetTarget::Filter(document_sentences(doc)))
                        .await?;
                }
                WriteStep::PutDocument(state) => {
                    let point = PointStruct::new(
                        point_id(document_point_id(state.doc_ref())),
                        NamedVectors::default(),
                        Payload::from(document_payload(state)?),
                    );
                    self.upsert(vec![point]).await?;
                }
            }
        }
        Ok(Applied::Written)
    }
}
