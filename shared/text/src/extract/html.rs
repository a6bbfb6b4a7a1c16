//! HTML to citation text, with an HTML5 parser (html5ever through scraper): the same tree a
//! browser builds, so broken markup still yields its text.

use scraper::{ElementRef, Html, Node};

use super::builder::{BlockKind, ExtractedText, TextBuilder};

pub fn extract(content: &str) -> ExtractedText {
    let document = Html::parse_document(content);
    let mut out = TextBuilder::new();
    let mut title = None;
    walk(document.root_element(), &mut out, &mut title);
    out.finish(title)
}

/// Appends the blocks of an HTML fragment (e.g. a raw HTML block inside Markdown).
pub fn extract_fragment_into(fragment: &str, out: &mut TextBuilder) {
    let parsed = Html::parse_fragment(fragment);
    let mut title = None;
    out.end_block();
    walk(parsed.root_element(), out, &mut title);
    out.end_block();
}

fn walk(element: ElementRef<'_>, out: &mut TextBuilder, title: &mut Option<String>) {
    for child in element.children() {
        match child.value() {
            Node::Text(text) => out.push_inline(text),
            Node::Element(_) => {
                if let Some(child_element) = ElementRef::wrap(child) {
                    visit_element(child_element, out, title);
                }
            }
            _ => {}
        }
    }
}

fn visit_element(element: ElementRef<'_>, out: &mut TextBuilder, title: &mut Option<String>) {
    let name = element.value().name();
    match name {
        "script" | "style" | "noscript" | "template" | "svg" | "math" | "iframe" | "object" => {}
        "title" => {
            if title.is_none() {
                *title = Some(element.text().collect::<String>().trim().to_owned());
            }
        }
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
            let level = name.as_bytes()[1] - b'0';
            out.start_block(BlockKind::Heading { level });
            walk(element, out, title);
            out.end_block();
        }
        "li" | "dt" | "dd" => {
            out.start_block(BlockKind::ListItem);
            walk(element, out, title);
            out.end_block();
        }
        "tr" => {
            out.start_block(BlockKind::TableRow);
            walk(element, out, title);
            out.end_block();
        }
        "td" | "th" => {
            out.cell_separator();
            walk(element, out, title);
        }
        "pre" => {
            out.start_block(BlockKind::Code);
            out.push_code(&element.text().collect::<String>());
            out.end_block();
        }
        "br" => out.push_space(),
        "img" => {
            if let Some(alt) = element.value().attr("alt") {
                out.push_inline(alt);
                out.push_space();
            }
        }
        _ if is_block_level(name) => {
            out.end_block();
            walk(element, out, title);
            out.end_block();
        }
        _ => walk(element, out, title),
    }
}

fn is_block_level(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "section"
            | "article"
            | "main"
            | "header"
            | "footer"
            | "aside"
            | "nav"
            | "blockquote"
            | "figure"
            | "figcaption"
            | "ul"
            | "ol"
            | "dl"
            | "table"
            | "thead"
            | "tbody"
            | "tfoot"
            | "caption"
            | "form"
            | "fieldset"
            | "details"
            | "summary"
            | "address"
            | "hr"
            | "body"
            | "html"
            | "head"
    )
}
