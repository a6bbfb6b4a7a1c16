//! Builds the *citation text* of a document: the plain text that every character offset
//! in Casement points into.
//!
//! Definition (kept stable, since stored offsets depend on it; `seg-v2`):
//! - the document is a sequence of blocks (heading, paragraph, list item, table row, code);
//! - blocks are joined by one blank line (`"\n\n"`), except the items of one list and the
//!   rows of one table, which are joined by one line break (`"\n"`);
//! - a list item's line starts with its nesting (two spaces a level) and its marker (`1.`
//!   for an ordered list, `-` otherwise) and a space; the marker is not part of the
//!   block's range (sentences never hold it), but a window that starts at the item does;
//! - inside a non-code block every run of whitespace becomes one space, and the block is
//!   trimmed; table cells are joined by `" | "`;
//! - a code block keeps its lines, with trailing whitespace and blank edge lines removed;
//! - markup is removed (links keep their text, images their alt text); where a link went
//!   is kept beside the text ([`Link`]), and so is where each piece of text came from in
//!   the content ([`ExtractedText::source_range`]).

use std::ops::Range;

/// What a block is; decides how it is split into sentences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    Heading { level: u8 },
    Paragraph,
    ListItem,
    TableRow,
    Code,
}

/// One block of the citation text, by byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: BlockKind,
    pub range: Range<usize>,
    /// Where the block's line starts: before its indentation and list marker (equal to
    /// `range.start` for a block without them).
    pub line_start: usize,
    /// The list or table the block belongs to (numbered in document order), if any.
    pub group: Option<u32>,
}

/// A link in the citation text: the bytes of its text and where it points (as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub range: Range<usize>,
    pub url: String,
}

/// The citation text of a revision and its blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractedText {
    /// Title found in the content (front matter, `<title>`), if any.
    pub title: Option<String>,
    pub text: String,
    pub blocks: Vec<Block>,
    pub links: Vec<Link>,
    /// Where the text came from: `(text byte, content bytes)` pairs in text order; the text
    /// from one pair's byte up to the next pair's came from that pair's content bytes.
    pub sources: Vec<(usize, Range<usize>)>,
}

impl ExtractedText {
    pub fn block_text(&self, block: &Block) -> &str {
        &self.text[block.range.clone()]
    }

    /// Text of the first heading, used as a title of last resort.
    pub fn first_heading(&self) -> Option<&str> {
        self.blocks
            .iter()
            .find(|b| matches!(b.kind, BlockKind::Heading { .. }))
            .map(|b| self.block_text(b))
    }

    /// The bytes of the content that produced the citation text's `range`: from the start
    /// of the piece holding its first byte to the end of the piece holding its last.
    /// `None` when no piece is known (text the extractor wrote itself, such as markers).
    pub fn source_range(&self, range: Range<usize>) -> Option<Range<usize>> {
        if self.sources.is_empty() || range.is_empty() {
            return None;
        }
        let piece = |byte: usize| {
            self.sources
                .partition_point(|(at, _)| *at <= byte)
                .checked_sub(1)
        };
        let first = piece(range.start).unwrap_or(0);
        let last = piece(range.end - 1)?;
        let pieces = &self.sources[first..=last.max(first)];
        let start = pieces.iter().map(|(_, s)| s.start).min()?;
        let end = pieces.iter().map(|(_, s)| s.end).max()?;
        Some(start..end.max(start))
    }

    /// Maps every content offset through `map` (content offsets after a rewrite → offsets
    /// in the content as submitted).
    pub fn map_sources(&mut self, map: impl Fn(usize, bool) -> usize) {
        for (_, source) in &mut self.sources {
            *source = map(source.start, false)..map(source.end, true);
        }
    }
}

#[derive(Debug)]
struct OpenBlock {
    kind: BlockKind,
    /// Byte offset of the first content byte; `None` while the block is still empty.
    start: Option<usize>,
    /// Where the block's separator was written (what an empty block truncates to).
    separator_at: usize,
    line_start: usize,
    pending: Pending,
    /// Indentation and marker written before the first content byte.
    prefix: String,
    group: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Nothing,
    Space,
    CellSeparator,
}

/// Accumulates blocks while a format's parser walks its tree.
#[derive(Debug, Default)]
pub struct TextBuilder {
    text: String,
    blocks: Vec<Block>,
    open: Option<OpenBlock>,
    links: Vec<Link>,
    /// Links opened and not closed: their URL and the text byte where they start.
    open_links: Vec<(String, usize)>,
    sources: Vec<(usize, Range<usize>)>,
    /// Content bytes of the fragment being pushed, recorded at its first written byte.
    source: Option<Range<usize>>,
    source_recorded: bool,
    groups: u32,
}

