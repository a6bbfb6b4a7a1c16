//! casement-store's integration tests: one binary, a module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction;
mod contract;
mod edge;
mod server;
mod tls;
