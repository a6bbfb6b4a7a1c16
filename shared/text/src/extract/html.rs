//! HTML to citation text, with an HTML5 parser (html5ever through scraper): the same tree a
//! browser builds, so broken markup still yields its text.
//!
//! A whole page keeps its main content only, as readability-style extractors do: the
//! `<main>` (or `role="main"`) element when there is one, else the page's one `<article>`,
//! else the body; navigation, banners, footers, sidebars, forms, cookie notices, hidden
//! elements and the like are dropped wherever they are.

use scraper::{ElementRef, Html, Node, Selector};

use super::builder::{BlockKind, ExtractedText, TextBuilder};

/// Where text nodes are found in the content: the parser keeps no offsets, so each text is
/// looked for from where the previous one was found.
struct Cursor<'a> {
    content: &'a str,
    at: usize,
}

impl Cursor<'_> {
    fn locate(&mut self, text: &str) -> Option<std::ops::Range<usize>> {
        let needle = text.trim();
        let needle = needle
            .char_indices()
            .take_while(|(_, c)| !matches!(c, '&' | '<' | '\n'))
            .last()
            .map(|(i, c)| &needle[..i + c.len_utf8()])?;
        let found = self.content.get(self.at..)?.find(needle)? + self.at;
        // A text node runs to the next tag (entities and all); a `<pre>` to its end.
        let end = if self.content[found..].starts_with(text.trim()) {
            found + text.trim().len()
        } else {
            let rest = &self.content[found..];
            found
                + rest
                    .find("</pre")
                    .or_else(|| rest.find('<'))
                    .unwrap_or(rest.len())
        };
        self.at = end;
        Some(found..end)
    }
}

struct Walk<'a> {
    out: &'a mut TextBuilder,
    title: Option<String>,
    cursor: Option<Cursor<'a>>,
    /// Open lists: group, next number when ordered, depth.
    lists: Vec<(u32, Option<u64>)>,
    table: Option<u32>,
}

pub fn extract(content: &str) -> ExtractedText {
    let document = Html::parse_document(content);
    let mut out = TextBuilder::new();
    let title = document
        .select(&selector("title"))
        .next()
        .map(|t| t.text().collect::<String>().trim().to_owned());
    let root = main_content(&document).unwrap_or_else(|| document.root_element());
    let mut walk = Walk {
        out: &mut out,
        title,
        cursor: Some(Cursor { content, at: 0 }),
        lists: Vec::new(),
        table: None,
    };
    walk.children(root);
    let title = walk.title.take();
    out.finish(title)
}

/// Appends the blocks of an HTML fragment (e.g. a raw HTML block inside Markdown); its
/// text keeps the source the caller set.
pub fn extract_fragment_into(fragment: &str, out: &mut TextBuilder) {
    let parsed = Html::parse_fragment(fragment);
    out.end_block();
    let mut walk = Walk {
        out,
        title: None,
        cursor: None,
        lists: Vec::new(),
        table: None,
    };
    walk.children(parsed.root_element());
    walk.out.end_block();
}

fn selector(css: &str) -> Selector {
    Selector::parse(css).unwrap_or_else(|_| unreachable!("static selector {css}"))
}

