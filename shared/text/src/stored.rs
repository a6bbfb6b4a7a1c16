//! A document's segmentation rebuilt from its stored records, without its source: what a
//! model migration re-plans under a new configuration (another model, enrichment or window
//! radius), so that no call to the CMS is needed.
//!
//! Every record keeps its section (id, ordinal, heading path, content hash, start), its
//! sentence with its offsets, and its window. The citation text is put back at the same
//! character offsets from the sentences and windows; what no record holds (headings, the
//! text between sections) becomes spaces, which no record reads. The text *between* the
//! sentences of a section is held by the windows only when they have a radius of at least
//! one, so widening windows needs it and says when it is missing.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::document::DocumentState;
use crate::extract::Link;
use crate::records::SentenceRecord;
use crate::segmenter::{Section, SegmentedRevision, Unit};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoredError {
    /// A section's records do not cover its sentences `0..count`, or the document has
    /// fewer than its state counts (a write cut off, or one in flight).
    #[error(
        "document `{doc_id}`: section {section} holds {found} of its {count} sentences (a write was cut off or is under way; the next event of the document repairs it)"
    )]
    Incomplete {
        doc_id: String,
        section: u32,
        found: usize,
        count: u32,
    },
    /// The text between two sentences is in no stored window (windows of radius 0).
    #[error(
        "document `{doc_id}`: the text between the sentences of section {section} is not stored (its windows have radius 0), so windows of another radius cannot be built from the index"
    )]
    Gap { doc_id: String, section: u32 },
}

/// The citation text of a document, put back from its records at the same character
/// offsets: every sentence and window where it was, each section's heading before its
/// content; text no record holds reads as spaces of its length.
pub fn citation_text(records: &[SentenceRecord]) -> String {
    let length = records
        .iter()
        .map(|r| r.window_char_end.max(r.char_end))
        .max()
        .unwrap_or(0);
    let mut chars: Vec<Option<char>> = vec![None; length];
    let mut put = |start: usize, text: &str| {
        for (slot, c) in chars.iter_mut().skip(start).zip(text.chars()) {
            *slot = Some(c);
        }
    };
    let mut headed = std::collections::HashSet::new();
    for record in records {
        put(record.window_char_start, &record.window);
        put(record.char_start, &record.sentence);
        // The heading ends one blank line before the section's first line.
        if record.position.index == 0
            && headed.insert(record.position.section)
            && let Some(heading) = record.section_path.last()
        {
            let line = record
                .cite
                .unit
                .line_start
                .unwrap_or(record.section_char_start);
            let width = heading.chars().count() + 2;
            if let Some(start) = line.checked_sub(width) {
                put(start, heading);
            }
        }
    }
    chars.iter().map(|c| c.unwrap_or(' ')).collect()
}

