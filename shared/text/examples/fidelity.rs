//! What a bot reads, measured on real pages (`make eval` runs it; needs ../shared/data for
//! the 18F Handbook, and reads the wikitext and HTML fixtures under tests/fixtures):
//! - markup share: windows whose text (outside code blocks and code spans) holds markup: template tags,
//!   `](`, `[[`, `]]`, `{{`, `{|`, `|-`, HTML tags, `'''`, image parameters;
//! - lead-in share: hits on a list item or table row whose window lacks the paragraph that
//!   introduces the list, among those where the lead-in and the hit fit in the window cap;
//! - citations: windows whose `window_source_start..window_source_end`, sliced out of the
//!   submitted content, hold every word of the window.
//!
//! `cargo run --release -p casement-text --example fidelity [-- --show N]` prints a table
//! (and up to N offending windows per corpus).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::io::Read;

use casement_text::{Format, Revision, TextConfig, build_records, segment};

struct Page {
    id: String,
    format: Format,
    content: String,
}

fn handbook() -> Vec<Page> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/revisions/18f-handbook/all.jsonl.gz");
    let Ok(file) = std::fs::File::open(&path) else {
        eprintln!("skipping the handbook: {} not found", path.display());
        return Vec::new();
    };
    let mut raw = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut raw)
        .expect("reading the handbook");
    let mut last = std::collections::BTreeMap::new();
    for line in raw.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        last.insert(v["doc_id"].as_str().unwrap_or_default().to_owned(), v);
    }
    last.into_iter()
        .filter(|(_, v)| v["change"] != "delete" && !v["content"].as_str().unwrap_or("").is_empty())
        .map(|(id, v)| Page {
            id,
            format: Format::Markdown,
            content: v["content"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

fn fixtures() -> (Vec<Page>, Vec<Page>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut raw = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(dir.join("wikitext/pages.jsonl.gz")).expect("wikitext fixtures"),
    )
    .read_to_string(&mut raw)
    .expect("reading wikitext");
    let wiki = raw
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            Page {
                id: format!(
                    "{}:{}",
                    v["lang"].as_str().unwrap_or(""),
                    v["title"].as_str().unwrap_or("")
                ),
                format: Format::Wikitext,
                content: v["wikitext"].as_str().unwrap_or_default().to_owned(),
            }
        })
        .collect();
    let mut other = Vec::new();
    for (sub, format) in [("html", Format::Html), ("markdown", Format::Markdown)] {
        let mut entries: Vec<_> = std::fs::read_dir(dir.join(sub))
            .expect("fixtures")
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !name.contains(".expected")
                    && (name.ends_with(".html") || name.ends_with(".md") || name.ends_with(".mdx"))
            })
            .collect();
        entries.sort();
        for path in entries {
            other.push(Page {
                id: path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("")
                    .to_owned(),
                format,
                content: std::fs::read_to_string(&path).expect("fixture"),
            });
        }
    }
    (wiki, other)
}

fn markup(text: &str) -> Option<&'static str> {
    const MARKS: &[&str] = &[
        "{%", "%}", "{{", "}}", "](", "[[", "]]", "{|", "|-", "|}", "'''", "<ref", "</", "/>",
        "thumb|", "mini|", "|thumb", "|mini", "upright=", "|upright", "hochkant", "|links|",
        "|rechts|", "<br", "<div", "<span", "<p>", "<li", "<sup", "<small",
    ];
    if let Some(mark) = MARKS.iter().find(|m| text.contains(**m)) {
        return Some(mark);
    }
    // `NNNpx` image sizes.
    text.split(['|', ' '])
        .any(|w| {
            w.len() > 2 && w.ends_with("px") && w[..w.len() - 2].chars().all(|c| c.is_ascii_digit())
        })
        .then_some("NNNpx")
}

