//! Property tests of the text core: a random document goes through random edit sequences
//! (sentences inserted, deleted, modified and duplicated; sections added, removed and
//! renamed; paragraphs moved) and every invariant of DESIGN.md that the core owns is checked.

use crate::common;

use casement_text::{
    Format, MemoryIndex, Revision, TextConfig, build_records, plan_upsert, segment,
};
use common::{assert_same_document, rebuild};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Paragraph {
    list: bool,
    sentences: Vec<String>,
}

#[derive(Debug, Clone)]
struct Section {
    heading: Option<(u8, String)>,
    paragraphs: Vec<Paragraph>,
}

#[derive(Debug, Clone)]
struct Doc {
    title: String,
    sections: Vec<Section>,
}

impl Doc {
    fn markdown(&self) -> String {
        let mut out = format!("---\ntitle: {}\n---\n\n", self.title);
        for section in &self.sections {
            if let Some((level, heading)) = &section.heading {
                out.push_str(&format!("{} {heading}\n\n", "#".repeat(*level as usize)));
            }
            for paragraph in &section.paragraphs {
                if paragraph.list {
                    for s in &paragraph.sentences {
                        out.push_str(&format!("- {s}\n"));
                    }
                    out.push('\n');
                } else {
                    out.push_str(&paragraph.sentences.join(" "));
                    out.push_str("\n\n");
                }
            }
        }
        out
    }

    fn revision(&self, number: u64) -> Revision {
        Revision {
            access: None,
            metadata: Default::default(),
            doc_id: "prop-doc".into(),
            revision: number,
            title: None,
            url: Some(format!("https://example.org/r{}", number % 3)),
            tenant: Some("acme".into()),
            format: Format::Markdown,
            content: self.markdown(),
            revision_url: None,
        }
    }

    fn paragraph_mut(&mut self, section: usize, paragraph: usize) -> Option<&mut Paragraph> {
        let count = self.sections.len();
        let section = self.sections.get_mut(section % count.max(1))?;
        let count = section.paragraphs.len();
        section.paragraphs.get_mut(paragraph % count.max(1))
    }
}

#[derive(Debug, Clone)]
enum Edit {
    InsertSentence(usize, usize, usize, String),
    DeleteSentence(usize, usize, usize),
    ModifySentence(usize, usize, usize, String),
    DuplicateSentence(usize, usize, usize),
    AddSection(usize, (u8, String), Vec<Paragraph>),
    RemoveSection(usize),
    RenameSection(usize, String),
    MoveParagraph(usize, usize, usize),
    Retitle(String),
}

impl Edit {
    fn apply(&self, doc: &mut Doc) {
        match self {
            Self::InsertSentence(s, p, i, text) => {
                if let Some(par) = doc.paragraph_mut(*s, *p) {
                    let at = i % (par.sentences.len() + 1);
                    par.sentences.insert(at, text.clone());
                }
            }
            Self::DeleteSentence(s, p, i) => {
                if let Some(par) = doc.paragraph_mut(*s, *p)
                    && par.sentences.len() > 1
                {
                    let at = i % par.sentences.len();
                    par.sentences.remove(at);
                }
            }
            Self::ModifySentence(s, p, i, text) => {
                if let Some(par) = doc.paragraph_mut(*s, *p) {
                    let at = i % par.sentences.len();
                    par.sentences[at] = text.clone();
                }
            }
            Self::DuplicateSentence(s, p, i) => {
                if let Some(par) = doc.paragraph_mut(*s, *p) {
                    let at = i % par.sentences.len();
                    let copy = par.sentences[at].clone();
                    par.sentences.insert(at, copy);
                }
            }
            Self::AddSection(at, heading, paragraphs) => {
                let at = at % (doc.sections.len() + 1);
                doc.sections.insert(
                    at.max(1).min(doc.sections.len()),
                    Section {
                        heading: Some(heading.clone()),
                        paragraphs: paragraphs.clone(),
                    },
                );
            }
            Self::RemoveSection(at) => {
                if doc.sections.len() > 1 {
                    let at = 1 + at % (doc.sections.len() - 1);
                    doc.sections.remove(at);
                }
            }
            Self::RenameSection(at, name) => {
                let count = doc.sections.len();
                if let Some((_, heading)) = &mut doc.sections[at % count].heading {
                    *heading = name.clone();
                }
            }
            Self::MoveParagraph(from, to, position) => {
                let count = doc.sections.len();
                let source = &mut doc.sections[from % count];
                if source.paragraphs.len() > 1 {
                    let paragraph = source.paragraphs.remove(position % source.paragraphs.len());
                    let target = &mut doc.sections[to % count];
                    let at = position % (target.paragraphs.len() + 1);
                    target.paragraphs.insert(at, paragraph);
                }
            }
            Self::Retitle(title) => doc.title = title.clone(),
        }
    }
}

