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
    /// Most estimated tokens a window grows to when it takes in the rest of a list or
    /// table and the sentence that introduces it (a radius window is never cut by it).
    pub window_max_tokens: usize,
    /// Template languages whose tags are removed from Markdown (`liquid`, `hugo`, `mdx`).
    pub templates: Vec<crate::extract::TemplateSet>,
    /// The operator's own rewrites, applied before parsing (`[[text.markup_rules]]`:
    /// `pattern`, `replace`, `doc_prefix`).
    pub markup_rules: Vec<crate::extract::MarkupRule>,
}

impl Default for TextConfig {
    fn default() -> Self {
        Self {
            language: "en".to_owned(),
            max_sentence_tokens: 200,
            code_blocks: CodeBlocks::Keep,
            window_radius: 3,
            window_max_tokens: 400,
            templates: vec![
                crate::extract::TemplateSet::Liquid,
                crate::extract::TemplateSet::Hugo,
                crate::extract::TemplateSet::Mdx,
            ],
            markup_rules: Vec::new(),
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
        if !(16..=8192).contains(&self.window_max_tokens) {
            return Err(format!(
                "window_max_tokens = {} must be between 16 and 8192",
                self.window_max_tokens
            ));
        }
        self.markup()?;
        if self.language.is_empty() {
            return Err("language must not be empty".to_owned());
        }
        Ok(())
    }

    /// The template sets and rules, compiled (an error names a rule that does not).
    pub fn markup(&self) -> Result<crate::extract::Markup, String> {
        crate::extract::Markup::new(&self.templates, &self.markup_rules)
    }

    /// Everything that decides segmentation, as bytes to hash into section hashes. `seg-v2`:
    /// list markers and template stripping in the citation text.
    pub(crate) fn segmentation_fingerprint(&self) -> String {
        let mut fingerprint = format!(
            "seg-v2|{}|{}|{:?}|{:?}",
            self.language, self.max_sentence_tokens, self.code_blocks, self.templates
        );
        for rule in &self.markup_rules {
            fingerprint.push_str(&format!(
                "|{}\u{1f}{}\u{1f}{}",
                rule.pattern, rule.replace, rule.doc_prefix
            ));
        }
        fingerprint
    }
}