/// `text` without `<…>` tags (a slice of HTML or wikitext); autolinks (`<https://…>`,
/// `<name@host>`) are text.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.find('>') {
            Some(end)
                if after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/' || c == '!')
                    && !after[..end].contains("://")
                    && !after[..end].contains('@')
                    && !after[..end].starts_with("mailto:") =>
            {
                rest = &after[end + 1..];
            }
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` without markdown link targets (`[text](target)` reads `[text]`), whose words
/// are not the window's: `[page]({% page "/software/" %})for` shows "pagefor".
fn strip_link_targets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..=at]);
        let after = &rest[at + 2..];
        // The target ends at the first `)` outside a template tag.
        let mut depth = 0usize;
        let end = after.char_indices().find_map(|(i, c)| match c {
            '{' => {
                depth += 1;
                None
            }
            '}' => {
                depth = depth.saturating_sub(1);
                None
            }
            ')' if depth == 0 => Some(i),
            _ => None,
        });
        match end {
            Some(end) if !after[..end].contains("\n\n") => rest = &after[end + 1..],
            _ => {
                out.push('(');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect()
}

#[derive(Default)]
struct Tally {
    pages: usize,
    windows: usize,
    with_markup: usize,
    list_hits: usize,
    lead_missing: usize,
    /// Hits on a list item whose whole list (lead-in to last item) fits in the cap, and
    /// those whose window holds it all: a "steps" answer with its lead-in and last step.
    whole_list_hits: usize,
    whole_list_kept: usize,
    resolvable: usize,
    resolved: usize,
    shown: usize,
}

fn measure(name: &str, pages: &[Page], config: &TextConfig, show: usize) -> Tally {
    let mut tally = Tally::default();
    for page in pages {
        let revision = Revision {
            access: None,
            doc_id: page.id.clone(),
            revision: 1,
            title: Some(page.id.clone()),
            url: None,
            tenant: None,
            format: page.format,
            content: page.content.clone(),
            metadata: serde_json::Map::new(),
            revision_url: None,
        };
        let Ok(segmented) = segment(&revision, config) else {
            continue;
        };
        tally.pages += 1;
        let extracted = casement_text::extract(page.format, &page.content);
        // Characters of code blocks and code spans (their text is the page's content, markup
        // or not: `{%include%}` documented in a code span is what the rendered page shows).
        let chars = casement_text::records::CharOffsets::new(&segmented.text);
        let mut code: Vec<(usize, usize)> = extracted
            .blocks
            .iter()
            .filter(|b| b.kind == casement_text::BlockKind::Code)
            .map(|b| (chars.of(b.range.start), chars.of(b.range.end)))
            .collect();
        if page.format == Format::Markdown {
            for (i, (at, source)) in extracted.sources.iter().enumerate() {
                if page
                    .content
                    .get(source.clone())
                    .is_some_and(|s| s.starts_with('`'))
                {
                    let end = extracted
                        .sources
                        .get(i + 1)
                        .map_or(extracted.text.len(), |n| n.0);
                    code.push((chars.of(*at), chars.of(end)));
                }
            }
        }
        let content: Vec<char> = page.content.chars().collect();
        let records = build_records(&segmented, config);
        let mut seen = HashSet::new();
        for record in &records {
            if !seen.insert((record.window_char_start, record.window_char_end)) {
                continue;
            }
            tally.windows += 1;
            let prose: String = record
                .window
                .chars()
                .enumerate()
                .filter(|(i, _)| {
                    let at = record.window_char_start + i;
                    !code.iter().any(|(s, e)| (*s..*e).contains(&at))
                })
                .map(|(_, c)| c)
                .collect();
            if let Some(mark) = markup(&prose) {
                tally.with_markup += 1;
                if tally.shown < show {
                    tally.shown += 1;
                    // Around the mark (its first occurrence; the start for `NNNpx`).
                    let at = prose.find(mark).unwrap_or(0);
                    let from = prose.floor_char_boundary(at.saturating_sub(150));
                    let to = prose.floor_char_boundary((at + 150).min(prose.len()));
                    println!(
                        "[{name}] {} holds `{mark}`: {:?}",
                        page.id,
                        &prose[from..to]
                    );
                }
            }
            if let (Some(s), Some(e)) = (
                record.cite.window_source_start,
                record.cite.window_source_end,
            ) {
                tally.resolvable += 1;
                let slice: String = content[s.min(content.len())..e.min(content.len())]
                    .iter()
                    .collect();
                // Every word of the window in the slice, markup between letters aside
                // (`significant<sup>1</sup>` reads `significant1`, `[[transferase]]s`
                // `transferases`); list numbers are the window's own.
                let untagged = strip_link_targets(&strip_tags(&slice));
                let letters: String = untagged
                    .chars()
                    .filter(|c| c.is_alphanumeric())
                    .flat_map(char::to_lowercase)
                    .collect();
                let raw: String = slice
                    .chars()
                    .filter(|c| c.is_alphanumeric())
                    .flat_map(char::to_lowercase)
                    .collect();
                // In the slice with its tags out, or as written (a code span showing a tag).
                let found = |w: &String| {
                    letters.contains(w.as_str())
                        || raw.contains(w.as_str())
                        || w.chars().all(|c| c.is_ascii_digit()) && w.len() <= 3
                };
                if words(&record.window).iter().all(found) {
                    tally.resolved += 1;
                } else if tally.shown < show && std::env::var("SHOW_CITATIONS").is_ok() {
                    tally.shown += 1;
                    let missing: Vec<String> = words(&record.window)
                        .into_iter()
                        .filter(|w| !found(w))
                        .collect();
                    println!(
                        "[{name}] {} window not in its source slice, missing {missing:?}: {:?} / {:?}",
                        page.id,
                        record.window.chars().take(120).collect::<String>(),
                        slice.chars().take(160).collect::<String>()
                    );
                }
            } else {
                tally.resolvable += 1;
            }
        }
        // Lead-in: each hit on a list item whose list has a lead-in that fits with it.
        for section in &segmented.sections {
            for (i, unit) in section.units.iter().enumerate() {
                let Some(group) = unit.group else { continue };
                let Some(lead) = (0..i)
                    .rev()
                    .find(|&j| section.units[j].leads == Some(group))
                else {
                    continue;
                };
                let span = &segmented.text[section.sentences[lead].start..section.sentences[i].end];
                if casement_text::estimate_tokens(span) > config.window_max_tokens {
                    continue;
                }
                tally.list_hits += 1;
                let record = records
                    .iter()
                    .find(|r| r.section_id == section.id && r.position.index as usize == i);
                let holds = record
                    .and_then(|r| r.cite.window_sentences)
                    .is_some_and(|[s, e]| (s as usize) <= lead && lead < e as usize);
                // The whole list: lead-in through last item, where that fits in the cap.
                let last = (i..section.units.len())
                    .rfind(|&j| section.units[j].group == Some(group))
                    .unwrap_or(i);
                let whole =
                    &segmented.text[section.sentences[lead].start..section.sentences[last].end];
                if casement_text::estimate_tokens(whole) <= config.window_max_tokens {
                    tally.whole_list_hits += 1;
                    if record
                        .and_then(|r| r.cite.window_sentences)
                        .is_some_and(|[s, e]| (s as usize) <= lead && last < e as usize)
                    {
                        tally.whole_list_kept += 1;
                    }
                }
                if !holds {
                    tally.lead_missing += 1;
                    if std::env::var("SHOW_LEADS").is_ok() {
                        let r = record.unwrap();
                        println!(
                            "[lead] {} hit {:?} lead {:?} window {:?}",
                            page.id,
                            &segmented.text[section.sentences[i].clone()],
                            &segmented.text[section.sentences[lead].clone()],
                            r.window.chars().take(200).collect::<String>()
                        );
                    }
                }
            }
        }
    }
    tally
}

