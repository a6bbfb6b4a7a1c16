//! Casement all-in-one: the pipeline (`casement_pipeline`) and the query service in one
//! process on Qdrant Edge, fed by local sources instead of Kafka: a revision-log replay,
//! watched folders and a webhook ([`sources`], [`webhook`]). Every stage is the shared
//! one ([`engine`]); no Kafka client is linked. `casement run` serves ([`run`]),
//! `casement backfill` indexes and exits ([`backfill`]), `casement eval` runs a golden set
//! against a running service over HTTP ([`eval`]), `casement snapshot` and `casement
//! restore` copy a data directory and back ([`snapshot`]), `casement audit` compares the
//! index with a source of truth and repairs it ([`audit`]), `casement migrate` builds the index
//! anew under another model, enrichment or window radius from the stored records, gates it
//! on the golden set and swaps it in ([`migrate`], [`serving`]).

pub mod audit;
pub mod backfill;
pub mod config;
pub mod deletes;
pub mod engine;
pub mod eval;
pub mod metrics;
pub mod migrate;
pub mod pointer;
pub mod progress;
pub mod run;
pub mod sample;
pub mod serving;
pub mod show;
pub mod snapshot;
pub mod sources;
pub mod webhook;

pub use config::CasementConfig;
