//! Indexer settings (see `deploy/indexer.example.toml`, which lists every key with its default).

use casement_text::TextConfig;
use serde::{Deserialize, Serialize};

/// Environment variables override the file as `CASEMENT_INDEXER__<SECTION>__<KEY>`.
pub const ENV_PREFIX: &str = "CASEMENT_INDEXER";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexerConfig {
    /// Events whose content is larger than this are rejected (dead-lettered), not indexed.
    pub max_event_bytes: usize,
    pub text: TextConfig,
}

impl Default for IndexerConfig {
    fn default() -> Self {
        Self {
            max_event_bytes: 4 * 1024 * 1024,
            text: TextConfig::default(),
        }
    }
}

impl casement_config::Config for IndexerConfig {
    fn validate(&self) -> Result<(), String> {
        if self.max_event_bytes == 0
            || self.max_event_bytes > casement_text::segmenter::MAX_DOCUMENT_BYTES
        {
            return Err(format!(
                "max_event_bytes = {} must be between 1 and {}",
                self.max_event_bytes,
                casement_text::segmenter::MAX_DOCUMENT_BYTES
            ));
        }
        self.text.validate()
    }
}
