//! The Casement query service: hybrid (dense + BM25) search over the sentence index, window
//! expansion and merge, rerank, answers with citations, over HTTP.
//!
//! The service is a library so that the all-in-one binary serves the same router over the
//! store it indexes into.

pub mod api;
pub mod auth;
pub mod config;
pub mod error;
pub mod eval;
pub mod http;
pub mod metrics;
#[cfg(test)]
mod openapi_check;
pub mod search;
pub mod service;

pub use config::{ENV_PREFIX, QueryConfig};
pub use http::{App, OPENAPI, router};
pub use metrics::Metrics;
