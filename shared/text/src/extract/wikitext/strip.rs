//! Wikitext to citation text without a parse tree: what a page the parser cannot finish
//! becomes (and what `make fuzz` found it panicking on).

use super::{CATEGORY_NAMESPACES, FILE_NAMESPACES, is_namespace, unindent_tables};
use crate::extract::builder::{BlockKind, ExtractedText, TextBuilder};

/// Wikitext to citation text without a parse tree: what a page the parser cannot finish
/// becomes. Removes comments, `<ref>`s, templates and tables' syntax (rows become `cell |
/// cell` rows), file and category links; keeps link labels, headings and list items.
pub fn strip(content: &str) -> ExtractedText {
    let mut out = TextBuilder::new();
    let cleaned = strip_nested(&unindent_tables(content));
    let mut in_table = None;
    let mut list_group = None;
    let mut offset = 0usize;
    for line in cleaned.split('\n') {
        let line_offset = offset;
        offset += line.len() + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            out.end_block();
            list_group = None;
            continue;
        }
        out.set_source(line_offset..line_offset + line.len());
        if trimmed.starts_with("{|") {
            out.end_block();
            in_table = Some(out.new_group());
            continue;
        }
        if trimmed.starts_with("|}") {
            out.end_block();
            in_table = None;
            continue;
        }
        if let Some(group) = in_table {
            if trimmed.starts_with("|-") {
                out.start_block_in(BlockKind::TableRow, Some(group), String::new());
                continue;
            }
            if trimmed.starts_with("|+") {
                continue;
            }
            if let Some(cells) = trimmed
                .strip_prefix('|')
                .or_else(|| trimmed.strip_prefix('!'))
            {
                if out.open_kind() != Some(BlockKind::TableRow) {
                    out.start_block_in(BlockKind::TableRow, Some(group), String::new());
                }
                for cell in cells.split("||").flat_map(|c| c.split("!!")) {
                    // `style="…" | text`: the text after the attributes.
                    let text = match cell.split_once('|') {
                        Some((attributes, text)) if attributes.contains('=') => text,
                        _ => cell,
                    };
                    out.cell_separator();
                    out.push_inline(&inline(text));
                }
                continue;
            }
            out.push_space();
            out.push_inline(&inline(trimmed));
            continue;
        }
        if let Some(heading) = heading(trimmed) {
            out.start_block(BlockKind::Heading { level: heading.0 });
            out.push_inline(&inline(heading.1));
            out.end_block();
            continue;
        }
        let markers = trimmed
            .bytes()
            .take_while(|b| matches!(b, b'*' | b'#' | b':' | b';'))
            .count();
        if markers > 0 {
            let group = *list_group.get_or_insert_with(|| out.new_group());
            let ordered = trimmed.as_bytes()[markers - 1] == b'#';
            let marker = if ordered { "1." } else { "-" };
            out.start_block_in(
                BlockKind::ListItem,
                Some(group),
                format!("{}{marker} ", "  ".repeat(markers - 1)),
            );
            out.push_inline(&inline(&trimmed[markers..]));
            out.end_block();
            continue;
        }
        list_group = None;
        if out.open_kind() != Some(BlockKind::Paragraph) {
            out.start_block(BlockKind::Paragraph);
        }
        out.push_inline(&inline(trimmed));
        out.push_space();
    }
    out.finish(None)
}

