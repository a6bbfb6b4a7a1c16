//! [`Store::documents`]: what the index holds of each document, tallied while a backend
//! scrolls its points.

use std::collections::{BTreeMap, HashMap};

use casement_text::DocumentState;

/// A document as the index holds it: see [`crate::Store::documents`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedDocument {
    pub tenant: Option<String>,
    pub doc_id: String,
    /// Its document-state point (a tombstone when `deleted`), if it has one.
    pub state: Option<DocumentState>,
    /// Its sentence points.
    pub points: u64,
}

impl IndexedDocument {
    /// Indexed and not deleted.
    pub fn is_live(&self) -> bool {
        self.state.as_ref().is_some_and(|state| !state.deleted)
    }
}

/// Sentence points counted per document as a scroll goes (keys allocated once per
/// document, not per point; an empty tenant is none), then joined with the state points.
#[derive(Debug, Default)]
pub(crate) struct DocumentTally {
    points: HashMap<String, HashMap<String, u64>>,
}

impl DocumentTally {
    pub(crate) fn sentence(&mut self, tenant: Option<&str>, doc_id: &str) {
        let tenant = tenant.unwrap_or_default();
        let docs = match self.points.get_mut(tenant) {
            Some(docs) => docs,
            None => self.points.entry(tenant.to_owned()).or_default(),
        };
        match docs.get_mut(doc_id) {
            Some(count) => *count += 1,
            None => {
                docs.insert(doc_id.to_owned(), 1);
            }
        }
    }

    /// Every document with a state point or a sentence point, sorted by tenant, then id.
    pub(crate) fn finish(self, states: Vec<DocumentState>) -> Vec<IndexedDocument> {
        let mut documents: BTreeMap<(Option<String>, String), IndexedDocument> = BTreeMap::new();
        let tenant_of = |t: String| Some(t).filter(|t| !t.is_empty());
        for (tenant, docs) in self.points {
            for (doc_id, points) in docs {
                let key = (tenant_of(tenant.clone()), doc_id);
                let document = IndexedDocument {
                    tenant: key.0.clone(),
                    doc_id: key.1.clone(),
                    state: None,
                    points,
                };
                documents.insert(key, document);
            }
        }
        for state in states {
            let key = (
                tenant_of(state.tenant.clone().unwrap_or_default()),
                state.doc_id.clone(),
            );
            documents
                .entry(key.clone())
                .or_insert_with(|| IndexedDocument {
                    tenant: key.0,
                    doc_id: key.1,
                    state: None,
                    points: 0,
                })
                .state = Some(state);
        }
        documents.into_values().collect()
    }
}
