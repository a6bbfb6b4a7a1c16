//! Builds the *citation text* of a document: the plain text that every character offset
//! in Casement points into.
//!
//! Definition (kept stable, since stored offsets depend on it):
//! - the document is a sequence of blocks (heading, paragraph, list item, table row, code);
//! - blocks are joined by exactly one blank line (`"\n\n"`);
//! - inside a non-code block every run of whitespace becomes one space, and the block is
//!   trimmed; table cells are joined by `" | "`;
//! - a code block keeps its lines, with trailing whitespace and blank edge lines removed;
//! - markup is removed (links keep their text, images their alt text).

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
}

/// The citation text of a revision and its blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractedText {
    /// Title found in the content (front matter, `<title>`), if any.
    pub title: Option<String>,
    pub text: String,
    pub blocks: Vec<Block>,
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
}

#[derive(Debug)]
struct OpenBlock {
    kind: BlockKind,
    /// Byte offset of the first content byte; `None` while the block is still empty.
    start: Option<usize>,
    pending: Pending,
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
}

impl TextBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Closes the open block (if any) and opens one of `kind`.
    pub fn start_block(&mut self, kind: BlockKind) {
        self.end_block();
        self.open = Some(OpenBlock {
            kind,
            start: None,
            pending: Pending::Nothing,
        });
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
            // Only whitespace was written: drop the block and its separator.
            self.text.truncate(start.saturating_sub(2));
            return;
        }
        self.blocks.push(Block {
            kind: open.kind,
            range: start..self.text.len(),
        });
    }

    fn ensure_open(&mut self) -> &mut OpenBlock {
        self.open.get_or_insert(OpenBlock {
            kind: BlockKind::Paragraph,
            start: None,
            pending: Pending::Nothing,
        })
    }

    fn begin_content(&mut self) {
        let needs_start = self.ensure_open().start.is_none();
        if needs_start {
            if !self.text.is_empty() {
                self.text.push_str("\n\n");
            }
            let start = self.text.len();
            if let Some(open) = self.open.as_mut() {
                open.start = Some(start);
                open.pending = Pending::Nothing;
            }
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

    pub fn finish(mut self, title: Option<String>) -> ExtractedText {
        self.end_block();
        ExtractedText {
            title: title.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()),
            text: self.text,
            blocks: self.blocks,
        }
    }
}
