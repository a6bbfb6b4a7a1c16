//! An in-memory index that applies `ChangePlan`s exactly as a store must: the reference
//! semantics for the store backends, and the state the property tests compare.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use crate::differ::{ChangePlan, Operation};
use crate::document::DocumentState;
use crate::records::SentenceRecord;

/// A stored point: its payload and the hash of the input its vector was computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPoint {
    pub record: SentenceRecord,
    /// Stands in for the vector: set when the point is embedded, kept by payload updates.
    pub vector_of: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryIndex {
    documents: HashMap<String, DocumentState>,
    points: HashMap<String, BTreeMap<Uuid, StoredPoint>>,
    /// Sentences sent to the embedding model so far.
    pub embedded: usize,
}

impl MemoryIndex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn document(&self, doc_id: &str) -> Option<&DocumentState> {
        self.documents.get(doc_id)
    }

    /// The document's records as a store read (scroll by `doc_id`) returns them.
    pub fn records(&self, doc_id: &str) -> Vec<SentenceRecord> {
        self.points
            .get(doc_id)
            .map(|points| points.values().map(|p| p.record.clone()).collect())
            .unwrap_or_default()
    }

    pub fn points(&self, doc_id: &str) -> Option<&BTreeMap<Uuid, StoredPoint>> {
        self.points.get(doc_id).filter(|p| !p.is_empty())
    }

    pub fn point_count(&self) -> usize {
        self.points.values().map(BTreeMap::len).sum()
    }

    pub fn apply(&mut self, plan: &ChangePlan) {
        self.apply_first(plan, usize::MAX);
    }

    /// Applies only the first `count` operations, as a write cut off by a crash would.
    pub fn apply_first(&mut self, plan: &ChangePlan, count: usize) {
        for operation in plan.operations().take(count) {
            self.apply_operation(&plan.doc_id, operation);
        }
    }

    fn apply_operation(&mut self, doc_id: &str, operation: Operation<'_>) {
        let points = self.points.entry(doc_id.to_owned()).or_default();
        match operation {
            Operation::Upsert(record) => {
                self.embedded += 1;
                points.insert(
                    record.id,
                    StoredPoint {
                        record: record.clone(),
                        vector_of: record.embed_hash.clone(),
                    },
                );
            }
            Operation::SetPayload(record) => {
                // Like a store, a payload update of a missing point writes nothing.
                if let Some(point) = points.get_mut(&record.id) {
                    point.record = record.clone();
                }
            }
            Operation::Delete(id) => {
                points.remove(&id);
            }
            Operation::StampRevision {
                revision,
                revision_url,
                ..
            } => {
                for point in points.values_mut() {
                    point.record.revision = revision;
                    point.record.revision_url = revision_url.map(str::to_owned);
                }
            }
            Operation::PutDocument(state) => {
                self.documents.insert(doc_id.to_owned(), state.clone());
            }
        }
        if self.points.get(doc_id).is_some_and(BTreeMap::is_empty) {
            self.points.remove(doc_id);
        }
    }
}
