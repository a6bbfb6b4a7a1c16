//! casement-pipeline's integration tests: one binary, a module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod enrich;
mod fairness;
mod fetch;
mod group_commit;
mod process;
