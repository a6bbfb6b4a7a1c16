//! The Casement indexer service: CMS change events in, sentence points out.
//!
//! `run` consumes change events from Kafka into the store ([`service`], [`pipeline`]);
//! `replay` publishes a revision log as native events ([`replay`]); `dry-run` shows the
//! incremental plans of a revision log without a model or a store ([`dry_run`]).
//! Sources other than Kafka plug in through [`source`].

pub mod admin;
pub mod config;
pub mod dry_run;
pub mod embed;
pub mod enrich;
pub mod kafka;
pub mod metrics;
pub mod offsets;
pub mod pipeline;
pub mod process;
pub mod replay;
pub mod revision_log;
pub mod service;
pub mod source;

pub use config::IndexerConfig;
