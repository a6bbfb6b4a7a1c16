//! casement-inference's integration tests: one binary, a module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cross_encoder;
mod embedder_kind;
mod learned;
mod parity;
mod provisioning;
mod remote;
mod rescoring;
mod support;
