//! casement-text's integration tests: one binary, a module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod properties;
mod replay_18f;
mod segmenter_cases;