/// The content with comments, `<ref>…</ref>`, `<gallery>…</gallery>`-like tags and
/// templates removed (nested), each replaced by spaces of its length so that every other
/// byte keeps its offset (newlines inside are kept).
fn strip_nested(content: &str) -> String {
    let mut bytes = content.as_bytes().to_vec();
    let blank = |bytes: &mut Vec<u8>, range: std::ops::Range<usize>| {
        for b in &mut bytes[range] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    // Comments and the contents of tags that hold no prose.
    for (open, close) in [
        ("<!--", "-->"),
        ("<ref", "</ref>"),
        ("<gallery", "</gallery>"),
        ("<math", "</math>"),
        ("<score", "</score>"),
        ("<timeline", "</timeline>"),
        ("<imagemap", "</imagemap>"),
        ("<templatestyles", ">"),
    ] {
        let mut at = 0;
        // ASCII lower case keeps every byte where it was.
        let lower = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
        while let Some(found) = lower.get(at..).and_then(|s| s.find(open)).map(|n| n + at) {
            // `<ref name="x" />` closes itself.
            let tag_end = lower[found..].find('>').map(|n| found + n + 1);
            let end = match tag_end {
                Some(end) if open == "<ref" && lower[..end].ends_with("/>") => end,
                _ => lower[found..]
                    .find(close)
                    .map_or(content.len(), |n| found + n + close.len()),
            };
            if end > bytes.len()
                || !content.is_char_boundary(found)
                || !content.is_char_boundary(end)
            {
                break;
            }
            blank(&mut bytes, found..end);
            at = end;
        }
    }
    // Templates, innermost first (`{{` … `}}` with nesting), and file/category links.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut bytes = text.into_bytes();
    let mut stack = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'{' && bytes[i + 1] == b'{' {
            stack.push(i);
            i += 2;
        } else if bytes[i] == b'}' && bytes[i + 1] == b'}' {
            match stack.pop() {
                Some(start) => blank(&mut bytes, start..i + 2),
                // A `}}` whose `{{` is gone (broken markup): the braces at least go.
                None => blank(&mut bytes, i..i + 2),
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    for start in stack {
        blank(&mut bytes, start..start + 2);
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut bytes = text.clone().into_bytes();
    let mut at = 0;
    while let Some(found) = text.get(at..).and_then(|s| s.find("[[")).map(|n| n + at) {
        let inner_start = found + 2;
        let name = text[inner_start..]
            .split(['|', ']', ':'])
            .next()
            .unwrap_or("");
        let is_namespaced = text[inner_start..]
            .trim_start_matches(':')
            .split_once(':')
            .is_some_and(|(ns, _)| {
                is_namespace(ns, FILE_NAMESPACES) || is_namespace(ns, CATEGORY_NAMESPACES)
            })
            && !name.is_empty();
        if is_namespaced {
            // Up to the matching `]]` (captions hold links of their own).
            let mut depth = 0;
            let mut j = found;
            let mut end = text.len();
            while j + 1 < text.len() {
                if text.as_bytes()[j] == b'[' && text.as_bytes()[j + 1] == b'[' {
                    depth += 1;
                    j += 2;
                } else if text.as_bytes()[j] == b']' && text.as_bytes()[j + 1] == b']' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut bytes, found..end);
            at = end;
        } else {
            at = inner_start;
        }
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `== Title ==` → (2, "Title").
fn heading(line: &str) -> Option<(u8, &str)> {
    let level = line.bytes().take_while(|&b| b == b'=').count();
    let trailing = line.bytes().rev().take_while(|&b| b == b'=').count();
    if level < 2 || trailing < 2 || line.len() <= level + trailing {
        return None;
    }
    let level = level.min(trailing).min(6);
    Some((level as u8, line[level..line.len() - level].trim()))
}

/// Inline markup of one line: links keep their label, external links theirs, bold and
/// italic quotes and HTML tags go.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[[") {
            let Some(end) = after.find("]]") else {
                rest = after; // an unclosed `[[`: the brackets go, the text stays
                continue;
            };
            let inner = &after[..end];
            let label = inner.rsplit('|').next().unwrap_or(inner);
            let label = label.trim_start_matches(':');
            out.push_str(&inline(label.rsplit_once(':').map_or(label, |(_, n)| n)));
            rest = &after[end + 2..];
        } else if rest.starts_with("]]") {
            rest = &rest[2..];
        } else if let Some(after) = rest.strip_prefix('[')
            && (after.starts_with("http") || after.starts_with("//"))
        {
            let end = after.find(']').unwrap_or(after.len());
            if let Some((_, label)) = after[..end].split_once(' ') {
                out.push_str(label);
            }
            rest = after.get(end + 1..).unwrap_or("");
        } else if rest.starts_with("''") {
            rest = rest.trim_start_matches('\'');
        } else if rest.starts_with('<')
            && rest[1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
        {
            let end = rest.find('>').map_or(rest.len(), |n| n + 1);
            out.push(' ');
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_stripper_leaves_no_markup() {
        let page = "== Geschichte ==\n'''Berlin''' ist<ref name=\"a\">{{Literatur|Titel=X}}</ref> eine [[Stadt|Großstadt]].{{Infobox\n|a = {{b}}\n}}\n{| class=\"wikitable\"\n|-\n! Jahr !! Einwohner\n|-\n| 1900 || style=\"x\" | 1.888.000\n|}\n* Punkt [[Datei:X.png|mini|Bild]]\n# Erster\n";
        let text = strip(page).text;
        assert_eq!(
            text,
            "Geschichte\n\nBerlin ist eine Großstadt.\n\nJahr | Einwohner\n1900 | 1.888.000\n\n- Punkt\n1. Erster"
        );
    }
}
