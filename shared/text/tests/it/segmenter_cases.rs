//! Sentence boundaries and structure, per format, on real-looking text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use casement_text::{CodeBlocks, Format, Revision, SegmentedRevision, TextConfig, segment};

fn revision(format: Format, content: &str) -> Revision {
    Revision {
        access: None,
        metadata: Default::default(),
        doc_id: "doc".into(),
        revision: 1,
        title: None,
        url: None,
        tenant: None,
        format,
        content: content.into(),
        revision_url: None,
    }
}

fn segmented(format: Format, content: &str) -> SegmentedRevision {
    segment(&revision(format, content), &TextConfig::default()).expect("segments")
}

/// The same prose as a paragraph of every format, to check boundaries format by format.
fn in_every_format(prose: &str) -> Vec<(Format, String)> {
    vec![
        (Format::Text, prose.to_owned()),
        (
            Format::Markdown,
            format!("---\ntitle: T\n---\n\n# Heading\n\n{prose}\n"),
        ),
        (
            Format::Html,
            format!("<html><body><h1>Heading</h1><p>{prose}</p></body></html>"),
        ),
        (Format::Wikitext, format!("== Heading ==\n{prose}\n")),
    ]
}

fn assert_boundaries(prose: &str, expected: &[&str]) {
    for (format, content) in in_every_format(prose) {
        assert_eq!(sentences(format, &content), expected, "format {format}");
    }
}

fn sentences(format: Format, content: &str) -> Vec<String> {
    let s = segmented(format, content);
    s.sections
        .iter()
        .flat_map(|sec| sec.sentences.iter().map(|r| s.text[r.clone()].to_owned()))
        .collect()
}

#[test]
fn abbreviations_do_not_end_sentences() {
    assert_boundaries(
        "Dr. Smith joined Acme Inc. in March. She moved to the U.S. office, e.g. the one in Denver. Ask her.",
        &[
            "Dr. Smith joined Acme Inc. in March.",
            "She moved to the U.S. office, e.g. the one in Denver.",
            "Ask her.",
        ],
    );
}

#[test]
fn decimals_and_versions_stay_whole() {
    assert_boundaries(
        "Upgrade to v1.2.3 before Friday. The fee rose 3.5 percent to $12.50 a seat. Then restart.",
        &[
            "Upgrade to v1.2.3 before Friday.",
            "The fee rose 3.5 percent to $12.50 a seat.",
            "Then restart.",
        ],
    );
}

#[test]
fn urls_and_email_addresses_stay_whole() {
    assert_boundaries(
        "Write to help.desk@gsa.gov for access. The form is at https://handbook.tts.gsa.gov/travel/forms.html today. Keep a copy.",
        &[
            "Write to help.desk@gsa.gov for access.",
            "The form is at https://handbook.tts.gsa.gov/travel/forms.html today.",
            "Keep a copy.",
        ],
    );
}

#[test]
fn ellipses_quotes_and_brackets() {
    assert_boundaries(
        "He paused... then left. She said, \"We ship on Monday.\" The team agreed. (Budget is tight.) We proceed.",
        &[
            "He paused... then left.",
            "She said, \"We ship on Monday.\"",
            "The team agreed.",
            "(Budget is tight.)",
            "We proceed.",
        ],
    );
}

