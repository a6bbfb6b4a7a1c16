//! Per-document state kept beside the sentence points, and the revision fence.

use serde::{Deserialize, Serialize};

/// A document's identity: its id within its tenant. Two tenants may use the same id; their
/// documents, points, states and fences are apart. Documents without a tenant form one
/// space of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocRef<'a> {
    pub tenant: Option<&'a str>,
    pub doc_id: &'a str,
}

impl<'a> DocRef<'a> {
    pub fn new(tenant: Option<&'a str>, doc_id: &'a str) -> Self {
        Self { tenant, doc_id }
    }
}

/// A document without a tenant.
impl<'a> From<&'a str> for DocRef<'a> {
    fn from(doc_id: &'a str) -> Self {
        Self {
            tenant: None,
            doc_id,
        }
    }
}

impl<'a> From<&'a String> for DocRef<'a> {
    fn from(doc_id: &'a String) -> Self {
        Self::from(doc_id.as_str())
    }
}

impl std::fmt::Display for DocRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tenant {
            Some(tenant) => write!(f, "{tenant}/{}", self.doc_id),
            None => f.write_str(self.doc_id),
        }
    }
}

/// What the index knows of a document as a whole. Written after its points, so a state
/// that says revision N means every point of revision N is in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentState {
    pub doc_id: String,
    pub revision: u64,
    /// A tombstone: the document was deleted at `revision`.
    pub deleted: bool,
    pub title: String,
    pub url: Option<String>,
    /// The indexed revision's own address (`Revision::revision_url`); none on a tombstone.
    #[serde(default)]
    pub revision_url: Option<String>,
    pub tenant: Option<String>,
    pub sentence_count: usize,
    pub section_count: usize,
    /// Who may read the document (as on its points; public when absent). A tombstone
    /// keeps the last access, so a deleted document's title stays as hidden as it was.
    #[serde(default = "public_default")]
    pub public: bool,
    #[serde(default)]
    pub access_groups: Vec<String>,
}

/// A point or state written before access existed is public (every key of its tenant read
/// it then).
pub(crate) fn public_default() -> bool {
    true
}

/// What to do with an incoming revision, given what is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// Diff and apply. An incoming revision *equal* to the indexed one is applied too: its
    /// plan is empty when the earlier write completed, and finishes it when it was cut off.
    Apply,
    /// Older than what is indexed (or than the tombstone): change nothing, count it stale.
    Stale { indexed_revision: u64 },
}

impl DocumentState {
    pub fn doc_ref(&self) -> DocRef<'_> {
        DocRef::new(self.tenant.as_deref(), &self.doc_id)
    }

    /// Who may read the document.
    pub fn access(&self) -> crate::Access {
        crate::Access {
            public: self.public,
            groups: self.access_groups.clone(),
        }
    }

    pub fn readable_by(&self, reader: &crate::Reader) -> bool {
        self.access().readable_by(reader)
    }
}

pub fn fence(indexed: Option<&DocumentState>, incoming_revision: u64) -> Fence {
    fence_restoring(indexed, incoming_revision, false)
}

/// [`fence`], where `restore` lets an upsert bring back a document deleted at its own
/// revision: an undelete, which restores the revision the delete removed (a wiki's
/// undelete makes no new revision).
pub fn fence_restoring(
    indexed: Option<&DocumentState>,
    incoming_revision: u64,
    restore: bool,
) -> Fence {
    match indexed {
        None => Fence::Apply,
        Some(state) if incoming_revision < state.revision => Fence::Stale {
            indexed_revision: state.revision,
        },
        // Nothing at the tombstone's own revision changes it but a restore: an upsert cannot
        // bring the document back, and a repeated delete has nothing left to do (a delete
        // cut off before its tombstone was written left the old state, so it is replanned).
        Some(state) if state.deleted && incoming_revision == state.revision && !restore => {
            Fence::Stale {
                indexed_revision: state.revision,
            }
        }
        Some(_) => Fence::Apply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(revision: u64, deleted: bool) -> DocumentState {
        DocumentState {
            doc_id: "d".into(),
            revision,
            deleted,
            title: String::new(),
            url: None,
            revision_url: None,
            tenant: None,
            sentence_count: 0,
            section_count: 0,
            public: true,
            access_groups: Vec::new(),
        }
    }

    #[test]
    fn older_is_stale_equal_is_replanned_newer_applies() {
        assert_eq!(fence(None, 1), Fence::Apply);
        assert_eq!(
            fence(Some(&state(5, false)), 4),
            Fence::Stale {
                indexed_revision: 5
            }
        );
        assert_eq!(fence(Some(&state(5, false)), 5), Fence::Apply);
        assert_eq!(fence(Some(&state(5, false)), 6), Fence::Apply);
    }

    /// Upsert or delete alike: at or below a tombstone's revision nothing changes (a
    /// repeated delete must not rewrite the tombstone); above it, either applies.
    #[test]
    fn a_tombstone_blocks_older_and_equal_events() {
        let tombstone = state(7, true);
        for revision in [6, 7] {
            assert_eq!(
                fence(Some(&tombstone), revision),
                Fence::Stale {
                    indexed_revision: 7
                }
            );
        }
        assert_eq!(fence(Some(&tombstone), 8), Fence::Apply);
    }

    /// An undelete restores the revision that was deleted: it passes a tombstone at that
    /// same revision, but never an older one or a newer document.
    #[test]
    fn a_restore_passes_only_a_tombstone_at_its_own_revision() {
        let tombstone = state(7, true);
        assert_eq!(fence_restoring(Some(&tombstone), 7, true), Fence::Apply);
        assert_eq!(
            fence_restoring(Some(&tombstone), 6, true),
            Fence::Stale {
                indexed_revision: 7
            }
        );
        assert_eq!(
            fence_restoring(Some(&state(8, false)), 7, true),
            Fence::Stale {
                indexed_revision: 8
            }
        );
    }
}
