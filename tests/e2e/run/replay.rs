//! What the replayed 18F stream must answer: a document whose text changed between its
//! first and final revision.

use std::collections::BTreeMap;
use std::path::Path;

use casement_events::revision_log::LogEvent;

use crate::support::squash;

/// A prose line of Markdown (no markup that the citation text would change).
fn prose(line: &str) -> bool {
    let line = line.trim();
    line.split_whitespace().count() >= 10
        && !line.starts_with('-')
        && !line.chars().any(|c| "[]*`#|<>_:/{}\\\"".contains(c))
}

/// A document still live at the end of the stream whose first revision has a prose line
/// the final one lacks, and whose final revision has one the first lacks:
/// (doc_id, final revision, old line, new line).
pub fn changed_document(log: &Path) -> (String, u64, String, String) {
    let mut docs: BTreeMap<String, (LogEvent, LogEvent)> = BTreeMap::new();
    for event in casement_testkit::read_log(log) {
        if event.is_delete() {
            docs.remove(&event.doc_id);
        } else {
            docs.entry(event.doc_id.clone())
                .and_modify(|(_, last)| *last = event.clone())
                .or_insert_with(|| (event.clone(), event));
        }
    }
    for (id, (first, last)) in docs {
        let (old, new) = (first.content.as_str(), last.content.as_str());
        let only_in = |a: &str, b: &str| {
            a.lines()
                .filter(|l| prose(l))
                .find(|l| !squash(b).contains(&squash(l)))
                .map(str::to_owned)
        };
        if let (Some(gone), Some(added)) = (only_in(old, new), only_in(new, old)) {
            return (id, last.revision, gone, added);
        }
    }
    panic!("no document of the stream changes a prose line");
}
