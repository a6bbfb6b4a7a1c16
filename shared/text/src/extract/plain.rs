//! Plain text to citation text: blank lines separate paragraphs; a line that starts with a
//! list marker (`-`, `*`, `•`, `1.`, `1)`) is a list item of its own; other line breaks
//! inside a paragraph are soft.

use super::builder::{BlockKind, ExtractedText, TextBuilder};

pub fn extract(content: &str) -> ExtractedText {
    let mut out = TextBuilder::new();
    let mut offset = 0;
    for line in content.split('\n') {
        out.set_source(offset..offset + line.len());
        offset += line.len() + 1;
        if line.trim().is_empty() {
            out.end_block();
        } else if starts_with_list_marker(line) {
            out.start_block(BlockKind::ListItem);
            out.push_inline(line);
        } else {
            if out.open_kind() == Some(BlockKind::ListItem)
                && line.starts_with(char::is_alphanumeric)
            {
                out.start_block(BlockKind::Paragraph);
            }
            out.push_inline(line);
            out.push_space();
        }
    }
    out.finish(None)
}

fn starts_with_list_marker(line: &str) -> bool {
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix(['-', '*', '•', '+']) {
        return rest.starts_with(' ');
    }
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && digits < 4
        && trimmed[digits..].starts_with(['.', ')'])
        && trimmed[digits + 1..].starts_with(' ')
}
