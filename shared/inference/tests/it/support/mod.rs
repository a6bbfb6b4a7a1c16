//! Helpers shared by the test modules.

pub mod plumbing;
pub mod squad;
pub mod stub_http;