#[test]
fn markdown_front_matter_headings_lists_tables_and_code() {
    let doc = "---\ntitle: Leave policy\npermalink: /leave/\n---\n\n\
Intro line one. Intro line two.\n\n\
# Changing your plan\n\n\
## Downgrades\n\n\
You can downgrade at any time. Credits carry over.\n\n\
- First item. It has two sentences.\n\
- Second item\n\n\
| Plan | Price |\n|---|---|\n| Basic | $5. Billed monthly. |\n\n\
```sh\nmake run. # not a sentence end\necho done\n```\n\n\
See [the docs](https://example.org/docs) and **bold** text.\n";
    let s = segmented(Format::Markdown, doc);
    assert_eq!(s.title, "Leave policy");
    let paths: Vec<Vec<String>> = s.sections.iter().map(|x| x.heading_path.clone()).collect();
    assert_eq!(
        paths,
        [
            vec![],
            vec!["Changing your plan".to_owned()],
            vec!["Changing your plan".to_owned(), "Downgrades".to_owned()],
        ]
    );
    let texts: Vec<Vec<&str>> = s
        .sections
        .iter()
        .map(|sec| sec.sentences.iter().map(|r| &s.text[r.clone()]).collect())
        .collect();
    assert_eq!(texts[0], ["Intro line one.", "Intro line two."]);
    assert!(texts[1].is_empty());
    assert_eq!(
        texts[2],
        [
            "You can downgrade at any time.",
            "Credits carry over.",
            "First item.",
            "It has two sentences.",
            "Second item",
            "Plan | Price",
            "Basic | $5. Billed monthly.",
            "make run. # not a sentence end\necho done",
            "See the docs and bold text.",
        ]
    );
    assert!(!s.text.contains("permalink"), "front matter is not text");
}

#[test]
fn code_blocks_can_be_skipped() {
    let config = TextConfig {
        code_blocks: CodeBlocks::Skip,
        ..TextConfig::default()
    };
    let s = segment(
        &revision(
            Format::Markdown,
            "Run this:\n\n```\nmake test\n```\n\nDone.",
        ),
        &config,
    )
    .expect("segments");
    let got: Vec<&str> = s.sections[0]
        .sentences
        .iter()
        .map(|r| &s.text[r.clone()])
        .collect();
    assert_eq!(got, ["Run this:", "Done."]);
    assert!(
        s.text.contains("make test"),
        "skipped code stays in the citation text"
    );
}

#[test]
fn html_headings_lists_tables_and_broken_markup() {
    let html = "<html><head><title>Travel</title><style>p{}</style></head><body>\
<h1>Travel</h1><p>Book with the U.S. travel office. Use the card.</p>\
<h2>Per diem</h2><ul><li>Meals are covered.</li><li>Hotels too</li></ul>\
<table><tr><th>City</th><th>Rate</th></tr><tr><td>Denver</td><td>$150</td></tr></table>\
<p>Unclosed <b>bold text. Still text.<script>alert(1)</script></body></html>";
    let s = segmented(Format::Html, html);
    assert_eq!(s.title, "Travel");
    assert_eq!(s.sections.len(), 2);
    assert_eq!(s.sections[1].heading_path, ["Travel", "Per diem"]);
    let got: Vec<&str> = s.sections[1]
        .sentences
        .iter()
        .map(|r| &s.text[r.clone()])
        .collect();
    assert_eq!(
        got,
        [
            "Meals are covered.",
            "Hotels too",
            "City | Rate",
            "Denver | $150",
            "Unclosed bold text.",
            "Still text."
        ]
    );
    assert!(!s.text.contains("alert"));
}

#[test]
fn wikitext_headings_links_templates_lists_and_tables() {
    let wiki = "'''Paris''' is the capital of [[France]].<ref>Some citation.</ref> \
It has 2.1 million residents, per the {{nowrap|2020 census}}.\n\n\
== History ==\nFounded by the [[Parisii|Gallic Parisii]] in the 3rd c. BC. See [https://example.org the site].\n\n\
=== Middle Ages ===\n* Capetian kings ruled.\n* The city grew.\n\n\
{| class=\"wikitable\"\n|-\n! Year !! Population\n|-\n| 1800 || 550,000\n|}\n\n\
{{Infobox city|name=Paris}}[[Category:Capitals]]";
    let s = segmented(Format::Wikitext, wiki);
    let paths: Vec<Vec<String>> = s.sections.iter().map(|x| x.heading_path.clone()).collect();
    assert_eq!(
        paths,
        [
            vec![],
            vec!["History".to_owned()],
            vec!["History".to_owned(), "Middle Ages".to_owned()]
        ]
    );
    let all = sentences(Format::Wikitext, wiki);
    assert_eq!(
        all,
        [
            "Paris is the capital of France.",
            "It has 2.1 million residents, per the 2020 census.",
            "Founded by the Gallic Parisii in the 3rd c. BC.",
            "See the site.",
            "Capetian kings ruled.",
            "The city grew.",
            "Year | Population",
            "1800 | 550,000",
        ]
    );
    assert!(!s.text.contains("Infobox") && !s.text.contains("Category"));
}

