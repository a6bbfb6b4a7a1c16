//! casement-indexer's integration tests: one binary, a module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod cli;
mod faults;
mod flow_control;
mod kafka;
mod migrate_server;
mod restart;
mod support;
mod tls;