impl TextBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Closes the open block (if any) and opens one of `kind`.
    pub fn start_block(&mut self, kind: BlockKind) {
        self.start_block_in(kind, None, String::new());
    }

    /// Opens a block of `kind` in list or table `group`, whose line starts with `prefix`
    /// (indentation and list marker, written verbatim before its first content).
    pub fn start_block_in(&mut self, kind: BlockKind, group: Option<u32>, prefix: String) {
        self.end_block();
        self.open = Some(OpenBlock {
            kind,
            start: None,
            separator_at: self.text.len(),
            line_start: self.text.len(),
            pending: Pending::Nothing,
            prefix,
            group,
        });
    }

    /// A new list or table: the id its blocks are opened with.
    pub fn new_group(&mut self) -> u32 {
        self.groups += 1;
        self.groups - 1
    }

    pub fn open_kind(&self) -> Option<BlockKind> {
        self.open.as_ref().map(|b| b.kind)
    }

    /// Closes the open block; an empty block leaves no trace.
    pub fn end_block(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        let Some(start) = open.start else {
            return;
        };
        let keep = if open.kind == BlockKind::Code {
            self.text[start..].trim_end().len()
        } else {
            self.text[start..].trim_end_matches(' ').len()
        };
        self.text.truncate(start + keep);
        if keep == 0 {
            // Only whitespace was written: drop the block, its marker and its separator.
            self.text.truncate(open.separator_at);
            while self
                .sources
                .last()
                .is_some_and(|(at, _)| *at >= self.text.len())
            {
                self.sources.pop();
            }
            return;
        }
        self.blocks.push(Block {
            kind: open.kind,
            range: start..self.text.len(),
            line_start: open.line_start,
            group: open.group,
        });
    }

    fn ensure_open(&mut self) -> &mut OpenBlock {
        let at = self.text.len();
        self.open.get_or_insert(OpenBlock {
            kind: BlockKind::Paragraph,
            start: None,
            separator_at: at,
            line_start: at,
            pending: Pending::Nothing,
            prefix: String::new(),
            group: None,
        })
    }

    fn begin_content(&mut self) {
        let needs_start = self.ensure_open().start.is_none();
        if needs_start {
            let group = self.open.as_ref().and_then(|o| o.group);
            let same_group = group.is_some()
                && self.blocks.last().is_some_and(|b| b.group == group)
                && self
                    .blocks
                    .last()
                    .is_some_and(|b| b.range.end == self.text.len());
            let separator_at = self.text.len();
            if !self.text.is_empty() {
                self.text.push_str(if same_group { "\n" } else { "\n\n" });
            }
            let line_start = self.text.len();
            let prefix = self
                .open
                .as_mut()
                .map(|o| std::mem::take(&mut o.prefix))
                .unwrap_or_default();
            self.text.push_str(&prefix);
            let start = self.text.len();
            if let Some(open) = self.open.as_mut() {
                open.start = Some(start);
                open.separator_at = separator_at;
                open.line_start = line_start;
                open.pending = Pending::Nothing;
            }
        }
    }

    /// The content bytes the next pushed text comes from (until the next call).
    pub fn set_source(&mut self, source: Range<usize>) {
        self.source = Some(source);
        self.source_recorded = false;
    }

    fn record_source(&mut self) {
        if !self.source_recorded
            && let Some(source) = self.source.clone()
        {
            self.source_recorded = true;
            let at = self.text.len();
            if self.sources.last().is_some_and(|(last, _)| *last == at) {
                self.sources.pop();
            }
            self.sources.push((at, source));
        }
    }

    /// Appends inline text; whitespace runs become one space (code blocks keep it).
    pub fn push_inline(&mut self, fragment: &str) {
        if self.ensure_open().kind == BlockKind::Code {
            self.push_code(fragment);
            return;
        }
        for c in fragment.chars() {
            if c.is_whitespace() {
                if let Some(open) = self.open.as_mut()
                    && open.start.is_some()
                    && open.pending == Pending::Nothing
                {
                    open.pending = Pending::Space;
                }
                continue;
            }
            self.begin_content();
            if let Some(open) = self.open.as_mut() {
                match std::mem::replace(&mut open.pending, Pending::Nothing) {
                    Pending::Nothing => {}
                    Pending::Space => self.text.push(' '),
                    Pending::CellSeparator => self.text.push_str(" | "),
                }
            }
            self.record_source();
            self.text.push(c);
        }
    }

    /// Marks a word boundary (a soft break, `<br>`, the edge of a block-level child).
    pub fn push_space(&mut self) {
        self.push_inline(" ");
    }

    /// Appends preformatted text verbatim (line ends normalised, trailing spaces trimmed).
    pub fn push_code(&mut self, fragment: &str) {
        for line in fragment.split_inclusive('\n') {
            let has_newline = line.ends_with('\n');
            let body = line.trim_end();
            let open_empty = self.ensure_open().start.is_none();
            if open_empty && body.is_empty() {
                continue; // leading blank lines of a code block
            }
            self.begin_content();
            self.record_source();
            self.text.push_str(body);
            if has_newline {
                self.text.push('\n');
            }
        }
    }

    /// Separates two table cells in the open row.
    pub fn cell_separator(&mut self) {
        if let Some(open) = self.open.as_mut()
            && open.start.is_some()
        {
            open.pending = Pending::CellSeparator;
        }
    }

    /// Opens a link to `url` at the next text written.
    pub fn start_link(&mut self, url: &str) {
        let at = self.text.len();
        self.open_links.push((url.trim().to_owned(), at));
    }

    /// Closes the innermost open link; a link with no text or no target leaves no trace.
    pub fn end_link(&mut self) {
        let Some((url, at)) = self.open_links.pop() else {
            return;
        };
        let end = self.text.len();
        // The link's text starts at its first non-space byte (a separator may follow `at`).
        let text = &self.text[at.min(end)..end];
        let start = end - text.trim_start().len();
        if url.is_empty() || start >= end {
            return;
        }
        self.links.push(Link {
            range: start..end,
            url,
        });
    }

    pub fn finish(mut self, title: Option<String>) -> ExtractedText {
        self.end_block();
        let length = self.text.len();
        // Links whose text was dropped with an empty block.
        self.links
            .retain(|l| l.range.end <= length && !self.text[l.range.clone()].trim().is_empty());
        self.links.sort_by_key(|l| l.range.start);
        ExtractedText {
            title: title.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()),
            text: self.text,
            blocks: self.blocks,
            links: self.links,
            sources: self.sources,
        }
    }
}

#[cfg(test)]
mod tests;