#[test]
fn long_sentences_are_capped_and_empty_documents_have_none() {
    let config = TextConfig {
        max_sentence_tokens: 20,
        ..TextConfig::default()
    };
    let long = format!("{} end.", vec!["word"; 100].join(" "));
    let s = segment(&revision(Format::Text, &long), &config).expect("segments");
    let pieces: Vec<&str> = s.sections[0]
        .sentences
        .iter()
        .map(|r| &s.text[r.clone()])
        .collect();
    assert!(pieces.len() >= 5);
    assert!(
        pieces
            .iter()
            .all(|p| casement_text::estimate_tokens(p) <= 20)
    );
    assert_eq!(pieces.join(" "), long);

    for format in [
        Format::Markdown,
        Format::Html,
        Format::Text,
        Format::Wikitext,
    ] {
        assert_eq!(segmented(format, "").sentence_count(), 0, "{format}");
        assert_eq!(segmented(format, "  \n\n ").sentence_count(), 0, "{format}");
    }
}

#[test]
fn offsets_point_into_the_citation_text_for_unicode() {
    let s = segmented(
        Format::Markdown,
        "# Café\n\nÉtienne a payé 3,5 €. Ça marche. 日本語のテキスト。",
    );
    for section in &s.sections {
        for r in &section.sentences {
            assert!(s.text.is_char_boundary(r.start) && s.text.is_char_boundary(r.end));
        }
    }
    let records = casement_text::build_records(&s, &TextConfig::default());
    for record in &records {
        let by_chars: String = s
            .text
            .chars()
            .skip(record.char_start)
            .take(record.char_end - record.char_start)
            .collect();
        assert_eq!(by_chars, record.sentence);
    }
}

#[test]
fn wikitext_the_parser_panics_on_still_yields_text() {
    // Found by `properties::any_input_in_any_format_segments_without_panic`: parse-wiki-text-2
    // slices inside '中' and panics on this input. The text must still come out.
    let content = "{|中<li>'/<li></p>[[<li><p><</p>\n[[[[{éé```{{中é中中é</p><p>[[{|[[</p><p>[[```<p>{||}{|中]]{{<p><p><li><li>[[k{{</p>|}'``````'é[[</p>```<p>[[</p></p>]][[</p><p>[[]]=|}</p>{{<p>}}<p>?中{{<li>{{{|{{<p><li><li><li>é]]<li>]</p>]]<p>``````<p>{{}}</p><li><p>|}]]|}```</p>{{]]中中{|<p>{{<p><li></p></p>|}{{中|}|}é</p>]]```</p><<li>{{中```}}```X<li>```{{|}{{中{{{|</p>|}</p>{{{|</p>{{[[[[|}]]中{|]]<p>o```]][[<p><li>[[][[}}```<li>{|<li>é{|{|é</p>}}{{{{}}{|{|<li>]]<p>k{|<li>é</p>{|<li>```中<li>{{{||}<é<li>{|]]{{]]{{<p>{{]]</p>{{é{{]]é}}wé]]]```é']]<li>]]}}中ééé/```</p>é<p>中```{|中{{{|oé<li>é</p><li><p>{{{|中</p>中{|{{.]]中[[}}]</p>*";
    let s = segmented(Format::Wikitext, content);
    assert!(s.sentence_count() > 0);
    // Through the stripper: text is kept, tags and link brackets are not.
    assert!(s.text.contains('中'), "{}", s.text);
    for markup in ["<li>", "</p>", "[["] {
        assert!(!s.text.contains(markup), "{markup} in {}", s.text);
    }
}

