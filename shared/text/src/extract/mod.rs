//! From a revision's markup to its citation text (see [`builder`] for the exact definition).

pub mod builder;
mod html;
mod markdown;
mod plain;
pub mod rewrite;
pub mod templates;
mod wikitext;

pub use builder::{Block, BlockKind, ExtractedText, Link, TextBuilder};
pub use templates::{Markup, MarkupRule, TemplateSet};

use crate::revision::Format;

/// Extracts the citation text of `content` with every built-in template set and no
/// operator rules (see [`extract_with`]).
pub fn extract(format: Format, content: &str) -> ExtractedText {
    extract_with(format, content, "", &Markup::builtin())
}

/// Extracts the citation text of `content` (document `doc_id`, for the operator's rules).
/// Line endings are normalised first (`\r\n` and `\r` become `\n`), so a CMS that switches
/// line endings does not change any offset of the citation text; Markdown loses its
/// template tags. [`ExtractedText::sources`] point into `content` as given (bytes).
/// Broken markup still yields text; this never fails.
pub fn extract_with(format: Format, content: &str, doc_id: &str, markup: &Markup) -> ExtractedText {
    let lines = content
        .contains('\r')
        .then(|| rewrite::normalise_line_endings(content));
    let normalised = lines.as_ref().map_or(content, |r| r.text.as_str());
    let ruled = markup.apply_rules(doc_id, normalised);
    let ruled_text = ruled.as_ref().map_or(normalised, |r| r.text.as_str());
    let stripped = (format == Format::Markdown).then(|| markup.strip(ruled_text));
    let parsed = stripped.as_ref().map_or(ruled_text, |r| r.text.as_str());
    let mut extracted = match format {
        Format::Markdown => markdown::extract(parsed),
        Format::Html => html::extract(parsed),
        Format::Text => plain::extract(parsed),
        Format::Wikitext => wikitext::extract(parsed),
    };
    extracted.map_sources(|at, end| {
        let at = stripped.as_ref().map_or(at, |r| r.source_of(at, end));
        let at = ruled.as_ref().map_or(at, |r| r.source_of(at, end));
        lines.as_ref().map_or(at, |r| r.source_of(at, end))
    });
    extracted
}

/// The wikitext stripper that needs no parse tree (what a page the parser cannot finish
/// becomes); public for the fidelity measurements.
pub fn strip_wikitext(content: &str) -> ExtractedText {
    wikitext::strip(content)
}
