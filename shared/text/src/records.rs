//! Sentence records: the payload of one index point per sentence (DESIGN.md, "Point model"),
//! and the deterministic point ids.
//!
//! A point id is a UUIDv5 of (document id, section id, hash of the sentence text, occurrence
//! of that text in the section). It does not depend on the sentence's position, so inserting
//! text before a sentence does not change its id.

use std::collections::HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::TextConfig;
use crate::document::DocRef;
use crate::hashing::{Hasher128, hash_hex};
use crate::segmenter::{Section, SegmentedRevision, Unit};
use crate::window::structured_window;

/// Namespace of Casement point ids (a fixed random UUID; changing it changes every id).
pub const POINT_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6b1f_2c0e_8a44_4d4b_9b52_3c1e_a0d7_5e21);
/// Namespace of the sentence point ids of a tenant's documents.
pub const TENANT_POINT_ID_NAMESPACE: Uuid =
    Uuid::from_u128(0x9d3e_61a2_47c0_4f18_b6e5_0c2d_8f41_a733);

pub const STRUCTURAL_CONTEXT_SOURCE: &str = "structural";

/// Where a sentence sits: section ordinal, index in the section and the section's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Position {
    pub section: u32,
    pub index: u32,
    pub count: u32,
}

/// Everything stored with a sentence's point. Character offsets count Unicode scalar values
/// in the citation text (see `extract::builder`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentenceRecord {
    pub id: Uuid,
    pub doc_id: String,
    pub tenant: Option<String>,
    /// The document revision the index holds; the same on every point of a document.
    pub revision: u64,
    pub title: String,
    pub url: Option<String>,
    /// The address of the revision the index holds (`Revision::revision_url`): stamped
    /// with `revision` on every point of the document. Written as `null` when none, so
    /// that a stamp replaces an older one. Read as none when absent.
    #[serde(default)]
    pub revision_url: Option<String>,
    /// The document's metadata (the event's), the same on every point of a document.
    /// Always written, `{}` when none: a payload update (which merges top-level keys)
    /// must replace metadata that a revision dropped. Read as `{}` when absent.
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Who may read the document (`Access`), the same on every point of a document, as
    /// two payload fields the store filters on: `public`, and `access_groups` (keyword
    /// index). Read as public when absent (points written before access existed).
    #[serde(default = "crate::document::public_default")]
    pub public: bool,
    #[serde(default)]
    pub access_groups: Vec<String>,
    pub section_id: String,
    pub section_path: Vec<String>,
    pub section_hash: String,
    pub section_char_start: usize,
    pub sentence: String,
    pub position: Position,
    pub char_start: usize,
    pub char_end: usize,
    pub window: String,
    pub window_char_start: usize,
    pub window_char_end: usize,
    /// Situating preamble embedded with the sentence (never shown as the answer).
    pub context: String,
    pub context_source: String,
    pub text_hash: String,
    /// Hash of the embedding input (`context` + sentence): equal hash, same vector.
    pub embed_hash: String,
    /// Where the sentence and its window came from, and the window's structure and links.
    #[serde(flatten)]
    pub cite: Citation,
}

/// What ties a sentence point back to its source: offsets into the content as submitted
/// and the window's links. Absent (default) in points written before they were kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Citation {
    /// Characters (Unicode scalar values) of the content as submitted that produced the
    /// sentence (half-open).
    pub source_start: Option<usize>,
    pub source_end: Option<usize>,
    /// The same for the whole window.
    pub window_source_start: Option<usize>,
    pub window_source_end: Option<usize>,
    /// The window's sentences in its section (half-open): wider than the radius when it
    /// takes in a list or table (`window::structured_window`).
    pub window_sentences: Option<[u32; 2]>,
    /// Where the sentence sits in its section's lists and tables (`line_start` in
    /// characters of the citation text).
    pub unit: Unit,
    /// Links inside the window, by characters of the citation text.
    pub links: Vec<RecordLink>,
}

/// A link of a window: its text's characters in the citation text and its target, as the
/// content wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordLink {
    pub start: usize,
    pub end: usize,
    pub url: String,
}

