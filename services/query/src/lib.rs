//! The Casement query service: hybrid (dense + BM25) search over the sentence index, window
//! expansion and merge, rerank, answers with citations.
//!
//! Today it holds its configuration only; the search endpoint arrives with the query issue,
//! on top of the store and inference crates.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// Environment variables override the file as `CASEMENT_QUERY__<KEY>`.
pub const ENV_PREFIX: &str = "CASEMENT_QUERY";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryConfig {
    /// Address the HTTP API listens on.
    pub listen: SocketAddr,
    /// Most windows one request may ask for.
    pub max_top_k: usize,
}

impl Default for QueryConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_top_k: 50,
        }
    }
}

impl casement_config::Config for QueryConfig {
    fn validate(&self) -> Result<(), String> {
        if self.max_top_k == 0 || self.max_top_k > 1000 {
            return Err(format!(
                "max_top_k = {} must be between 1 and 1000",
                self.max_top_k
            ));
        }
        Ok(())
    }
}
