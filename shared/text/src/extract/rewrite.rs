//! A rewritten copy of a revision's content that remembers where each byte came from, so
//! that offsets into the copy (what the parsers see) map back to the content as submitted.

use std::ops::Range;

/// One piece of the copy: `out` bytes of the copy came from `source` bytes of the content;
/// `verbatim` when they are the same bytes (offsets map one to one).
#[derive(Debug, Clone)]
struct Piece {
    out: usize,
    source: Range<usize>,
    verbatim: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Rewrite {
    pub text: String,
    pieces: Vec<Piece>,
}

impl Rewrite {
    /// The content itself (nothing rewritten).
    pub fn identity(content: &str) -> Self {
        let mut rewrite = Self::default();
        rewrite.copy(content, 0..content.len());
        rewrite
    }

    /// Appends `content[range]` as it is.
    pub fn copy(&mut self, content: &str, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        if let Some(last) = self.pieces.last_mut()
            && last.verbatim
            && last.source.end == range.start
            && last.out + last.source.len() == self.text.len()
        {
            last.source.end = range.end;
        } else {
            self.pieces.push(Piece {
                out: self.text.len(),
                source: range.clone(),
                verbatim: true,
            });
        }
        self.text.push_str(&content[range]);
    }

    /// Appends `text` in place of the content's `range`.
    pub fn replace(&mut self, range: Range<usize>, text: &str) {
        self.pieces.push(Piece {
            out: self.text.len(),
            source: range,
            verbatim: false,
        });
        self.text.push_str(text);
    }

    /// Appends `content[*copied..range.start]` as it is, then `text` in place of `range`,
    /// and moves `copied` (how much of the content is in the copy) past it.
    pub fn splice(&mut self, content: &str, copied: &mut usize, range: Range<usize>, text: &str) {
        self.copy(content, *copied..range.start);
        self.replace(range.clone(), text);
        *copied = range.end;
    }

    /// The content offset of the copy's offset `at`. A replaced piece maps to its start,
    /// or (`end`) to its end.
    pub fn source_of(&self, at: usize, end: bool) -> usize {
        let index = self.pieces.partition_point(|p| p.out <= at);
        let Some(piece) = index.checked_sub(1).map(|i| &self.pieces[i]) else {
            return 0;
        };
        if piece.verbatim {
            (piece.source.start + (at - piece.out)).min(piece.source.end)
        } else if end && at > piece.out {
            piece.source.end
        } else {
            piece.source.start
        }
    }

    /// [`Self::source_of`] through `self`, then through `outer` (a rewrite of which this
    /// one is a rewrite).
    pub fn then(&self, outer: &Rewrite, at: usize, end: bool) -> usize {
        outer.source_of(self.source_of(at, end), end)
    }
}

/// The content with `\r\n` and `\r` as `\n` (a CMS that switches line endings changes no
/// offset of the citation text), remembering where each byte was.
pub fn normalise_line_endings(content: &str) -> Rewrite {
    let mut rewrite = Rewrite::default();
    let mut from = 0;
    let bytes = content.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\r' {
            rewrite.copy(content, from..i);
            let end = if bytes.get(i + 1) == Some(&b'\n') {
                i + 2
            } else {
                i + 1
            };
            rewrite.replace(i..end, "\n");
            from = end;
            i = end;
        } else {
            i += 1;
        }
    }
    rewrite.copy(content, from..content.len());
    rewrite
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_back_through_replacements() {
        let content = "a\r\nbc\rd";
        let rewrite = normalise_line_endings(content);
        assert_eq!(rewrite.text, "a\nbc\nd");
        assert_eq!(rewrite.source_of(0, false), 0);
        assert_eq!(rewrite.source_of(2, false), 3); // b
        assert_eq!(rewrite.source_of(5, false), 6); // d
        assert_eq!(rewrite.source_of(6, true), 7); // end
        assert_eq!(rewrite.source_of(2, true), 3);
    }
}
