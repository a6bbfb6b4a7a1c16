//! One revision → sections and sentences with byte ranges into its citation text.
//!
//! A heading starts a section; the section's path is the chain of enclosing headings. A
//! section's id is derived from its heading path and the occurrence of that path in the
//! document, so it is stable across revisions and independent of where the section sits.
//! Sentences never cross a block, hence never a section.

use std::collections::HashMap;
use std::ops::Range;

use crate::config::TextConfig;
use crate::error::{Error, Result};
use crate::extract::{self, Block, BlockKind, ExtractedText};
use crate::hashing::Hasher128;
use crate::revision::Revision;
use crate::sentences::split_block;

/// Documents larger than this are rejected rather than segmented (a CMS export gone wrong).
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub id: String,
    /// Position of the section in the document, from 0.
    pub ordinal: u32,
    pub heading_path: Vec<String>,
    /// Hash of the segmentation settings and the section's content blocks.
    pub content_hash: String,
    /// Byte range of the content blocks (after the heading) in the citation text.
    pub range: Range<usize>,
    /// Sentence byte ranges in the citation text.
    pub sentences: Vec<Range<usize>>,
    /// Per sentence: where it sits in the section's lists and tables (empty when unknown,
    /// as in an index written before structure was kept: windows are then radius windows).
    pub units: Vec<Unit>,
    /// Per sentence: the characters of the content as submitted that produced it.
    pub sources: Vec<Option<Range<usize>>>,
}

/// Where a sentence sits in its section's structure: what structure-aware windows read
/// (`window::structured_window`). Stored with each sentence point.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(default)]
pub struct Unit {
    /// The sentence's block, counted from 0 in its section.
    pub block: u32,
    /// The list or table the sentence is in, counted from 0 in its section.
    pub group: Option<u32>,
    /// The list or table that this sentence's paragraph introduces (the paragraph just
    /// before it).
    pub leads: Option<u32>,
    /// Where the sentence's line starts (before a list item's indentation and marker),
    /// when the sentence opens a block that has them: a byte offset in a segmentation, a
    /// character offset in a stored record.
    pub line_start: Option<usize>,
}

/// A revision after extraction and segmentation: what the differ compares with the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentedRevision {
    pub doc_id: String,
    pub revision: u64,
    pub title: String,
    pub url: Option<String>,
    pub revision_url: Option<String>,
    pub tenant: Option<String>,
    /// The revision's metadata, as given.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Who may read it (normalised; public when the revision did not say).
    pub access: crate::Access,
    pub text: String,
    /// Links in the citation text (byte ranges) and where they point, as written.
    pub links: Vec<crate::extract::Link>,
    pub sections: Vec<Section>,
    /// How many sections kept the sentence boundaries of the indexed revision.
    pub reused_sections: usize,
}

impl SegmentedRevision {
    pub fn sentence_count(&self) -> usize {
        self.sections.iter().map(|s| s.sentences.len()).sum()
    }
}

/// A section as the index holds it: its content hash and, per sentence, the character
/// offset from the section start and the text. When the new revision has a section with
/// the same id and hash, its boundaries are taken from here instead of segmenting again.
#[derive(Debug, Clone)]
pub struct KnownSection<'a> {
    pub content_hash: &'a str,
    pub sentences: Vec<(usize, &'a str)>,
}

pub type KnownSections<'a> = HashMap<&'a str, KnownSection<'a>>;

/// Segments `revision` from scratch.
pub fn segment(revision: &Revision, config: &TextConfig) -> Result<SegmentedRevision> {
    segment_reusing(revision, config, &KnownSections::new())
}

