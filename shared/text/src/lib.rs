//! The pure text core of Casement: one revision of a document in, the index operations that
//! bring the index to it out. No I/O, no runtime, no model: everything here is a function
//! of its inputs, tested directly and by property.
//!
//! Dataflow: [`Revision`] → [`extract`] (citation text and blocks) → [`segment`]
//! ([`SegmentedRevision`]: sections and sentences) → [`build_records`] (one
//! [`SentenceRecord`] per sentence, with its window) → [`plan_upsert`] /
//! [`plan_delete`] ([`ChangePlan`]), after the revision [`fence`].
//!
//! Invariants kept here (DESIGN.md):
//! - point ids are deterministic and independent of position;
//! - a window never crosses a section boundary; a sentence never crosses a block;
//! - a sentence whose embedding input is unchanged is never in `ChangePlan::embed`;
//! - applying the plans of a revision sequence one by one gives the records that indexing
//!   only the last revision gives, also when a plan is applied twice or cut off and planned
//!   again (see `tests/it/properties.rs` and `tests/it/replay_18f.rs`).

pub mod access;
pub mod config;
pub mod differ;
pub mod document;
pub mod error;
pub mod extract;
mod hashing;
pub mod memory;
pub mod records;
pub mod revision;
pub mod segmenter;
pub mod sentences;
pub mod stored;
pub mod tokens;
pub mod window;

pub use access::{Access, Reader};
pub use config::{CodeBlocks, TextConfig};
pub use differ::{
    ChangePlan, Operation, plan_delete, plan_segmented, plan_upsert, segment_against,
};
pub use document::{DocRef, DocumentState, Fence, fence, fence_restoring};
pub use error::{Error, Result};
pub use extract::{BlockKind, ExtractedText, extract};
pub use hashing::hash_hex;
pub use memory::MemoryIndex;
pub use records::{
    STRUCTURAL_CONTEXT_SOURCE, SentenceRecord, build_records, build_records_with,
    structural_context,
};
pub use revision::{Format, Revision};
pub use segmenter::{Section, SegmentedRevision, segment};
pub use stored::{StoredError, citation_text, segmented_from_records};
pub use tokens::estimate_tokens;
