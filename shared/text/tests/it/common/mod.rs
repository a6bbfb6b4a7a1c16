//! Helpers shared by the text-core tests: the revision corpus and state comparison.

#![allow(dead_code)]

use std::io::BufRead;
use std::path::PathBuf;

use casement_text::{
    ChangePlan, Fence, Format, MemoryIndex, Revision, TextConfig, fence, plan_delete, plan_upsert,
};
use serde::Deserialize;

/// `../shared/data` beside the repository, or `CASEMENT_SHARED_DATA`.
pub fn shared_data() -> PathBuf {
    let dir = std::env::var_os("CASEMENT_SHARED_DATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
        PathBuf::from,
    );
    assert!(
        dir.is_dir(),
        "shared data not found at {} (set CASEMENT_SHARED_DATA)",
        dir.display()
    );
    dir
}

/// One line of the revision corpus (`shared/data/revisions/README.md`).
#[derive(Debug, Clone, Deserialize)]
pub struct CorpusEvent {
    pub doc_id: String,
    pub revision: u64,
    pub title: Option<String>,
    pub format: String,
    pub content: String,
    pub change: String,
    pub path: Option<String>,
    pub seq: Option<u64>,
}

impl CorpusEvent {
    pub fn is_delete(&self) -> bool {
        self.change == "delete"
    }

    pub fn to_revision(&self) -> Revision {
        Revision {
            access: None,
            metadata: Default::default(),
            doc_id: self.doc_id.clone(),
            revision: self.revision,
            title: self.title.clone(),
            url: self.path.clone(),
            tenant: None,
            format: self.format.parse().unwrap_or(Format::Text),
            content: self.content.clone(),
            revision_url: None,
        }
    }
}

/// Reads a revision log (`.jsonl` or `.jsonl.gz`) in publish order: by `seq`, then line,
/// the order of `casement_events::revision_log::read` (which this crate cannot depend on,
/// even for tests, without adding to the text core's dependency tree).
pub fn read_events(path: &std::path::Path) -> Vec<CorpusEvent> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    let mut events: Vec<(u64, usize, CorpusEvent)> = reader
        .lines()
        .enumerate()
        .map(|(index, line)| {
            let event: CorpusEvent =
                serde_json::from_str(&line.expect("line")).expect("corpus record");
            (event.seq.unwrap_or(index as u64), index, event)
        })
        .collect();
    events.sort_by_key(|(seq, index, _)| (*seq, *index));
    events.into_iter().map(|(_, _, event)| event).collect()
}

/// Fences and plans one event against `index`, as the indexer does.
pub fn plan_event(
    index: &MemoryIndex,
    event: &CorpusEvent,
    config: &TextConfig,
) -> Option<ChangePlan> {
    match fence(index.document(&event.doc_id), event.revision) {
        Fence::Stale { .. } => None,
        Fence::Apply => {
            let current = index.records(&event.doc_id);
            Some(if event.is_delete() {
                plan_delete(
                    &current,
                    index.document(&event.doc_id),
                    (&event.doc_id).into(),
                    event.revision,
                )
            } else {
                plan_upsert(&current, &event.to_revision(), config)
                    .expect("plans")
                    .0
            })
        }
    }
}

/// What indexing only `revision` from scratch stores.
pub fn rebuild(revision: &Revision, config: &TextConfig) -> MemoryIndex {
    let mut index = MemoryIndex::new();
    let (plan, _) = plan_upsert(&[], revision, config).expect("plans");
    index.apply(&plan);
    index
}

/// Same points (ids, payloads, vectors) and the same document state.
pub fn assert_same_document(
    actual: &MemoryIndex,
    expected: &MemoryIndex,
    doc_id: &str,
    what: &str,
) {
    assert_eq!(
        actual.document(doc_id),
        expected.document(doc_id),
        "{what}: document state"
    );
    let actual_points = actual.points(doc_id);
    let expected_points = expected.points(doc_id);
    if actual_points != expected_points {
        let a = actual_points.cloned().unwrap_or_default();
        let e = expected_points.cloned().unwrap_or_default();
        let missing: Vec<_> = e.keys().filter(|k| !a.contains_key(k)).collect();
        let extra: Vec<_> = a.keys().filter(|k| !e.contains_key(k)).collect();
        let differing: Vec<_> = e
            .iter()
            .filter(|(k, v)| a.get(k).is_some_and(|x| x != *v))
            .map(|(k, _)| k)
            .collect();
        panic!(
            "{what}: points differ from a rebuild: {} missing, {} extra, {} differing (first differing: {:?})",
            missing.len(),
            extra.len(),
            differing.len(),
            differing.first().map(|k| (&a[k], &e[k]))
        );
    }
    if let Some(points) = actual_points {
        for point in points.values() {
            assert_eq!(
                point.vector_of, point.record.embed_hash,
                "{what}: stale vector"
            );
        }
    }
}
