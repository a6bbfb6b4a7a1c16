//! The documents written since the last flush, and their repair after an unclean stop.
//!
//! Qdrant Edge 0.7.2 makes writes durable by flushing its segments, and never replays its
//! write-ahead log. A flush writes each segment's parts in turn (id mappings, vectors,
//! payloads, versions last), relying on that replay to finish a flush a crash cut short; a
//! kill in the middle of one (or before it, with pages of a write already on disk) leaves
//! the points written since the previous flush in states the engine never produces itself:
//! a payload newer than its version, a point whose older copy is still live in another
//! segment. Reads of such a point can answer one way before a restart and another way after
//! it, so planning a redelivered event against it is not enough (a point the plan left
//! alone can go back to an older payload).
//!
//! So the store keeps `unflushed.jsonl` beside the segments: before the first write of a
//! document after a flush, one line naming it; after each flush, emptied. When the store
//! opens and the file names documents, the stop was unclean: every point of those documents
//! (sentences and document state) is written again as it reads now, and flushed, before
//! anything plans against it. Their events were not acknowledged (acknowledgement follows
//! the flush), so they are delivered again and planned against a store that answers the
//! same way from then on.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use casement_text::DocRef;
use qdrant_edge::{
    EdgeShard, PointId, PointInsertOperations, PointOperations, PointStructPersisted,
    ScrollRequest, UpdateOperation, VectorStructInternal, WithPayloadInterface, WithVector,
};

use super::engine;
use super::read::document_sentences;
use crate::error::{Error, Result};
use crate::schema::document_point_id;

const FILE: &str = "unflushed.jsonl";

/// A document: its tenant (or none) and id.
type Doc = (Option<String>, String);

#[derive(Debug)]
pub(super) struct Journal {
    path: PathBuf,
    /// The documents named in the file since it was last emptied.
    written: Mutex<HashSet<Doc>>,
}

impl Journal {
    /// The journal of the store in `dir`, and the documents it names (written after the
    /// last flush of a store that was not closed).
    pub(super) fn open(dir: &Path) -> std::io::Result<(Self, Vec<Doc>)> {
        let path = dir.join(FILE);
        let mut named = Vec::new();
        match File::open(&path) {
            Ok(file) => {
                let mut seen = HashSet::new();
                for line in std::io::BufReader::new(file).lines() {
                    // A line cut short by the kill names nothing.
                    if let Ok(doc) = serde_json::from_str::<Doc>(&line?)
                        && seen.insert(doc.clone())
                    {
                        named.push(doc);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let journal = Self {
            path,
            written: Mutex::new(HashSet::new()),
        };
        Ok((journal, named))
    }

    /// Names `doc` in the file unless it is named since the last flush. The caller holds
    /// the store's write lock and writes the document only after this returns.
    pub(super) fn record(&self, doc: DocRef<'_>) -> Result<()> {
        let key = (doc.tenant.map(str::to_owned), doc.doc_id.to_owned());
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.contains(&key) {
            return Ok(());
        }
        let mut line = serde_json::to_string(&key).map_err(|e| Error::backend("journal", e))?;
        line.push('\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()))
            .map_err(|e| Error::backend("journal", format!("{}: {e}", self.path.display())))?;
        written.insert(key);
        Ok(())
    }

    /// Empties the file after a flush made every write before it durable. The caller
    /// holds the store's write lock, so no write comes between the flush and this.
    pub(super) fn flushed(&self) -> std::io::Result<()> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.is_empty() {
            return Ok(());
        }
        empty(&self.path)?;
        written.clear();
        Ok(())
    }
}

/// Empties the file at `path` (if there is one).
fn empty(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(file) => file.set_len(0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes every point of `docs` again as it reads now (payload and all vectors), flushes,
/// and empties the journal file in `dir`. Returns the points written.
pub(super) fn repair(shard: &EdgeShard, dir: &Path, docs: &[Doc]) -> Result<usize> {
    let mut rewritten = 0;
    tracing::warn!(
        documents = docs.len(),
        "the store was not closed: writing the points of the documents written after its \
         last flush again"
    );
    for (done, (tenant, doc_id)) in docs.iter().enumerate() {
        if done > 0 && done % 1_000 == 0 {
            tracing::info!(done, of = docs.len(), "repairing");
        }
        let doc = DocRef::new(tenant.as_deref(), doc_id);
        let mut ids = sentence_ids(shard, doc)?;
        ids.push(PointId::Uuid(document_point_id(doc)));
        for chunk in ids.chunks(PAGE) {
            let read = shard
                .retrieve(
                    chunk,
                    Some(WithPayloadInterface::Bool(true)),
                    Some(WithVector::Bool(true)),
                )
                .map_err(engine("read for repair"))?;
            let points: Vec<PointStructPersisted> = read
                .into_iter()
                .map(|record| PointStructPersisted {
                    id: record.id,
                    vector: record
                        .vector
                        .unwrap_or_else(|| VectorStructInternal::Named(HashMap::new()))
                        .into(),
                    payload: record.payload,
                })
                .collect();
            rewritten += points.len();
            if !points.is_empty() {
                shard
                    .update(UpdateOperation::PointOperation(
                        PointOperations::UpsertPoints(PointInsertOperations::PointsList(points)),
                    ))
                    .map_err(engine("repair"))?;
            }
        }
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shard.flush()))
        .map_err(|panic| Error::backend("repair", super::write::panic_message(&panic)))?;
    empty(&dir.join(FILE)).map_err(|e| Error::backend("journal", e))?;
    Ok(rewritten)
}

const PAGE: usize = 1_000;

fn sentence_ids(shard: &EdgeShard, doc: DocRef<'_>) -> Result<Vec<PointId>> {
    let mut ids = Vec::new();
    let mut offset = None;
    loop {
        let (page, next) = shard
            .scroll(ScrollRequest {
                offset,
                limit: Some(PAGE),
                filter: Some(document_sentences(doc)),
                with_payload: Some(WithPayloadInterface::Bool(false)),
                with_vector: WithVector::Bool(false),
                order_by: None,
            })
            .map_err(engine("scroll for repair"))?;
        ids.extend(page.into_iter().map(|record| record.id));
        match next {
            Some(next) => offset = Some(next),
            None => return Ok(ids),
        }
    }
}
