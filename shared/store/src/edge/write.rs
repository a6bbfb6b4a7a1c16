//! Writes: a plan's write steps (`write_steps`) under the write lock, flushes, index builds.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use casement_text::{ChangePlan, SentenceRecord};
use qdrant_edge::{
    Filter, Payload, PayloadOps, PointId, PointInsertOperations, PointOperations,
    PointStructPersisted, SetPayloadOp, UpdateOperation, VectorInternal, VectorStructInternal,
};
use serde_json::{Map, Value};

use super::read::{document_sentences, sparse_internal};
use super::{Inner, engine};
use crate::error::{Error, Result};
use crate::schema::{
    DENSE_VECTOR, SPARSE_VECTOR, document_payload, document_point_id, sentence_payload,
};
use crate::write_steps::{WriteStep, write_steps};
use crate::{Applied, fence};

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
    /// A batch's sentence points: dense vector, BM25 vector (unless the text has no terms)
    /// and the record as payload.
    fn sentence_points(
        &self,
        batch: Vec<(&SentenceRecord, &[f32])>,
    ) -> Result<Vec<PointStructPersisted>> {
        let mut points = Vec::with_capacity(batch.len());
        for (record, dense) in batch {
            let mut vectors = HashMap::from([(
                DENSE_VECTOR.to_owned(),
                VectorInternal::Dense(dense.to_vec()),
            )]);
            let sparse = self.bm25.document(&record.embedding_input());
            if !sparse.is_empty() {
                vectors.insert(SPARSE_VECTOR.to_owned(), sparse_internal(sparse));
            }
            points.push(PointStructPersisted {
                id: PointId::Uuid(record.id),
                vector: VectorStructInternal::Named(vectors).into(),
                payload: Some(Payload(sentence_payload(record)?)),
            });
        }
        Ok(points)
    }

    pub(super) fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        let steps = write_steps(plan, vectors, self.dimension, count)?;
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        self.check_free_space()?;
        if let Some(stale) = fence(self.document(plan.doc_ref())?.as_ref(), plan) {
            return Ok(stale);
        }
        self.journal.record(plan.doc_ref())?;
        let mut upserted = 0;
        for step in steps {
            match step {
                WriteStep::Upsert(batch) => {
                    upserted += batch.len();
                    self.update("upsert", upsert(self.sentence_points(batch)?))?;
                }
                WriteStep::SetPayload(record) => {
                    let payload = sentence_payload(record)?;
                    self.update(
                        "set payload",
                        set_payload(payload, Some(vec![PointId::Uuid(record.id)]), None),
                    )?;
                }
                WriteStep::Delete(ids) => {
                    let ids = ids.into_iter().map(PointId::Uuid).collect();
                    self.update(
                        "delete",
                        UpdateOperation::PointOperation(PointOperations::DeletePoints { ids }),
                    )?;
                }
                WriteStep::StampRevision {
                    doc,
                    revision,
                    revision_url,
                } => {
                    let mut payload = Map::new();
                    payload.insert("revision".into(), Value::from(revision));
                    payload.insert("revision_url".into(), Value::from(revision_url));
                    self.update(
                        "stamp revision",
                        set_payload(payload, None, Some(document_sentences(doc))),
                    )?;
                }
                WriteStep::PutDocument(state) => {
                    let point = PointStructPersisted {
                        id: PointId::Uuid(document_point_id(state.doc_ref())),
                        vector: VectorStructInternal::Named(HashMap::new()).into(),
                        payload: Some(Payload(document_payload(state)?)),
                    };
                    self.update("put document", upsert(vec![point]))?;
                }
            }
        }
        self.unindexed.fetch_add(upserted, Ordering::Relaxed);
        Ok(Applied::Written)
    }

    /// Refuses (a transient error: the pipeline retries) while the file system under the
    /// store has less than `store.edge.min_free_bytes` available. The engine writes
    /// through memory maps that it grows sparsely, and a page written on a full disk kills
    /// the process with SIGBUS; below the reserve nothing reaches it.
    pub(super) fn check_free_space(&self) -> Result<()> {
        if self.min_free_bytes == 0 {
            return Ok(());
        }
        match fs4::available_space(&self.path) {
            Ok(free) if free < self.min_free_bytes => Err(Error::Unavailable(format!(
                "the disk under {} has {:.1} MiB available, below store.edge.min_free_bytes \
                 ({:.1} MiB): writes wait until space returns",
                self.path.display(),
                free as f64 / MIB,
                self.min_free_bytes as f64 / MIB
            ))),
            _ => Ok(()),
        }
    }

    /// Writes the settings point and flushes.
    pub(super) fn record_settings(&self, settings: &crate::IndexSettings) -> Result<()> {
        let point = PointStructPersisted {
            id: PointId::Uuid(crate::schema::settings_point_id()),
            vector: VectorStructInternal::Named(HashMap::new()).into(),
            payload: Some(Payload(crate::schema::settings_payload(settings)?)),
        };
        {
            let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
            self.check_free_space()?;
            self.update("record settings", upsert(vec![point]))?;
        }
        self.sync()
    }

    fn update(&self, operation: &'static str, update: UpdateOperation) -> Result<()> {
        self.shard()?.update(update).map_err(engine(operation))
    }

    /// Flushes unless an index build runs (the engine's flush must not race it); the caller
    /// holds `writes`.
    fn flush_locked(&self) {
        if !self.optimizing.load(Ordering::Acquire) {
            self.flush_shard();
        }
    }

    pub(super) fn flush(&self) -> Result<()> {
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        self.flush_locked();
        Ok(())
    }

    /// Flushes every write made so far. During an index build the engine's flush must
    /// wait: this waits for the build to end (it flushes at its end) and flushes after it,
    /// so a caller never acknowledges a write that only lives in memory (Edge 0.7.2 does not
    /// replay its write-ahead log at open).
    pub(super) fn sync(&self) -> Result<()> {
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        self.check_free_space()?;
        self.flush_shard();
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
            // A build writes new segments; on a disk below the reserve it waits for the
            // next trigger.
            self.check_free_space()?;
            if self.optimizing.swap(true, Ordering::AcqRel) {
                return Ok(false);
            }
        }
        let before = self.unindexed.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        tracing::info!(unindexed = before, "building the vector index");
        // The engine panics on some I/O failures (a full disk); the flag must be reset
        // and the build retried later, not left set for the life of the process.
        let result = self.shard().and_then(|shard| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shard.optimize()))
                .map_err(|panic| Error::backend("optimize", panic_message(&panic)))?
                .map_err(engine("optimize"))
        });
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            ok = result.is_ok(),
            "vector index build ended"
        );
        {
            let _writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
            self.optimizing.store(false, Ordering::Release);
            if result.is_ok() {
                let _ = self
                    .unindexed
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        Some(n.saturating_sub(before))
                    });
                self.flush_shard();
            }
        }
        result
    }
}

/// The message of a caught panic.
pub(super) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "the engine panicked".to_owned())
}

const MIB: f64 = 1024.0 * 1024.0;