impl SentenceRecord {
    pub fn doc_ref(&self) -> DocRef<'_> {
        DocRef::new(self.tenant.as_deref(), &self.doc_id)
    }

    /// Who may read the sentence's document.
    pub fn access(&self) -> crate::Access {
        crate::Access {
            public: self.public,
            groups: self.access_groups.clone(),
        }
    }

    /// The exact text sent to the embedding model.
    pub fn embedding_input(&self) -> String {
        embedding_input(&self.context, &self.sentence)
    }

    /// Equal in everything but the revision stamp. Destructured so that a field added
    /// later cannot be forgotten here.
    pub fn same_payload_except_revision(&self, other: &Self) -> bool {
        let Self {
            id,
            doc_id,
            tenant,
            revision: _,
            revision_url: _,
            title,
            url,
            metadata,
            public,
            access_groups,
            section_id,
            section_path,
            section_hash,
            section_char_start,
            sentence,
            position,
            char_start,
            char_end,
            window,
            window_char_start,
            window_char_end,
            context,
            context_source,
            text_hash,
            embed_hash,
            cite,
        } = self;
        *id == other.id
            && *doc_id == other.doc_id
            && *tenant == other.tenant
            && *title == other.title
            && *url == other.url
            && *metadata == other.metadata
            && *public == other.public
            && *access_groups == other.access_groups
            && *section_id == other.section_id
            && *section_path == other.section_path
            && *section_hash == other.section_hash
            && *section_char_start == other.section_char_start
            && *sentence == other.sentence
            && *position == other.position
            && *char_start == other.char_start
            && *char_end == other.char_end
            && *window == other.window
            && *window_char_start == other.window_char_start
            && *window_char_end == other.window_char_end
            && *context == other.context
            && *context_source == other.context_source
            && *text_hash == other.text_hash
            && *embed_hash == other.embed_hash
            && *cite == other.cite
    }
}

pub fn embedding_input(context: &str, sentence: &str) -> String {
    if context.is_empty() {
        sentence.to_owned()
    } else {
        format!("{context}\n{sentence}")
    }
}

/// The default situating preamble: document title and heading path (a heading equal to
/// the title is not repeated). Free and deterministic.
pub fn structural_context(title: &str, section_path: &[String]) -> String {
    let mut context = title.trim().to_owned();
    for heading in section_path {
        if heading != title {
            context.push_str(" > ");
            context.push_str(heading);
        }
    }
    context
}

/// A sentence point's id: from its document's identity (tenant and id), section, text and
/// occurrence. A tenant's documents hash in a namespace of their own, the tenant first with
/// its length, so no (tenant, id) pair can meet another's, nor a document without a tenant.
pub fn point_id(doc: DocRef<'_>, section_id: &str, text_hash: &str, occurrence: u32) -> Uuid {
    let doc_id = doc.doc_id;
    let mut key = Vec::with_capacity(doc_id.len() + section_id.len() + text_hash.len() + 32);
    if let Some(tenant) = doc.tenant {
        key.extend_from_slice(tenant.len().to_string().as_bytes());
        key.push(b':');
        key.extend_from_slice(tenant.as_bytes());
        key.push(0);
    }
    for part in [
        doc_id.as_bytes(),
        section_id.as_bytes(),
        text_hash.as_bytes(),
    ] {
        key.extend_from_slice(part);
        key.push(0);
    }
    key.extend_from_slice(occurrence.to_string().as_bytes());
    let namespace = if doc.tenant.is_some() {
        &TENANT_POINT_ID_NAMESPACE
    } else {
        &POINT_ID_NAMESPACE
    };
    Uuid::new_v5(namespace, &key)
}

/// The records that indexing `segmented` from scratch stores.
pub fn build_records(segmented: &SegmentedRevision, config: &TextConfig) -> Vec<SentenceRecord> {
    build_records_with(segmented, config, |section| {
        (
            structural_context(&segmented.title, &section.heading_path),
            STRUCTURAL_CONTEXT_SOURCE.to_owned(),
        )
    })
}

