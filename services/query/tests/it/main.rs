//! casement-query's integration tests: one binary, a module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod access;
mod cli;
mod fuzz;
mod http;
mod merge;
mod metadata;
mod request_ids;
mod requests;
mod revisions;
mod support;
