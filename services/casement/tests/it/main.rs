//! casement's integration tests: one binary, a module per concern (the binary's command line, its configuration limits, the docs' checks, snapshots). The end-to-end suite that runs the binary as a service is the top-level `tests/` crate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli;
mod config_limits;
mod docs;
mod snapshot;