fn percent(n: usize, d: usize) -> String {
    if d == 0 {
        "n/a".to_owned()
    } else {
        format!("{:.2}% ({n}/{d})", 100.0 * n as f64 / d as f64)
    }
}

fn main() {
    let show = std::env::args()
        .skip_while(|a| a != "--show")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let config = TextConfig::default();
    let (wiki, other) = fixtures();
    let corpora = [
        ("18F handbook (final pages)", handbook()),
        ("Wikipedia wikitext", wiki),
        ("HTML/Hugo/MDX pages", other),
    ];
    println!(
        "| corpus | pages | windows | markup share | lead-in missing | whole list (lead-in to last item) | citations resolve |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    let mut report = Vec::new();
    for (name, pages) in &corpora {
        let t = measure(name, pages, &config, show);
        let share = |n: usize, d: usize| (d > 0).then(|| n as f64 / d as f64);
        report.push(serde_json::json!({
            "corpus": name,
            "pages": t.pages,
            "windows": t.windows,
            "markup_share": share(t.with_markup, t.windows),
            "lead_in_missing_share": share(t.lead_missing, t.list_hits),
            "list_hits": t.list_hits,
            "whole_list_share": share(t.whole_list_kept, t.whole_list_hits),
            "whole_list_hits": t.whole_list_hits,
            "citations_resolve_share": share(t.resolved, t.resolvable),
        }));
        rows.push(format!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            t.pages,
            t.windows,
            percent(t.with_markup, t.windows),
            percent(t.lead_missing, t.list_hits),
            percent(t.whole_list_kept, t.whole_list_hits),
            percent(t.resolved, t.resolvable),
        ));
    }
    for row in rows {
        println!("{row}");
    }
    // `make eval` prints these again beside the retrieval figures.
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
            std::path::PathBuf::from,
        )
        .join("bench");
    std::fs::create_dir_all(&dir).expect("target/bench");
    let file = dir.join("fidelity.json");
    std::fs::write(&file, serde_json::to_string_pretty(&report).expect("json"))
        .expect("writing the fidelity report");
    println!("wrote {}", file.display());
}