/// [`build_records`] with the enrichment context of each section from `context_of`, as
/// `(context, context_source)`.
pub fn build_records_with(
    segmented: &SegmentedRevision,
    config: &TextConfig,
    context_of: impl Fn(&Section) -> (String, String),
) -> Vec<SentenceRecord> {
    let chars = CharOffsets::new(&segmented.text);
    let mut records = Vec::with_capacity(segmented.sentence_count());
    for section in &segmented.sections {
        let (context, context_source) = context_of(section);
        let count = section.sentences.len() as u32;
        let mut occurrences: HashMap<&str, u32> = HashMap::new();
        for (index, range) in section.sentences.iter().enumerate() {
            let sentence = &segmented.text[range.clone()];
            let occurrence = occurrences.entry(sentence).or_insert(0);
            let text_hash = hash_hex(sentence.as_bytes());
            let window_sentences = structured_window(
                &segmented.text,
                &section.sentences,
                &section.units,
                index,
                config.window_radius,
                config.window_max_tokens,
            );
            let unit_at = |i: usize| section.units.get(i).copied().unwrap_or_default();
            let window_start = unit_at(window_sentences.start)
                .line_start
                .unwrap_or(section.sentences[window_sentences.start].start);
            let window = window_start..section.sentences[window_sentences.end - 1].end;
            let sources: Vec<&Range<usize>> = section
                .sources
                .get(window_sentences.clone())
                .unwrap_or_default()
                .iter()
                .flatten()
                .collect();
            let source = section.sources.get(index).cloned().flatten();
            let mut unit = unit_at(index);
            unit.line_start = unit.line_start.map(|b| chars.of(b));
            let mut embed = Hasher128::new();
            embed.field(context.as_bytes());
            embed.field(sentence.as_bytes());
            records.push(SentenceRecord {
                id: point_id(
                    DocRef::new(segmented.tenant.as_deref(), &segmented.doc_id),
                    &section.id,
                    &text_hash,
                    *occurrence,
                ),
                doc_id: segmented.doc_id.clone(),
                tenant: segmented.tenant.clone(),
                revision: segmented.revision,
                title: segmented.title.clone(),
                url: segmented.url.clone(),
                revision_url: segmented.revision_url.clone(),
                metadata: segmented.metadata.clone(),
                public: segmented.access.public,
                access_groups: segmented.access.groups.clone(),
                section_id: section.id.clone(),
                section_path: section.heading_path.clone(),
                section_hash: section.content_hash.clone(),
                section_char_start: chars.of(section.range.start),
                sentence: sentence.to_owned(),
                position: Position {
                    section: section.ordinal,
                    index: index as u32,
                    count,
                },
                char_start: chars.of(range.start),
                char_end: chars.of(range.end),
                window: segmented.text[window.clone()].to_owned(),
                window_char_start: chars.of(window.start),
                window_char_end: chars.of(window.end),
                context: context.clone(),
                context_source: context_source.clone(),
                text_hash,
                embed_hash: embed.hex(),
                cite: Citation {
                    source_start: source.as_ref().map(|r| r.start),
                    source_end: source.as_ref().map(|r| r.end),
                    window_source_start: sources.iter().map(|r| r.start).min(),
                    window_source_end: sources.iter().map(|r| r.end).max(),
                    window_sentences: (!section.units.is_empty())
                        .then_some([window_sentences.start as u32, window_sentences.end as u32]),
                    unit,
                    links: segmented
                        .links
                        .iter()
                        .filter(|l| window.start <= l.range.start && l.range.end <= window.end)
                        .map(|l| RecordLink {
                            start: chars.of(l.range.start),
                            end: chars.of(l.range.end),
                            url: l.url.clone(),
                        })
                        .collect(),
                },
            });
            *occurrence += 1;
        }
    }
    records
}

/// Byte offset → character offset, without a scan per lookup.
#[derive(Debug)]
pub struct CharOffsets {
    /// `None` for ASCII text, where both are equal.
    prefix: Option<Vec<u32>>,
}

impl CharOffsets {
    pub fn new(text: &str) -> Self {
        if text.is_ascii() {
            return Self { prefix: None };
        }
        let mut prefix = vec![0u32; text.len() + 1];
        let mut chars = 0u32;
        for (offset, c) in text.char_indices() {
            prefix[offset..offset + c.len_utf8()].fill(chars);
            chars += 1;
        }
        prefix[text.len()] = chars;
        Self {
            prefix: Some(prefix),
        }
    }

    pub fn of(&self, byte: usize) -> usize {
        self.prefix.as_ref().map_or(byte, |p| p[byte] as usize)
    }
}