/// A small pool makes identical sentences (and identical headings) common.
const POOL: &[&str] = &[
    "Refunds take five business days.",
    "Contact support at help@example.org for access.",
    "Dr. Lee approves travel over $500.",
    "The API rate limit is 3.5 requests per second.",
    "Version v2.1.0 removed the legacy endpoint.",
    "Not all plans include this feature!",
    "Is the office open on Fridays?",
    "See https://example.org/docs/setup.html for details.",
    "Credits carry over.",
    "Credits carry over.",
    "Ask your manager first.",
    "Über die Zeit ändert sich das Verfahren.",
];

fn sentence() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(POOL).prop_map(str::to_owned),
        2 => "[A-Z][a-z]{2,8}( [a-z]{1,9}){2,9}[.!?]",
    ]
}

fn paragraph() -> impl Strategy<Value = Paragraph> {
    (
        prop::bool::weighted(0.25),
        prop::collection::vec(sentence(), 1..6),
    )
        .prop_map(|(list, sentences)| Paragraph { list, sentences })
}

fn heading() -> impl Strategy<Value = (u8, String)> {
    (
        2u8..4,
        prop::sample::select(&["Overview", "Billing", "Setup", "FAQ", "Limits"][..]),
    )
        .prop_map(|(level, h)| (level, h.to_owned()))
}

fn doc() -> impl Strategy<Value = Doc> {
    (
        prop::collection::vec(paragraph(), 0..3),
        prop::collection::vec((heading(), prop::collection::vec(paragraph(), 1..4)), 0..5),
    )
        .prop_map(|(preamble, sections)| {
            let mut all = vec![Section {
                heading: None,
                paragraphs: preamble,
            }];
            all.extend(sections.into_iter().map(|(h, paragraphs)| Section {
                heading: Some(h),
                paragraphs,
            }));
            Doc {
                title: "Support handbook".into(),
                sections: all,
            }
        })
}

fn edit() -> impl Strategy<Value = Edit> {
    let i = || 0usize..64;
    prop_oneof![
        4 => (i(), i(), i(), sentence()).prop_map(|(s, p, n, t)| Edit::InsertSentence(s, p, n, t)),
        3 => (i(), i(), i()).prop_map(|(s, p, n)| Edit::DeleteSentence(s, p, n)),
        4 => (i(), i(), i(), sentence()).prop_map(|(s, p, n, t)| Edit::ModifySentence(s, p, n, t)),
        2 => (i(), i(), i()).prop_map(|(s, p, n)| Edit::DuplicateSentence(s, p, n)),
        2 => (i(), heading(), prop::collection::vec(paragraph(), 1..3))
            .prop_map(|(a, h, p)| Edit::AddSection(a, h, p)),
        1 => i().prop_map(Edit::RemoveSection),
        1 => (i(), prop::sample::select(&["Pricing", "Overview", "Access"][..]))
            .prop_map(|(a, n)| Edit::RenameSection(a, n.to_owned())),
        2 => (i(), i(), i()).prop_map(|(f, t, p)| Edit::MoveParagraph(f, t, p)),
        1 => prop::sample::select(&["Support handbook", "Customer handbook"][..])
            .prop_map(|t| Edit::Retitle(t.to_owned())),
    ]
}

fn config(radius: usize) -> TextConfig {
    TextConfig {
        window_radius: radius,
        ..TextConfig::default()
    }
}