/// The element holding the page's main content, when the page says which.
fn main_content(document: &Html) -> Option<ElementRef<'_>> {
    let main = selector("main, [role=main]");
    if let Some(main) = document.select(&main).next() {
        return Some(main);
    }
    let article = selector("article");
    let mut articles = document.select(&article);
    match (articles.next(), articles.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

/// Page furniture: never the content, wherever it sits.
fn is_boilerplate(element: &ElementRef<'_>) -> bool {
    let value = element.value();
    if matches!(
        value.name(),
        "nav" | "aside" | "footer" | "form" | "button" | "select" | "dialog" | "menu"
    ) {
        return true;
    }
    if value.attr("hidden").is_some() || value.attr("aria-hidden") == Some("true") {
        return true;
    }
    if let Some(role) = value.attr("role")
        && matches!(
            role,
            "navigation"
                | "banner"
                | "contentinfo"
                | "complementary"
                | "search"
                | "dialog"
                | "alertdialog"
                | "menu"
                | "menubar"
        )
    {
        return true;
    }
    let marks = format!(
        "{} {}",
        value.attr("id").unwrap_or(""),
        value.attr("class").unwrap_or("")
    )
    .to_ascii_lowercase();
    const FURNITURE: &[&str] = &[
        "cookie",
        "consent",
        "gdpr",
        "skip-link",
        "skiplink",
        "breadcrumb",
        "sidebar",
        "site-header",
        "site-footer",
        "site-nav",
        "navbar",
        "topbar",
        "menu",
        "share",
        "social",
        "newsletter",
        "advert",
        "banner",
        "toc",
        "pagination",
        "footer",
        "masthead",
    ];
    marks.split(|c: char| c.is_whitespace()).any(|mark| {
        FURNITURE.iter().any(|f| {
            mark == *f
                || mark.starts_with(&format!("{f}-"))
                || mark.ends_with(&format!("-{f}"))
                || mark.contains(&format!("-{f}-"))
        })
    })
}

impl Walk<'_> {
    fn children(&mut self, element: ElementRef<'_>) {
        for child in element.children() {
            match child.value() {
                Node::Text(text) => {
                    if let Some(cursor) = self.cursor.as_mut()
                        && !text.trim().is_empty()
                        && let Some(range) = cursor.locate(text)
                    {
                        self.out.set_source(range);
                    }
                    self.out.push_inline(text);
                }
                Node::Element(_) => {
                    if let Some(child_element) = ElementRef::wrap(child) {
                        self.element(child_element);
                    }
                }
                _ => {}
            }
        }
    }

    fn element(&mut self, element: ElementRef<'_>) {
        let name = element.value().name();
        if is_boilerplate(&element) {
            return;
        }
        match name {
            "script" | "style" | "noscript" | "template" | "svg" | "math" | "iframe" | "object"
            | "title" | "head" | "input" | "textarea" => {}
            "header" if self.cursor.is_some() && !inside(&element, &["main", "article"]) => {}
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = name.as_bytes()[1] - b'0';
                self.out.start_block(BlockKind::Heading { level });
                self.children(element);
                self.out.end_block();
            }
            "ul" | "ol" => {
                self.out.end_block();
                let group = match self.lists.first() {
                    Some((outer, _)) => *outer,
                    None => self.out.new_group(),
                };
                let next = (name == "ol").then(|| {
                    element
                        .value()
                        .attr("start")
                        .and_then(|s| s.trim().parse().ok())
                        .unwrap_or(1)
                });
                self.lists.push((group, next));
                self.children(element);
                self.lists.pop();
                self.out.end_block();
            }
            "li" => {
                let depth = self.lists.len();
                let (group, marker) = match self.lists.last_mut() {
                    Some((group, next)) => {
                        let marker = match next {
                            Some(n) => {
                                *n += 1;
                                format!("{}.", *n - 1)
                            }
                            None => "-".to_owned(),
                        };
                        (Some(*group), marker)
                    }
                    None => (None, "-".to_owned()),
                };
                let indent = "  ".repeat(depth.saturating_sub(1));
                self.out
                    .start_block_in(BlockKind::ListItem, group, format!("{indent}{marker} "));
                self.children(element);
                self.out.end_block();
            }
            "dt" | "dd" => {
                self.out.start_block(BlockKind::ListItem);
                self.children(element);
                self.out.end_block();
            }
            "table" => {
                self.out.end_block();
                let outer = self.table.replace(self.out.new_group());
                self.children(element);
                self.out.end_block();
                self.table = outer;
            }
            "tr" => {
                self.out
                    .start_block_in(BlockKind::TableRow, self.table, String::new());
                self.children(element);
                self.out.end_block();
            }
            "td" | "th" => {
                self.out.cell_separator();
                self.children(element);
            }
            "pre" => {
                self.out.start_block(BlockKind::Code);
                let code = element.text().collect::<String>();
                if let Some(cursor) = self.cursor.as_mut()
                    && let Some(range) = cursor.locate(&code)
                {
                    self.out.set_source(range);
                }
                self.out.push_code(&code);
                self.out.end_block();
            }
            "br" => self.out.push_space(),
            "img" => {
                if let Some(alt) = element.value().attr("alt") {
                    self.out.push_inline(alt);
                    self.out.push_space();
                }
            }
            "a" => match element.value().attr("href") {
                Some(href) if !href.trim_start().starts_with("javascript:") => {
                    self.out.start_link(href);
                    self.children(element);
                    self.out.end_link();
                }
                _ => self.children(element),
            },
            _ if is_block_level(name) => {
                self.out.end_block();
                self.children(element);
                self.out.end_block();
            }
            _ => self.children(element),
        }
    }
}

fn inside(element: &ElementRef<'_>, names: &[&str]) -> bool {
    element
        .ancestors()
        .filter_map(ElementRef::wrap)
        .any(|a| names.contains(&a.value().name()) || a.value().attr("role") == Some("main"))
}

fn is_block_level(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "section"
            | "article"
            | "main"
            | "header"
            | "blockquote"
            | "figure"
            | "figcaption"
            | "dl"
            | "thead"
            | "tbody"
            | "tfoot"
            | "caption"
            | "fieldset"
            | "details"
            | "summary"
            | "address"
            | "hr"
            | "body"
            | "html"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_page_keeps_its_main_content() {
        let page = r#"<html><head><title>Reset</title></head><body>
<header class="site-header"><a href="/">ACME</a> <nav><a href="/help">Help</a></nav></header>
<div id="cookie-banner">We use cookies. <button>OK</button></div>
<main><h1>Reset your password</h1>
<p>Where to go: the <a href="/account">account page</a>.</p>
<ol><li>Open settings.</li><li>Choose <b>Reset</b>.<ul><li>Wait 5 minutes.</li></ul></li></ol>
</main>
<footer>Office | Helpdesk<br>Copyright 2026 ACME</footer></body></html>"#;
        let text = extract(page);
        assert_eq!(
            text.text,
            "Reset your password\n\nWhere to go: the account page.\n\n1. Open settings.\n2. Choose Reset.\n  - Wait 5 minutes."
        );
        assert_eq!(text.title.as_deref(), Some("Reset"));
        assert_eq!(text.links.len(), 1);
        assert_eq!(text.links[0].url, "/account");
        let at = text.text.find("Open settings").unwrap();
        let source = text.source_range(at..at + 13).unwrap();
        assert_eq!(&page[source], "Open settings.");
    }

    #[test]
    fn without_main_the_furniture_still_goes() {
        let page = "<body><nav>Home | About</nav><div class=\"content\"><p>Body text.</p></div><div class=\"site-footer\">Copyright</div><footer>x1234</footer></body>";
        assert_eq!(extract(page).text, "Body text.");
    }
}
