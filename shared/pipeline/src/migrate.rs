//! A model migration's copy: every document of the serving index brought into a new index
//! under another configuration (model, enrichment, window radius), from the records the
//! serving index stores (no call to the CMS), by a [`Processor`] over the new index.
//!
//! A pass compares the two indexes' document listings and copies every document whose
//! state (revision, tombstone) or point count differs, so a pass is also how a migration
//! resumes (documents already copied are skipped) and catches up with events applied to
//! the serving index meanwhile: once no event is in flight, a pass that copies nothing
//! leaves the new index equal to what indexing the same revisions under the new
//! configuration builds. The serving index is only read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use casement_store::{IndexedDocument, Store};
use casement_text::DocRef;
use tokio::task::JoinSet;

use crate::processor::{ProcessError, Processor};

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("reading the serving index: {0}")]
    Source(casement_store::Error),
    #[error("reading the new index: {0}")]
    Target(casement_store::Error),
    #[error("copying `{doc}`: {source}")]
    Copy { doc: String, source: ProcessError },
    #[error("a copy task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Pass {
    /// Documents the serving index holds a state for (live or deleted).
    pub documents: usize,
    /// Copied in this pass (their state or points differed).
    pub copied: usize,
    /// Of those, sentences sent to the new model.
    pub embedded: usize,
    /// Left for a later pass: the serving index held them half-written (an event in
    /// flight, or cut off); each is copied once its write is whole.
    pub deferred: usize,
    /// Documents only the new index holds (none, unless its directory was reused): left
    /// as they are, and reported.
    pub extra: usize,
    #[serde(serialize_with = "seconds")]
    pub took: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Pass {
    /// Nothing was copied: the new index holds every document as the serving one, but
    /// those the serving index holds half-written (deferred: a later event repairs them
    /// there, and the next pass copies them).
    pub fn converged(&self) -> bool {
        self.copied == 0
    }
}

/// Progress of a pass: documents finished out of those to copy.
pub trait Progress: Send + Sync {
    fn started(&self, to_copy: usize);
    fn copied(&self, sentences: usize);
}

impl Progress for () {
    fn started(&self, _: usize) {}
    fn copied(&self, _: usize) {}
}

#[derive(Debug)]
pub struct Migration<S, T> {
    pub source: S,
    pub target: Arc<Processor<T>>,
    /// Documents copied at once (their sentences share the embedder's batches).
    pub concurrency: usize,
    /// The new index is synced (made durable) after this many documents, and at the end.
    pub sync_every: usize,
    /// Ends a pass (synced) once this many documents are copied: a test's kill point.
    pub stop_after: Option<usize>,
    /// Both indexes were embedded by the same model (their settings' probes agree): a
    /// sentence whose embedding input is unchanged keeps its vector (a new window radius
    /// embeds nothing).
    pub reuse_vectors: bool,
    /// The serving index is the truth, also over a tombstone of the new index at the same
    /// revision (a migration); false for a catch-up into an index that has writers of its
    /// own, where a newer or deleted document stays as it is.
    pub over_tombstones: bool,
}

type Key = (Option<String>, String);

fn key(doc: &IndexedDocument) -> Key {
    (doc.tenant.clone(), doc.doc_id.clone())
}

impl<S, T> Migration<S, T>
where
    S: Store + Clone + 'static,
    T: Store + Clone + 'static,
{
    /// One pass: every document whose copy differs is copied again.
    pub async fn pass(&self, progress: &dyn Progress) -> Result<Pass, MigrateError> {
        let started = Instant::now();
        let source = self
            .source
            .documents()
            .await
            .map_err(MigrateError::Source)?;
        let target: HashMap<Key, IndexedDocument> = self
            .target
            .store
            .documents()
            .await
            .map_err(MigrateError::Target)?
            .into_iter()
            .map(|doc| (key(&doc), doc))
            .collect();
        let mut pass = Pass {
            documents: source.iter().filter(|d| d.state.is_some()).count(),
            ..Pass::default()
        };
        let mut listed = std::collections::HashSet::with_capacity(source.len());
        let mut to_copy = Vec::new();
        for doc in source {
            listed.insert(key(&doc));
            let Some(state) = &doc.state else {
                // Points without a state: a first write cut off, finished by its redelivery.
                pass.deferred += 1;
                continue;
            };
            let same = target.get(&key(&doc)).is_some_and(|copy| {
                copy.state.as_ref() == Some(state) && copy.points == doc.points
            });
            if !same {
                to_copy.push(doc);
            }
        }
        pass.extra = target.keys().filter(|k| !listed.contains(*k)).count();
        progress.started(to_copy.len());
        let mut tasks = JoinSet::new();
        let mut queue = to_copy.into_iter();
        let mut since_sync = 0;
        loop {
            let stopping = |tasks: &JoinSet<_>| {
                self.stop_after
                    .is_some_and(|n| pass.copied + tasks.len() >= n)
            };
            while tasks.len() < self.concurrency.max(1) && !stopping(&tasks) {
                let Some(doc) = queue.next() else { break };
                let (source, target) = (self.source.clone(), self.target.clone());
                let (reuse, over) = (self.reuse_vectors, self.over_tombstones);
                tasks.spawn(async move { copy(&source, &target, doc, reuse, over).await });
            }
            let Some(done) = tasks.join_next().await else {
                break;
            };
            match done?? {
                Copied::Done(embedded) => {
                    pass.copied += 1;
                    pass.embedded += embedded;
                    progress.copied(embedded);
                }
                Copied::Deferred => {
                    pass.deferred += 1;
                    progress.copied(0);
                }
            }
            since_sync += 1;
            if since_sync >= self.sync_every.max(1) {
                self.target
                    .store
                    .sync()
                    .await
                    .map_err(MigrateError::Target)?;
                since_sync = 0;
            }
        }
        self.target
            .store
            .sync()
            .await
            .map_err(MigrateError::Target)?;
        pass.took = started.elapsed();
        Ok(pass)
    }
}

enum Copied {
    Done(usize),
    Deferred,
}

/// Copies one document as the serving index holds it now (its state read again: the
/// listing may be older).
async fn copy<S: Store, T: Store>(
    source: &S,
    target: &Processor<T>,
    doc: IndexedDocument,
    reuse: bool,
    over_tombstones: bool,
) -> Result<Copied, MigrateError> {
    let doc_ref = DocRef::new(doc.tenant.as_deref(), &doc.doc_id);
    let state = source
        .document(doc_ref)
        .await
        .map_err(MigrateError::Source)?;
    let Some(state) = state else {
        return Ok(Copied::Deferred);
    };
    let records = if state.deleted {
        Vec::new()
    } else {
        source
            .records(doc_ref)
            .await
            .map_err(MigrateError::Source)?
    };
    let vectors = if reuse && !records.is_empty() {
        let ids: Vec<_> = records.iter().map(|r| r.id).collect();
        Some(
            source
                .dense_vectors(&ids)
                .await
                .map_err(MigrateError::Source)?,
        )
    } else {
        None
    };
    match target
        .copy_stored(&state, &records, vectors.as_ref(), over_tombstones)
        .await
    {
        Ok(embedded) => Ok(Copied::Done(embedded)),
        // Half-written in the serving index (an event in flight): the next pass.
        Err(ProcessError::Stored(error @ casement_text::StoredError::Incomplete { .. })) => {
            tracing::warn!(%error, "deferred to the next pass");
            Ok(Copied::Deferred)
        }
        Err(source) => Err(MigrateError::Copy {
            doc: doc_ref.to_string(),
            source,
        }),
    }
}