// ---- Real pages (tests/fixtures, README there says where each comes from) ----

fn fixture(path: &str) -> String {
    let at = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display()))
}

fn wikitext_page(lang: &str, title: &str) -> String {
    use std::io::Read;
    let at = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/wikitext/pages.jsonl.gz");
    let mut raw = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(at).expect("wikitext fixtures"))
        .read_to_string(&mut raw)
        .expect("gzip");
    raw.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|v| v["lang"] == lang && v["title"] == title)
        .and_then(|v| v["wikitext"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no {lang}:{title} fixture"))
}

/// The text of every block but code blocks.
fn prose(format: Format, content: &str) -> String {
    let extracted = casement_text::extract(format, content);
    extracted
        .blocks
        .iter()
        .filter(|b| b.kind != casement_text::BlockKind::Code)
        .map(|b| extracted.block_text(b))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Markup a reader should never see in a window (outside code).
fn assert_clean(text: &str, marks: &[&str]) {
    for mark in marks {
        if let Some(at) = text.find(mark) {
            let from = text[..at]
                .char_indices()
                .rev()
                .nth(80)
                .map_or(0, |(i, _)| i);
            panic!(
                "`{mark}` in the text: …{}…",
                &text[from..(at + 80).min(text.len())]
            );
        }
    }
}

fn records_of(
    format: Format,
    content: &str,
    url: Option<&str>,
) -> (SegmentedRevision, Vec<casement_text::SentenceRecord>) {
    let mut rev = revision(format, content);
    rev.url = url.map(str::to_owned);
    let config = TextConfig::default();
    let s = segment(&rev, &config).expect("segments");
    let records = casement_text::build_records(&s, &config);
    (s, records)
}

/// The 18F Handbook's Liquid page: tags gone, `{% page %}` links kept as targets, the
/// checklist numbered and nested, a hit on its sixth step windowed with the sentence that
/// introduces it, and every window found again by slicing the submitted page.
#[test]
fn a_liquid_page_reads_clean_with_whole_lists_and_resolving_citations() {
    let page = fixture("markdown/18f-going-out-of-office.md");
    let (s, records) = records_of(
        Format::Markdown,
        &page,
        Some("https://handbook.tts.gsa.gov/travel-and-leave/going-out-of-office/"),
    );
    assert_clean(&s.text, &["{%", "%}", "](", "{{"]);
    assert!(
        s.text
            .contains("approved leave request in HR Links, every scheduled work day"),
        "{}",
        s.text
    );
    assert!(
        s.links
            .iter()
            .any(|l| l.url == "/tools/hrlinks/#using-leave"),
        "{:?}",
        s.links
    );
    assert!(
        s.text
            .contains("Before taking leave, be sure to:\n\n1. Submit a leave request"),
        "{}",
        s.text
    );
    assert!(
        s.text.contains("\n  1. Google Calendar has an OOO setting"),
        "{}",
        s.text
    );

    let hit = records
        .iter()
        .find(|r| {
            r.sentence
                .starts_with("Update your Slack status to indicate")
        })
        .expect("the sixth step");
    assert!(
        hit.window.contains("Before taking leave, be sure to:"),
        "{}",
        hit.window
    );
    assert!(
        hit.window.contains("6. Update your Slack status"),
        "{}",
        hit.window
    );
    assert!(
        hit.window.contains("1. Submit a leave request"),
        "{}",
        hit.window
    );

    let content: Vec<char> = page.chars().collect();
    for record in &records {
        let (start, end) = (
            record.cite.window_source_start.unwrap(),
            record.cite.window_source_end.unwrap(),
        );
        let slice: String = content[start..end].iter().collect();
        let first = record.sentence.split_whitespace().next().unwrap();
        assert!(slice.contains(first), "{first:?} not in {slice:?}");
        let (start, end) = (
            record.cite.source_start.unwrap(),
            record.cite.source_end.unwrap(),
        );
        let sentence_slice: String = content[start..end].iter().collect();
        let last = record
            .sentence
            .split_whitespace()
            .last()
            .unwrap()
            .trim_matches(|c: char| !c.is_alphanumeric());
        assert!(
            sentence_slice.contains(last),
            "{last:?} not in {sentence_slice:?} ({})",
            record.sentence
        );
    }
    // Links inside a window point at characters of the citation text.
    let with_link = records
        .iter()
        .find(|r| !r.cite.links.is_empty())
        .expect("a window with a link");
    let chars: Vec<char> = s.text.chars().collect();
    let link = &with_link.cite.links[0];
    assert!(
        !chars[link.start..link.end]
            .iter()
            .collect::<String>()
            .trim()
            .is_empty()
    );
}

#[test]
fn a_hugo_page_loses_its_shortcodes_and_keeps_relref_targets() {
    let page = fixture("markdown/hugo-image-processing.md");
    let (s, _) = records_of(Format::Markdown, &page, None);
    // Outside code: the page's code blocks show shortcodes as their content.
    assert_clean(
        &prose(Format::Markdown, &page),
        &["{{<", ">}}", "{{%", "%}}"],
    );
    assert!(
        s.links
            .iter()
            .any(|l| l.url.contains(".md") || l.url.contains('/')),
        "{:?}",
        s.links
    );
}

#[test]
fn an_mdx_page_loses_imports_and_comments() {
    let page = fixture("markdown/mdx-installation.mdx");
    assert_clean(
        &prose(Format::Markdown, &page),
        &["import ", "{/*", "<UpgradeGuide"],
    );
}

#[test]
fn an_html_page_keeps_its_main_content_without_navigation_or_footer() {
    let page = fixture("html/mozilla-firefox-customize.html");
    let (s, records) = records_of(
        Format::Html,
        &page,
        Some("https://www.mozilla.org/en-US/firefox/customize/"),
    );
    assert!(
        s.text.contains("easier than ever to personalize Firefox"),
        "{}",
        s.text
    );
    for furniture in [
        "Partner with Us",
        "Firefox Affiliates",
        "Contribute to this site",
    ] {
        assert!(!s.text.contains(furniture), "{furniture} in {}", s.text);
    }
    assert_clean(&s.text, &["<div", "<a ", "</"]);
    assert!(records.iter().all(|r| r.cite.window_source_start.is_some()));
}

/// The largest German page: localized files (`[[Datei:…|mini|…]]`) and categories
/// (`[[Kategorie:…]]`), references and tables never reach the text.
#[test]
fn a_large_german_wikitext_page_reads_clean() {
    let page = wikitext_page("de", "Berlin");
    assert!(page.len() > 200_000 && page.contains("[[Datei:") && page.contains("<ref"));
    let (s, records) = records_of(
        Format::Wikitext,
        &page,
        Some("https://de.wikipedia.org/wiki/Berlin"),
    );
    assert!(records.len() > 500, "{} sentences", records.len());
    assert_clean(
        &s.text,
        &[
            "[[",
            "]]",
            "{{",
            "}}",
            "{|",
            "|-",
            "<ref",
            "mini|",
            "|mini",
            "Datei:",
            "Kategorie:",
            "'''",
        ],
    );
    assert!(
        s.text
            .contains("Berlin () ist Hauptstadt und als Land eine parlamentarische Republik"),
        "{}",
        &s.text[..2000]
    );
}

/// An English page through the markup stripper (what a page the parser cannot finish
/// becomes) is as clean as through the parser.
#[test]
fn the_stripper_path_reads_a_real_page_clean() {
    let page = wikitext_page("en", "United Kingdom");
    let stripped = casement_text::extract::strip_wikitext(&page);
    assert_clean(
        &stripped.text,
        &[
            "[[",
            "]]",
            "{{",
            "}}",
            "{|",
            "|-",
            "<ref",
            "thumb|",
            "File:",
            "Category:",
            "'''",
        ],
    );
    assert!(stripped.text.contains("United Kingdom"));
}
