//! From a revision's markup to its citation text (see [`builder`] for the exact definition).

pub mod builder;
mod html;
mod markdown;
mod plain;
mod wikitext;

pub use builder::{Block, BlockKind, ExtractedText, TextBuilder};

use crate::revision::Format;

/// Extracts the citation text of `content`. Line endings are normalised first (`\r\n` and
/// `\r` become `\n`), so a CMS that switches line endings does not change any offset.
/// Broken markup still yields text; this never fails.
pub fn extract(format: Format, content: &str) -> ExtractedText {
    let normalised;
    let content = if content.contains('\r') {
        normalised = content.replace("\r\n", "\n").replace('\r', "\n");
        normalised.as_str()
    } else {
        content
    };
    match format {
        Format::Markdown => markdown::extract(content),
        Format::Html => html::extract(content),
        Format::Text => plain::extract(content),
        Format::Wikitext => wikitext::extract(content),
    }
}
