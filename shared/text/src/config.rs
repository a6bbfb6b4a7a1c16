//! Settings of the text core. Changing any of them changes how revisions are segmented, so
//! they enter every section's hash: a changed setting re-segments everything once.

use serde::{Deserialize, Serialize};

/// What to do with fenced or preformatted code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodeBlocks {
    /// A code block is one unit (cut between lines only if over the token cap).
    Keep,
    /// Code blocks are not indexed (they stay in the citation text).
    Skip,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TextConfig {
    /// Language code for sentence boundaries (`sentencex` rules).
    pub language: String,
    /// No unit is longer than this many estimated tokens (see `tokens`).
    pub max_sentence_tokens: usize,
    pub code_blocks: CodeBlocks,
    /// Sentences on each side of a sentence in its window, clamped to the section.
    pub window_radius: usize,
}

impl Default for TextConfig {
    fn default() -> Self {
        Self {
            language: "en".to_owned(),
            max_sentence_tokens: 200,
            code_blocks: CodeBlocks::Keep,
            window_radius: 3,
        }
    }
}

impl TextConfig {
    /// Checks the settings once, at start.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_sentence_tokens < 8 {
            return Err(format!(
                "max_sentence_tokens = {} is too small (at least 8)",
                self.max_sentence_tokens
            ));
        }
        if self.window_radius > 20 {
            return Err(format!(
                "window_radius = {} is too large (at most 20)",
                self.window_radius
            ));
        }
        if self.language.is_empty() {
            return Err("language must not be empty".to_owned());
        }
        Ok(())
    }

    /// Everything that decides segmentation, as bytes to hash into section hashes.
    pub(crate) fn segmentation_fingerprint(&self) -> String {
        format!(
            "seg-v1|{}|{}|{:?}",
            self.language, self.max_sentence_tokens, self.code_blocks
        )
    }
}
