//! The Casement indexer service: CMS change events in, sentence points out.
//!
//! Today it runs the text core over a revision log (`dry-run`): fence → segment → diff →
//! apply to an in-memory index, reporting what would be embedded and written. The Kafka
//! consumer, embedder and store writer arrive with their issues and reuse these stages.

pub mod config;
pub mod dry_run;
pub mod offsets;
pub mod process;
pub mod revision_log;

pub use config::IndexerConfig;