/// Segments `revision`, taking the sentence boundaries of every section whose content hash
/// is in `known` instead of running the sentence splitter on it again.
pub fn segment_reusing(
    revision: &Revision,
    config: &TextConfig,
    known: &KnownSections<'_>,
) -> Result<SegmentedRevision> {
    if revision.content.len() > MAX_DOCUMENT_BYTES {
        return Err(Error::TooLarge {
            doc_id: revision.doc_id.clone(),
            bytes: revision.content.len(),
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    let markup = config
        .markup()
        .map_err(|message| Error::Config { message })?;
    let extracted = extract::extract_with(
        revision.format,
        &revision.content,
        &revision.doc_id,
        &markup,
    );
    let source_chars = crate::records::CharOffsets::new(&revision.content);
    let title = revision
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| extracted.title.clone())
        .or_else(|| extracted.first_heading().map(str::to_owned))
        .unwrap_or_else(|| revision.doc_id.clone());
    let fingerprint = config.segmentation_fingerprint();
    let mut reused_sections = 0;
    let mut sections = Vec::new();
    for draft in group_sections(&extracted) {
        let content_hash = section_hash(&fingerprint, &extracted, &draft.blocks);
        let range = match (draft.blocks.first(), draft.blocks.last()) {
            (Some(first), Some(last)) => first.range.start..last.range.end,
            _ => draft.heading_end..draft.heading_end,
        };
        let reused = known
            .get(draft.id.as_str())
            .filter(|k| k.content_hash == content_hash)
            .and_then(|k| locate_known(&extracted.text, range.start, &k.sentences));
        let sentences = match reused {
            Some(sentences) => {
                reused_sections += 1;
                sentences
            }
            None => draft
                .blocks
                .iter()
                .flat_map(|block| {
                    let start = block.range.start;
                    split_block(block.kind, extracted.block_text(block), config)
                        .into_iter()
                        .map(move |r| r.start + start..r.end + start)
                })
                .collect(),
        };
        let units = units_of(&draft.blocks, &sentences);
        let sources = sentences
            .iter()
            .map(|s| {
                extracted
                    .source_range(s.clone())
                    .map(|r| source_chars.of(r.start)..source_chars.of(r.end))
            })
            .collect();
        sections.push(Section {
            id: draft.id,
            ordinal: sections.len() as u32,
            heading_path: draft.heading_path,
            content_hash,
            range,
            sentences,
            units,
            sources,
        });
    }
    Ok(SegmentedRevision {
        doc_id: revision.doc_id.clone(),
        revision: revision.revision,
        title,
        url: revision.url.clone(),
        revision_url: revision.revision_url.clone(),
        tenant: revision.tenant.clone(),
        metadata: revision.metadata.clone(),
        access: revision.access.clone().unwrap_or_default().normalized(),
        links: extracted.links,
        text: extracted.text,
        sections,
        reused_sections,
    })
}

/// The structure of each sentence of a section whose blocks are `blocks`.
fn units_of(blocks: &[&Block], sentences: &[Range<usize>]) -> Vec<Unit> {
    // Lists and tables renumbered from 0 in the section, in order of appearance.
    let mut groups: Vec<u32> = Vec::new();
    let mut local = |group: Option<u32>| {
        group.map(|g| match groups.iter().position(|&x| x == g) {
            Some(i) => i as u32,
            None => {
                groups.push(g);
                groups.len() as u32 - 1
            }
        })
    };
    let block_groups: Vec<Option<u32>> = blocks.iter().map(|b| local(b.group)).collect();
    let mut units = Vec::with_capacity(sentences.len());
    let mut b = 0;
    let mut opened = usize::MAX;
    for sentence in sentences {
        while b + 1 < blocks.len() && blocks[b].range.end <= sentence.start {
            b += 1;
        }
        let block = blocks.get(b);
        let next_group = block_groups.get(b + 1).copied().flatten();
        let group = block_groups.get(b).copied().flatten();
        let leads = match block.map(|x| x.kind) {
            Some(BlockKind::Paragraph) if group.is_none() => next_group,
            _ => None,
        };
        let line_start = block
            .filter(|x| x.line_start < x.range.start && opened != b)
            .map(|x| x.line_start);
        opened = b;
        units.push(Unit {
            block: b as u32,
            group,
            leads,
            line_start,
        });
    }
    units
}

struct SectionDraft<'a> {
    id: String,
    heading_path: Vec<String>,
    heading_end: usize,
    blocks: Vec<&'a Block>,
}

fn group_sections(extracted: &ExtractedText) -> Vec<SectionDraft<'_>> {
    let mut drafts: Vec<SectionDraft<'_>> = Vec::new();
    let mut stack: Vec<(u8, String)> = Vec::new();
    let mut occurrences: HashMap<Vec<String>, u32> = HashMap::new();
    let mut new_draft = |path: Vec<String>, heading_end: usize| {
        let occurrence = occurrences.entry(path.clone()).or_insert(0);
        let mut hasher = Hasher128::new();
        for heading in &path {
            hasher.field(heading.as_bytes());
        }
        hasher.field(&occurrence.to_le_bytes());
        *occurrence += 1;
        SectionDraft {
            id: hasher.hex()[..16].to_owned(),
            heading_path: path,
            heading_end,
            blocks: Vec::new(),
        }
    };
    for block in &extracted.blocks {
        if let BlockKind::Heading { level } = block.kind {
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            stack.push((level, extracted.block_text(block).to_owned()));
            let path = stack.iter().map(|(_, h)| h.clone()).collect();
            drafts.push(new_draft(path, block.range.end));
        } else {
            if drafts.is_empty() {
                drafts.push(new_draft(Vec::new(), 0));
            }
            if let Some(draft) = drafts.last_mut() {
                draft.blocks.push(block);
            }
        }
    }
    drafts
}

fn section_hash(fingerprint: &str, extracted: &ExtractedText, blocks: &[&Block]) -> String {
    let mut hasher = Hasher128::new();
    hasher.field(fingerprint.as_bytes());
    for block in blocks {
        hasher.field(format!("{:?}", block.kind).as_bytes());
        // From the line start: a list item's marker and nesting are in its windows.
        hasher.field(&extracted.text.as_bytes()[block.line_start..block.range.end]);
        hasher.field(&[u8::from(block.group.is_some())]);
    }
    hasher.hex()
}

/// Byte ranges of known sentences, from their character offsets relative to the section
/// start; `None` unless every sentence is found exactly where the index says it was.
fn locate_known(
    text: &str,
    section_start: usize,
    sentences: &[(usize, &str)],
) -> Option<Vec<Range<usize>>> {
    let section = &text[section_start..];
    let mut ranges = Vec::with_capacity(sentences.len());
    let (mut char_cursor, mut byte_cursor) = (0usize, 0usize);
    for &(char_offset, sentence) in sentences {
        while char_cursor < char_offset {
            byte_cursor += section.get(byte_cursor..)?.chars().next()?.len_utf8();
            char_cursor += 1;
        }
        if char_cursor != char_offset
            || section.get(byte_cursor..byte_cursor + sentence.len())? != sentence
        {
            return None;
        }
        ranges.push(section_start + byte_cursor..section_start + byte_cursor + sentence.len());
        byte_cursor += sentence.len();
        char_cursor += sentence.chars().count();
    }
    Some(ranges)
}
