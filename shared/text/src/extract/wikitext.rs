//! MediaWiki wikitext to citation text, with parse-wiki-text-2: headings, lists and table rows
//! become blocks; links keep their label; references, comments, categories, files and most
//! templates are dropped; a few inline templates that wrap readable text keep it.

use parse_wiki_text_2::{Configuration, Node, Parameter};

use super::builder::{BlockKind, ExtractedText, TextBuilder};

/// Wikitext the parser cannot handle (it gives up after its time limit, or panics on some
/// malformed input, a bug of parse-wiki-text-2 found by our property tests and by `make
/// fuzz`) is extracted as plain text instead: the text is kept, with its markup characters.
pub fn extract(content: &str) -> ExtractedText {
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let configuration = Configuration::default();
        configuration
            .parse_with_timeout(content, parse_budget(content.len()))
            .ok()
            .map(|output| {
                let mut out = TextBuilder::new();
                render(&output.nodes, &mut out);
                out.finish(None)
            })
    }));
    match parsed {
        Ok(Some(extracted)) => extracted,
        Ok(None) | Err(_) => super::plain::extract(content),
    }
}

/// How long the parser may take on `bytes` of wikitext before the plain-text fallback:
/// 250 ms and 20 ms per KiB, at most its own default of 5 s. Real pages parse far inside it
/// (a whole Wikipedia article in tens of milliseconds); some malformed inputs make the
/// parser spin until its limit (found by `make fuzz`: 2 KiB that took the full 5 s, three
/// times per event), which the flat 5 s turned into a way to stall a lane per event.
fn parse_budget(bytes: usize) -> std::time::Duration {
    let millis = 250 + 20 * (bytes as u64 / 1024);
    std::time::Duration::from_millis(millis.min(5_000))
}

fn render(nodes: &[Node<'_>], out: &mut TextBuilder) {
    for node in nodes {
        match node {
            Node::Text { value, .. } => out.push_inline(value),
            Node::CharacterEntity { character, .. } => {
                let mut buffer = [0u8; 4];
                out.push_inline(character.encode_utf8(&mut buffer));
            }
            Node::Heading { level, nodes, .. } => {
                out.start_block(BlockKind::Heading { level: *level });
                render(nodes, out);
                out.end_block();
            }
            Node::ParagraphBreak { .. } | Node::HorizontalDivider { .. } => out.end_block(),
            Node::Link { target, text, .. } => {
                if text.is_empty() {
                    out.push_inline(target);
                } else {
                    render(text, out);
                }
            }
            Node::ExternalLink { nodes, .. } => render_external_link(nodes, out),
            Node::UnorderedList { items, .. } | Node::OrderedList { items, .. } => {
                for item in items {
                    out.start_block(BlockKind::ListItem);
                    render(&item.nodes, out);
                    out.end_block();
                }
            }
            Node::DefinitionList { items, .. } => {
                for item in items {
                    out.start_block(BlockKind::ListItem);
                    render(&item.nodes, out);
                    out.end_block();
                }
            }
            Node::Table { captions, rows, .. } => {
                out.end_block();
                for caption in captions {
                    out.start_block(BlockKind::Paragraph);
                    render(&caption.content, out);
                    out.end_block();
                }
                for row in rows {
                    out.start_block(BlockKind::TableRow);
                    for cell in &row.cells {
                        out.cell_separator();
                        render(&cell.content, out);
                    }
                    out.end_block();
                }
            }
            Node::Preformatted { nodes, .. } => {
                out.start_block(BlockKind::Code);
                render(nodes, out);
                out.end_block();
            }
            Node::Tag { name, nodes, .. } => match name.as_ref() {
                "ref" | "references" | "gallery" | "math" | "score" | "graph" | "templatedata" => {}
                "pre" | "syntaxhighlight" | "source" => {
                    out.start_block(BlockKind::Code);
                    render(nodes, out);
                    out.end_block();
                }
                _ => render(nodes, out),
            },
            Node::StartTag { name, .. } | Node::EndTag { name, .. } => {
                if matches!(name.as_ref(), "br" | "p" | "div") {
                    out.push_space();
                }
            }
            Node::Template {
                name, parameters, ..
            } => render_template(name, parameters, out),
            Node::Bold { .. }
            | Node::BoldItalic { .. }
            | Node::Italic { .. }
            | Node::Category { .. }
            | Node::Comment { .. }
            | Node::Image { .. }
            | Node::MagicWord { .. }
            | Node::Parameter { .. }
            | Node::Redirect { .. } => {}
        }
    }
}

/// `[https://example.org label]` shows `label`; a bare bracketed URL shows nothing.
fn render_external_link(nodes: &[Node<'_>], out: &mut TextBuilder) {
    let mut seen_url = false;
    for node in nodes {
        if let (false, Node::Text { value, .. }) = (seen_url, node) {
            seen_url = true;
            if let Some((_, label)) = value.split_once(char::is_whitespace) {
                out.push_inline(label);
            }
            continue;
        }
        render(std::slice::from_ref(node), out);
    }
}

/// Templates that only wrap inline text keep it; the rest (infoboxes, citations,
/// navigation boxes) carry no prose and are dropped.
fn render_template(name: &[Node<'_>], parameters: &[Parameter<'_>], out: &mut TextBuilder) {
    let name = plain(name).trim().to_ascii_lowercase().replace('_', " ");
    let positional: Vec<&Parameter<'_>> = parameters.iter().filter(|p| p.name.is_none()).collect();
    let keep = match name.as_str() {
        "nowrap" | "nobr" | "small" | "smaller" | "big" | "larger" | "em" | "strong" | "sic"
        | "abbr" | "visible anchor" | "vanchor" | "mvar" | "var" | "code" | "keypress" => {
            positional.first()
        }
        "lang" | "transl" => positional.get(1),
        "quote" | "blockquote" | "cquote" => positional.first(),
        _ => None,
    };
    if let Some(parameter) = keep {
        render(&parameter.value, out);
    }
}

fn plain(nodes: &[Node<'_>]) -> String {
    nodes
        .iter()
        .filter_map(|n| match n {
            Node::Text { value, .. } => Some(*value),
            _ => None,
        })
        .collect()
}
