//! Writes: a plan in operation order under the write lock, flushes, index builds.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use casement_text::{ChangePlan, Operation, SentenceRecord};
use qdrant_edge::{
    Filter, Payload, PayloadOps, PointId, PointInsertOperations, PointOperations,
    PointStructPersisted, SetPayloadOp, UpdateOperation, VectorInternal, VectorStructInternal,
};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::read::{document_sentences, sparse_internal};
use super::{Inner, engine};
use crate::error::Result;
use crate::schema::{
    DENSE_VECTOR, SPARSE_VECTOR, document_payload, document_point_id, sentence_payload,
};
use crate::{Applied, check_vectors, fence};

/// Points per upsert operation (one WAL record each).
const UPSERT_BATCH: usize = 256;

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

impl Inner {
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

    pub(super) fn apply_first(
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

    pub(super) fn flush(&self) -> Result<()> {
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        self.flush_locked();
        Ok(())
    }

    /// Builds the index; with `wait`, after a build in progress, else not at all then.
    pub(super) fn optimize(&self, wait: bool) -> Result<bool> {
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
}
