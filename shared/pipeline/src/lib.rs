//! Casement's indexing pipeline, knowing nothing of Kafka: sources hand it
//! [`SourceMessage`]s, it turns each change event into written sentence points and tells
//! the source what it may acknowledge.
//!
//! ```text
//! source ─▶ route (decode) ─▶ lane: fence → fetch → read → segment → enrich → plan → embed → write ─▶ ack
//!                     └──────────────▶ dead letters ──────────────────────────────────────────┘
//! ```
//!
//! - [`source`]: the interface a source implements ([`SourceId`], [`SourceMessage`],
//!   [`Acknowledge`], [`DeadLetterSink`]); [`offsets`]: what may be committed.
//! - [`stages`]: one module per stage; [`processor`] runs the per-event stages in order.
//! - [`outcome`]: the one vocabulary of outcomes, decisions, stages and reasons;
//!   [`report`] records a finished event (metrics and log line) from one place;
//!   [`metrics`] declares every series.
//! - [`factory`]: the model, the processor and the store probe, built from config.
//! - [`dry_run`]: the plans of a revision log, without a model or a store.
//!
//! Invariants kept here: offsets are committed only past events that are durably written,
//! stale or dead-lettered (3); a transient failure retries and holds its lane, a permanent
//! one is dead-lettered with the original bytes (5); only sentences whose embedding input
//! changed reach the model (2).

pub mod audit;
pub mod config;
pub mod dry_run;
pub mod factory;
pub mod fetch;
pub mod guard;
pub mod metrics;
pub mod migrate;
pub mod offsets;
pub mod outcome;
pub mod processor;
pub mod report;
pub mod slot;
pub mod source;
pub mod spawn;
pub mod stages;

pub use config::{EnrichConfig, EnrichMode, LlmConfig, PipelineConfig};
pub use fetch::{FetchConfig, FetchError, Fetcher, QueryError, WikiAuth};
pub use guard::{DeleteGuard, DeleteGuardConfig, Verdict};
pub use metrics::Metrics;
pub use offsets::Offsets;
pub use outcome::{Decision, Decisions, Finished, Outcome, Reason, RetryStage, Stage};
pub use processor::{ProcessError, Processor};
pub use slot::ProcessorSlot;
pub use source::{Acknowledge, Body, DeadLetter, DeadLetterSink, Origin, SourceId, SourceMessage};
pub use spawn::{Shutdown, Stages, now_ms, spawn};
