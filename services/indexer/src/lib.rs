//! The Casement indexer service: Kafka in, sentence points out. The pipeline itself is
//! `casement_pipeline` (which knows nothing of Kafka); this crate adds what is Kafka's:
//!
//! - [`kafka`]: the consumer-group source (flow control, commits, commit on revoke, lag)
//!   and the dead-letter topic producer;
//! - [`service`]: `run`, the service: model, store, pipeline, admin port, drain on stop;
//! - [`admin`]: `/healthz`, `/readyz`, `/metrics`;
//! - [`replay`]: publishes a revision log to the topic as native events.

pub mod admin;
pub mod config;
pub mod kafka;
pub mod replay;
pub mod service;

pub use config::IndexerConfig;
