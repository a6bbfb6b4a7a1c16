//! Splits one block of citation text into sentence units.
//!
//! Boundaries come from Wikimedia's `sentencex` (abbreviation lists, decimals, quotes and
//! brackets, ellipses); list items and paragraphs are split by it, table rows and code
//! blocks are one unit each. Any unit over the token cap is then cut at word boundaries
//! (code at line boundaries), so no unit exceeds the embedding model's input.

use std::ops::Range;

use crate::config::{CodeBlocks, TextConfig};
use crate::extract::BlockKind;
use crate::tokens::estimate_tokens;

/// Sentence ranges of `text` (one block), relative to the block, trimmed, in order.
pub fn split_block(kind: BlockKind, text: &str, config: &TextConfig) -> Vec<Range<usize>> {
    let units: Vec<Range<usize>> = match kind {
        BlockKind::Heading { .. } => return Vec::new(),
        BlockKind::Code if config.code_blocks == CodeBlocks::Skip => return Vec::new(),
        BlockKind::Code | BlockKind::TableRow => std::iter::once(0..text.len()).collect(),
        BlockKind::Paragraph | BlockKind::ListItem => {
            let mut units = Vec::new();
            for boundary in sentencex::get_sentence_boundaries(&config.language, text) {
                split_after_closing_brackets(
                    text,
                    boundary.start_byte..boundary.end_byte,
                    &mut units,
                );
            }
            reattach_opening_quotes(text, &mut units);
            units
        }
    };
    let mut sentences = Vec::with_capacity(units.len());
    for unit in units {
        let Some(unit) = trim(text, unit) else {
            continue;
        };
        if estimate_tokens(&text[unit.clone()]) <= config.max_sentence_tokens {
            sentences.push(unit);
        } else if kind == BlockKind::Code {
            cap_code(text, unit, config.max_sentence_tokens, &mut sentences);
        } else {
            cap_prose(text, unit, config.max_sentence_tokens, &mut sentences);
        }
    }
    sentences
}

/// `sentencex` keeps "(Budget is tight.) We proceed." together; a terminator closed by a
/// bracket or quote and followed by a capitalised word ends the sentence.
fn split_after_closing_brackets(text: &str, unit: Range<usize>, out: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    let mut start = unit.start;
    let mut i = unit.start;
    while i < unit.end {
        if matches!(bytes[i], b'.' | b'!' | b'?') {
            let mut j = i + 1;
            while j < unit.end && matches!(bytes[j], b')' | b']' | b'}' | b'"' | b'\'') {
                j += 1;
            }
            let closed = j > i + 1 && bytes[i + 1] != b'"' && bytes[i + 1] != b'\'';
            if closed && j < unit.end && bytes[j] == b' ' {
                let next = text[j..unit.end].trim_start().chars().next();
                if next.is_some_and(|c| c.is_uppercase() || c == '(') {
                    out.push(start..j);
                    start = j;
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out.push(start..unit.end);
}

/// `sentencex` may end a sentence with the opening quote of the next one ("Stop! 'Why"
/// → "Stop! '" + "Why"): a quote that follows whitespace at the end of a unit moves to
/// the start of the next unit.
fn reattach_opening_quotes(text: &str, units: &mut [Range<usize>]) {
    for i in 1..units.len() {
        let previous = &text[units[i - 1].clone()];
        let body = previous.trim_end_matches(['\'', '"', '\u{2018}', '\u{201c}']);
        if body.len() < previous.len()
            && (body.is_empty() || body.ends_with(char::is_whitespace))
            && units[i - 1].end == units[i].start
        {
            let quote_start = units[i - 1].start + body.len();
            units[i - 1].end = quote_start;
            units[i].start = quote_start;
        }
    }
}

fn trim(text: &str, range: Range<usize>) -> Option<Range<usize>> {
    let slice = &text[range.clone()];
    let start = range.start + (slice.len() - slice.trim_start().len());
    let end = range.start + slice.trim_end().len();
    (start < end).then_some(start..end)
}

/// Greedy cut at whitespace so each piece stays within `cap` estimated tokens. A single
/// word too long for the cap (a hash, a URL) is cut every `3 * cap` characters.
fn cap_prose(text: &str, unit: Range<usize>, cap: usize, out: &mut Vec<Range<usize>>) {
    let mut piece_start: Option<usize> = None;
    let mut piece_end = unit.start;
    let mut piece_tokens = 0;
    for word in words(text, unit) {
        for chunk in chop_word(text, word, cap * 3) {
            let tokens = estimate_tokens(&text[chunk.clone()]);
            if piece_start.is_some() && piece_tokens + tokens > cap {
                out.extend(piece_start.take().map(|s| s..piece_end));
                piece_tokens = 0;
            }
            piece_start.get_or_insert(chunk.start);
            piece_end = chunk.end;
            piece_tokens += tokens;
        }
    }
    out.extend(piece_start.map(|s| s..piece_end));
}

fn words(text: &str, unit: Range<usize>) -> impl Iterator<Item = Range<usize>> + '_ {
    let base = unit.start;
    text[unit].split_whitespace().map(move |w| {
        let offset = w.as_ptr() as usize - text.as_ptr() as usize;
        debug_assert!(offset >= base);
        offset..offset + w.len()
    })
}

fn chop_word(text: &str, word: Range<usize>, max_chars: usize) -> Vec<Range<usize>> {
    let mut pieces = Vec::new();
    let mut start = word.start;
    let mut count = 0;
    for (offset, _) in text[word.clone()].char_indices() {
        if count == max_chars {
            pieces.push(start..word.start + offset);
            start = word.start + offset;
            count = 0;
        }
        count += 1;
    }
    pieces.push(start..word.end);
    pieces
}

/// Code is cut between lines, never inside one unless a single line is over the cap.
fn cap_code(text: &str, unit: Range<usize>, cap: usize, out: &mut Vec<Range<usize>>) {
    let mut piece: Option<Range<usize>> = None;
    let mut piece_tokens = 0;
    let mut line_start = unit.start;
    for line in text[unit.clone()].split_inclusive('\n') {
        let line_range = line_start..line_start + line.trim_end().len();
        line_start += line.len();
        let tokens = estimate_tokens(&text[line_range.clone()]);
        if tokens > cap {
            out.extend(piece.take().and_then(|p| trim(text, p)));
            piece_tokens = 0;
            cap_prose(text, line_range, cap, out);
            continue;
        }
        if piece.is_some() && piece_tokens + tokens > cap {
            out.extend(piece.take().and_then(|p| trim(text, p)));
            piece_tokens = 0;
        }
        let start = piece.as_ref().map_or(line_range.start, |p| p.start);
        piece = Some(start..line_range.end);
        piece_tokens += tokens;
    }
    out.extend(piece.and_then(|p| trim(text, p)));
}