fn plan_on(
    index: &MemoryIndex,
    revision: &Revision,
    config: &TextConfig,
) -> casement_text::ChangePlan {
    plan_upsert(&index.records(&revision.doc_id), revision, config)
        .expect("plans")
        .0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Plans applied one by one give exactly what indexing the last revision gives; also
    /// when each plan is applied twice, and when a write is cut off after `cut` operations
    /// and the same revision is planned and applied again.
    #[test]
    fn incremental_equals_rebuild(
        start in doc(),
        edits in prop::collection::vec(prop::collection::vec(edit(), 1..4), 1..10),
        cuts in prop::collection::vec(0usize..40, 10),
        radius in 0usize..4,
    ) {
        let config = config(radius);
        let mut doc = start;
        let mut index = MemoryIndex::new();
        let mut revisions = vec![doc.clone()];
        for batch in &edits {
            for e in batch {
                e.apply(&mut doc);
            }
            revisions.push(doc.clone());
        }
        for (number, version) in revisions.iter().enumerate() {
            let revision = version.revision(number as u64 + 1);
            let what = format!("revision {}", number + 1);
            match number % 3 {
                // Plain apply.
                0 => index.apply(&plan_on(&index, &revision, &config)),
                // Applied twice (a redelivered write).
                1 => {
                    let plan = plan_on(&index, &revision, &config);
                    index.apply(&plan);
                    index.apply(&plan);
                }
                // Cut off, then the same revision planned again against what was written.
                _ => {
                    let plan = plan_on(&index, &revision, &config);
                    index.apply_first(&plan, cuts[number % cuts.len()]);
                    index.apply(&plan_on(&index, &revision, &config));
                }
            }
            let expected = rebuild(&revision, &config);
            assert_same_document(&index, &expected, "prop-doc", &what);
        }
    }

    /// Diffing a revision against its own indexed records plans nothing.
    #[test]
    fn diff_against_itself_is_empty(d in doc(), radius in 0usize..4) {
        let config = config(radius);
        let revision = d.revision(1);
        let index = rebuild(&revision, &config);
        let plan = plan_on(&index, &revision, &config);
        prop_assert!(plan.is_noop());
        prop_assert_eq!(plan.unchanged, index.point_count());
        prop_assert_eq!(plan.reused_sections, plan.document.section_count);
    }

    /// A sentence whose text and context are unchanged is never embedded again, whatever
    /// else changed around it.
    #[test]
    fn unchanged_embedding_inputs_are_not_embedded(d in doc(), e in edit()) {
        let config = TextConfig::default();
        let before = d.revision(1);
        let index = rebuild(&before, &config);
        let mut after_doc = d.clone();
        e.apply(&mut after_doc);
        let plan = plan_on(&index, &after_doc.revision(2), &config);
        let old: std::collections::HashMap<_, _> =
            index.records("prop-doc").into_iter().map(|r| (r.id, r.embed_hash)).collect();
        for record in &plan.embed {
            prop_assert_ne!(old.get(&record.id), Some(&record.embed_hash));
        }
    }

    /// Segmenting plain text loses no word, and sentences are exact slices of the text.
    #[test]
    fn segmenting_loses_no_text(paragraphs in prop::collection::vec(
        prop::collection::vec("[A-Za-z0-9,;:'()\u{e9}\u{4e2d}-]{1,12}[.!?]?", 1..40), 1..6))
    {
        let content: String = paragraphs.iter().map(|p| p.join(" ")).collect::<Vec<_>>().join("\n\n");
        let revision = Revision {
            access: None,
            metadata: Default::default(),
            doc_id: "t".into(), revision: 1, title: None, url: None, tenant: None,
            format: Format::Text, content: content.clone(),
            revision_url: None,
        };
        let segmented = segment(&revision, &TextConfig::default()).expect("segments");
        let words: Vec<&str> = content.split_whitespace().collect();
        let mut joined = Vec::new();
        for section in &segmented.sections {
            for range in &section.sentences {
                let sentence = &segmented.text[range.clone()];
                prop_assert_eq!(sentence, sentence.trim());
                joined.extend(sentence.split_whitespace());
            }
        }
        prop_assert_eq!(joined, words);
        let records = build_records(&segmented, &TextConfig::default());
        for record in &records {
            prop_assert!(record.window.contains(&record.sentence));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary input, markup characters included, never panics in any format: it yields
    /// sentences that are trimmed slices of the citation text on char boundaries, windows
    /// that contain their sentence, or an error value.
    #[test]
    fn any_input_in_any_format_segments_without_panic(
        content in "([a-zA-Z .!?\\n#*|=\\[\\]{}<>/'\"`~:-]|<p>|</p>|<li>|\\[\\[|\\]\\]|\\{\\{|\\}\\}|\\{\\||\\|\\}|```|\u{e9}|\u{4e2d}){0,300}",
        format in prop::sample::select(&[Format::Markdown, Format::Html, Format::Text, Format::Wikitext][..]),
    ) {
        let revision = Revision {
            access: None,
            metadata: Default::default(),
            doc_id: "fuzz".into(), revision: 1, title: None, url: None, tenant: None,
            format, content,
            revision_url: None,
        };
        if let Ok(segmented) = segment(&revision, &TextConfig::default()) {
            for section in &segmented.sections {
                for range in &section.sentences {
                    prop_assert!(segmented.text.is_char_boundary(range.start));
                    prop_assert!(segmented.text.is_char_boundary(range.end));
                    let sentence = &segmented.text[range.clone()];
                    prop_assert!(!sentence.is_empty() && sentence == sentence.trim());
                    prop_assert!(section.range.start <= range.start && range.end <= section.range.end);
                }
            }
            for record in build_records(&segmented, &TextConfig::default()) {
                prop_assert!(record.window.contains(&record.sentence));
            }
        }
    }
}