/// The segmentation the records of `state`'s document were built from. `need_gaps`: the
/// text between sentences must be known (windows wider than one sentence will be built).
pub fn segmented_from_records(
    state: &DocumentState,
    records: &[SentenceRecord],
    need_gaps: bool,
) -> Result<SegmentedRevision, StoredError> {
    if records.len() != state.sentence_count {
        // A whole section's points missing (or extra ones): not the revision the state names.
        return Err(StoredError::Incomplete {
            doc_id: state.doc_id.clone(),
            section: u32::MAX,
            found: records.len(),
            count: u32::try_from(state.sentence_count).unwrap_or(u32::MAX),
        });
    }
    let mut sections: BTreeMap<u32, Vec<&SentenceRecord>> = BTreeMap::new();
    for record in records {
        sections
            .entry(record.position.section)
            .or_default()
            .push(record);
    }
    let length = records
        .iter()
        .map(|r| r.window_char_end.max(r.char_end))
        .max()
        .unwrap_or(0);
    let mut chars: Vec<Option<char>> = vec![None; length];
    let mut put = |start: usize, text: &str| {
        for (slot, c) in chars.iter_mut().skip(start).zip(text.chars()) {
            *slot = Some(c);
        }
    };
    for record in records {
        put(record.window_char_start, &record.window);
        put(record.char_start, &record.sentence);
    }
    let text: String = chars.iter().map(|c| c.unwrap_or(' ')).collect();
    // Character offset → byte offset in `text`.
    let mut bytes = Vec::with_capacity(length + 1);
    let mut at = 0;
    for c in text.chars() {
        bytes.push(at);
        at += c.len_utf8();
    }
    bytes.push(at);
    let byte = |char_offset: usize| bytes[char_offset.min(length)];
    let incomplete = |section: u32, found: usize, count: u32| StoredError::Incomplete {
        doc_id: state.doc_id.clone(),
        section,
        found,
        count,
    };

    let mut rebuilt = Vec::with_capacity(sections.len());
    for (ordinal, mut members) in sections {
        members.sort_by_key(|r| r.position.index);
        let first = members[0];
        let count = first.position.count;
        let complete = members.len() == count as usize
            && members
                .iter()
                .enumerate()
                .all(|(i, r)| r.position.index as usize == i && r.position.count == count);
        if !complete {
            return Err(incomplete(ordinal, members.len(), count));
        }
        let last = members[members.len() - 1];
        if need_gaps
            && chars[first.char_start..last.char_end]
                .iter()
                .any(Option::is_none)
        {
            return Err(StoredError::Gap {
                doc_id: state.doc_id.clone(),
                section: ordinal,
            });
        }
        let sentences: Vec<Range<usize>> = members
            .iter()
            .map(|r| byte(r.char_start)..byte(r.char_end))
            .collect();
        // Structure is known when the records were written with it.
        let units = if members.iter().all(|r| r.cite.window_sentences.is_some()) {
            members
                .iter()
                .map(|r| Unit {
                    line_start: r.cite.unit.line_start.map(byte),
                    ..r.cite.unit
                })
                .collect()
        } else {
            Vec::new()
        };
        let sources = members
            .iter()
            .map(|r| Some(r.cite.source_start?..r.cite.source_end?))
            .collect();
        rebuilt.push(Section {
            id: first.section_id.clone(),
            ordinal,
            heading_path: first.section_path.clone(),
            content_hash: first.section_hash.clone(),
            range: byte(first.section_char_start)..byte(last.char_end),
            sentences,
            units,
            sources,
        });
    }
    let mut links: Vec<Link> = records
        .iter()
        .flat_map(|r| &r.cite.links)
        .map(|l| Link {
            range: byte(l.start)..byte(l.end),
            url: l.url.clone(),
        })
        .collect();
    links.sort_by(|a, b| {
        (a.range.start, a.range.end, &a.url).cmp(&(b.range.start, b.range.end, &b.url))
    });
    links.dedup();
    let first = records.first();
    Ok(SegmentedRevision {
        links,
        doc_id: state.doc_id.clone(),
        revision: state.revision,
        title: first.map_or_else(|| state.title.clone(), |r| r.title.clone()),
        url: first.map_or_else(|| state.url.clone(), |r| r.url.clone()),
        revision_url: first.map_or_else(|| state.revision_url.clone(), |r| r.revision_url.clone()),
        tenant: state.tenant.clone(),
        metadata: first.map(|r| r.metadata.clone()).unwrap_or_default(),
        access: first.map_or_else(|| state.access(), SentenceRecord::access),
        text,
        sections: rebuilt,
        reused_sections: 0,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::records::build_records;
    use crate::revision::{Format, Revision};
    use crate::{TextConfig, segment};

    const PAGE: &str = "# Travel\n\nBook early. Fares rise in June — by 20%.\n\n\
        Keep receipts. Café bills count too.\n\n## Per diem\n\nRates vary by city. \
        Ask your lead. See the GSA table.\n\n## Empty\n\n## Last\n\nOne line only.";

    fn state_and_records(radius: usize) -> (DocumentState, Vec<SentenceRecord>, TextConfig) {
        let config = TextConfig {
            window_radius: radius,
            ..TextConfig::default()
        };
        let revision = Revision {
            access: None,
            doc_id: "travel".into(),
            revision: 7,
            title: Some("Travel".into()),
            url: Some("https://example.org/travel".into()),
            tenant: Some("acme".into()),
            format: Format::Markdown,
            content: PAGE.into(),
            metadata: serde_json::Map::new(),
            revision_url: None,
        };
        let segmented = segment(&revision, &config).unwrap();
        let records = build_records(&segmented, &config);
        let state = DocumentState {
            doc_id: "travel".into(),
            revision: 7,
            deleted: false,
            title: "Travel".into(),
            url: revision.url.clone(),
            revision_url: None,
            tenant: revision.tenant.clone(),
            sentence_count: records.len(),
            section_count: segmented.sections.len(),
            public: true,
            access_groups: Vec::new(),
        };
        (state, records, config)
    }

    #[test]
    fn the_same_radius_rebuilds_the_same_records() {
        let (state, records, config) = state_and_records(2);
        let rebuilt = segmented_from_records(&state, &records, true).unwrap();
        assert_eq!(build_records(&rebuilt, &config), records);
    }

    #[test]
    fn another_radius_rebuilds_what_segmenting_the_source_builds() {
        for (from, to) in [(1, 3), (2, 0), (3, 1)] {
            let (state, records, _) = state_and_records(from);
            let (_, expected, config) = state_and_records(to);
            let rebuilt = segmented_from_records(&state, &records, to > 0).unwrap();
            assert_eq!(build_records(&rebuilt, &config), expected, "{from} -> {to}");
        }
    }

    #[test]
    fn radius_zero_cannot_be_widened_and_a_missing_sentence_is_named() {
        let (state, records, _) = state_and_records(0);
        let error = segmented_from_records(&state, &records, true).unwrap_err();
        assert!(matches!(error, StoredError::Gap { .. }), "{error}");
        assert!(segmented_from_records(&state, &records, false).is_ok());

        let (mut state, mut records, _) = state_and_records(1);
        records.remove(1);
        let error = segmented_from_records(&state, &records, true).unwrap_err();
        assert!(
            matches!(error, StoredError::Incomplete { found, .. } if found == records.len()),
            "{error}"
        );
        state.sentence_count = records.len();
        let error = segmented_from_records(&state, &records, true).unwrap_err();
        assert!(
            matches!(error, StoredError::Incomplete { section: 0, .. }),
            "{error}"
        );
        // A whole section missing: fewer points than the state counts.
        let (state, records, _) = state_and_records(1);
        let last = records.last().unwrap().position.section;
        let kept: Vec<_> = records
            .into_iter()
            .filter(|r| r.position.section != last)
            .collect();
        assert!(segmented_from_records(&state, &kept, true).is_err());
    }

    #[test]
    fn an_empty_document_rebuilds_empty() {
        let (mut state, _, config) = state_and_records(1);
        state.sentence_count = 0;
        let rebuilt = segmented_from_records(&state, &[], true).unwrap();
        assert!(rebuilt.sections.is_empty() && build_records(&rebuilt, &config).is_empty());
    }
}
