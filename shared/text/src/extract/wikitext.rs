//! MediaWiki wikitext to citation text, with parse-wiki-text-2: headings, lists and table rows
//! become blocks; links keep their label (and their target beside the text); references,
//! comments, categories, files and most templates are dropped; a few inline templates that
//! wrap readable text keep it.
//!
//! Namespace names are those of the larger Wikipedias (File/Image/Datei/Bild/Fichier/
//! Archivo/…, Category/Kategorie/Catégorie/…), so a localized file link is an image (its
//! parameters never reach the text) and a localized category link goes.

use parse_wiki_text_2::{Configuration, ConfigurationSource, Node, Parameter};

use super::builder::{BlockKind, ExtractedText, TextBuilder};

/// Category namespace names and aliases, lower case, of the larger wikis.
pub const CATEGORY_NAMESPACES: &[&str] = &[
    "category",
    "kategorie",
    "catégorie",
    "categoría",
    "categoria",
    "categorie",
    "kategoria",
    "kategori",
    "categorieën",
    "luokka",
    "kategória",
    "kategorija",
    "категория",
    "категорія",
    "カテゴリ",
    "分类",
    "分類",
    "분류",
    "تصنيف",
    "רדה",
    "κατηγορία",
    "thể loại",
    "kategoriya",
];

/// File namespace names and aliases, lower case, of the larger wikis.
pub const FILE_NAMESPACES: &[&str] = &[
    "file",
    "image",
    "datei",
    "bild",
    "fichier",
    "archivo",
    "imagen",
    "ficheiro",
    "arquivo",
    "imagem",
    "file",
    "immagine",
    "plik",
    "grafika",
    "bestand",
    "afbeelding",
    "fil",
    "bild",
    "tiedosto",
    "kuva",
    "soubor",
    "obrázek",
    "fájl",
    "kép",
    "dosya",
    "resim",
    "файл",
    "изображение",
    "ファイル",
    "画像",
    "文件",
    "檔案",
    "图像",
    "파일",
    "ملف",
    "קובץ",
    "αρχείο",
    "tập tin",
    "hình",
    "lêer",
    "beeld",
    "bilde",
    "billede",
    "mynd",
    "plik",
];

/// Image parameters that a file link whose namespace is not known would show as text.
fn is_image_parameter(part: &str) -> bool {
    let part = part.trim().to_lowercase();
    matches!(
        part.as_str(),
        "thumb"
            | "thumbnail"
            | "mini"
            | "miniatur"
            | "vignette"
            | "miniaturadaimagen"
            | "frame"
            | "framed"
            | "frameless"
            | "rahmenlos"
            | "gerahmt"
            | "border"
            | "rahmen"
            | "left"
            | "right"
            | "center"
            | "centre"
            | "none"
            | "links"
            | "rechts"
            | "zentriert"
            | "ohne"
            | "gauche"
            | "droite"
            | "centré"
            | "upright"
            | "hochkant"
            | "redresse"
            | "baseline"
            | "middle"
            | "sub"
            | "super"
            | "top"
            | "text-top"
            | "bottom"
            | "text-bottom"
    ) || part.starts_with("upright=")
        || part.starts_with("hochkant=")
        || part.starts_with("alt=")
        || part.starts_with("link=")
        || part.starts_with("class=")
        || part.starts_with("lang=")
        || part.ends_with("px")
            && part[..part.len() - 2]
                .chars()
                .all(|c| c.is_ascii_digit() || c == 'x')
}

fn configuration() -> Configuration {
    let default = parse_wiki_text_2::Configuration::default();
    drop(default);
    Configuration::new(&ConfigurationSource {
        category_namespaces: CATEGORY_NAMESPACES,
        extension_tags: &[
            "categorytree",
            "ce",
            "charinsert",
            "chem",
            "gallery",
            "graph",
            "hiero",
            "imagemap",
            "indicator",
            "inputbox",
            "mapframe",
            "maplink",
            "math",
            "nowiki",
            "poem",
            "pre",
            "ref",
            "references",
            "score",
            "section",
            "source",
            "syntaxhighlight",
            "templatedata",
            "timeline",
            "templatestyles",
        ],
        file_namespaces: FILE_NAMESPACES,
        link_trail: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyzäöüßÄÖÜàâçéèêëîïôûùüÿœæ",
        magic_words: &[
            "DISAMBIG",
            "FORCETOC",
            "HIDDENCAT",
            "INDEX",
            "NEWSECTIONLINK",
            "NOCC",
            "NOCOLLABORATIONHUBTOC",
            "NOCONTENTCONVERT",
            "NOEDITSECTION",
            "NOGALLERY",
            "NOGLOBAL",
            "NOINDEX",
            "NONEWSECTIONLINK",
            "NOTC",
            "NOTITLECONVERT",
            "NOTOC",
            "STATICREDIRECT",
            "TOC",
            "INHALTSVERZEICHNIS",
            "KEIN_INHALTSVERZEICHNIS",
        ],
        protocols: &[
            "//", "ftp://", "ftps://", "geo:", "git://", "http://", "https://", "irc://",
            "ircs://", "mailto:", "news:", "sftp://", "ssh://", "svn://", "tel:",
        ],
        redirect_magic_words: &["REDIRECT", "WEITERLEITUNG", "REDIRECTION", "REDIRECCIÓN"],
    })
}

/// Wikitext the parser cannot handle (it gives up after its time limit, or panics on some
/// malformed input, a bug of parse-wiki-text-2 found by our property tests and by `make
/// fuzz`) goes through [`strip`], a markup stripper that needs no tree: the text is kept,
/// the markup is not.
pub fn extract(content: &str) -> ExtractedText {
    let content = &unindent_tables(content);
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        configuration()
            .parse_with_timeout(content, parse_budget(content.len()))
            .ok()
            .map(|output| {
                let mut walk = Walk {
                    out: TextBuilder::new(),
                    covered: 0,
                    lists: Vec::new(),
                };
                walk.render(&output.nodes);
                walk.out.finish(None)
            })
    }));
    match parsed {
        Ok(Some(extracted)) => extracted,
        Ok(None) | Err(_) => strip(content),
    }
}

/// `:{|` (a table indented like a definition) as `{|`, with the colons replaced by spaces
/// so that every offset stays: the parser reads an indented table as text.
fn unindent_tables(content: &str) -> String {
    if !content.contains(":{|") && !content.contains(": {|") {
        return content.to_owned();
    }
    let mut out = String::with_capacity(content.len());
    for line in content.split_inclusive('\n') {
        let colons = line.bytes().take_while(|&b| b == b':' || b == b' ').count();
        if colons > 0 && line[colons..].starts_with("{|") && line.starts_with(':') {
            out.push_str(&" ".repeat(colons));
            out.push_str(&line[colons..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// How long the parser may take on `bytes` of wikitext before the stripper: 250 ms and
/// 20 ms per KiB, at most its own default of 5 s. Real pages parse far inside it (a whole
/// Wikipedia article in tens of milliseconds); some malformed inputs make the parser spin
/// until its limit (found by `make fuzz`: 2 KiB that took the full 5 s, three times per
/// event), which the flat 5 s turned into a way to stall a lane per event.
fn parse_budget(bytes: usize) -> std::time::Duration {
    let millis = 250 + 20 * (bytes as u64 / 1024);
    std::time::Duration::from_millis(millis.min(5_000))
}

struct Walk {
    out: TextBuilder,
    /// Where the last link ended: parse-wiki-text-2 puts a link's trail (`[[a|b]]s`) in
    /// the link's text and again in the text node after it, which starts before this.
    covered: usize,
    /// Open lists: the outermost's group and, per level, the next number when ordered.
    lists: Vec<(u32, Option<u64>)>,
}

impl Walk {
    fn render(&mut self, nodes: &[Node<'_>]) {
        for node in nodes {
            self.node(node);
        }
    }

    fn list(&mut self, items: &[parse_wiki_text_2::ListItem<'_>], ordered: bool) {
        self.out.end_block();
        let group = match self.lists.first() {
            Some((outer, _)) => *outer,
            None => self.out.new_group(),
        };
        self.lists.push((group, ordered.then_some(1)));
        let indent = "  ".repeat(self.lists.len() - 1);
        for item in items {
            let marker = match self.lists.last_mut().and_then(|(_, n)| n.as_mut()) {
                Some(n) => {
                    *n += 1;
                    format!("{}.", *n - 1)
                }
                None => "-".to_owned(),
            };
            self.out.start_block_in(
                BlockKind::ListItem,
                Some(group),
                format!("{indent}{marker} "),
            );
            self.render(&item.nodes);
            self.out.end_block();
        }
        self.lists.pop();
    }

    fn node(&mut self, node: &Node<'_>) {
        let out = &mut self.out;
        match node {
            Node::Text { value, start, end } => {
                let skip = self.covered.saturating_sub(*start).min(value.len());
                let (value, start) = match value.get(skip..) {
                    Some(rest) => (rest, start + skip),
                    None => (*value, *start),
                };
                let out = &mut self.out;
                out.set_source(start..*end);
                if !looks_like_leaked_markup(value) {
                    // Braces of a template whose other half is broken markup.
                    if value.contains("}}") || value.contains("{{") {
                        out.push_inline(&value.replace("}}", " ").replace("{{", " "));
                    } else {
                        out.push_inline(value);
                    }
                }
            }
            Node::CharacterEntity {
                character,
                start,
                end,
            } => {
                out.set_source(*start..*end);
                let mut buffer = [0u8; 4];
                out.push_inline(character.encode_utf8(&mut buffer));
            }
            Node::Heading { level, nodes, .. } => {
                out.start_block(BlockKind::Heading { level: *level });
                self.render(nodes);
                self.out.end_block();
            }
            Node::ParagraphBreak { .. } | Node::HorizontalDivider { .. } => out.end_block(),
            Node::Link {
                target,
                text,
                start,
                end,
            } => {
                // `[[:Category:X]]`, `[[:File:X]]`, interwiki prefixes: the page name only.
                let shown = target.trim_start_matches(':');
                let namespaced = shown.split_once(':').is_some_and(|(namespace, _)| {
                    is_namespace(namespace, FILE_NAMESPACES)
                        || is_namespace(namespace, CATEGORY_NAMESPACES)
                });
                let label_is_target = text.is_empty() || plain(text).trim() == target.trim();
                if namespaced && label_is_target {
                    return;
                }
                out.start_link(&target.trim().replace(' ', "_"));
                if label_is_target {
                    out.set_source(*start..*end);
                    let name = shown.rsplit_once(':').map_or(shown, |(_, n)| n);
                    out.push_inline(name.split('#').next().unwrap_or(name));
                } else {
                    self.render(text);
                }
                self.out.end_link();
                self.covered = self.covered.max(*end);
            }
            Node::ExternalLink { nodes, .. } => self.external_link(nodes),
            Node::UnorderedList { items, .. } => self.list(items, false),
            Node::OrderedList { items, .. } => self.list(items, true),
            Node::DefinitionList { items, .. } => {
                for item in items {
                    self.out.start_block(BlockKind::ListItem);
                    self.render(&item.nodes);
                    self.out.end_block();
                }
            }
            Node::Table { captions, rows, .. } => {
                out.end_block();
                for caption in captions {
                    self.out.start_block(BlockKind::Paragraph);
                    self.render(&caption.content);
                    self.out.end_block();
                }
                let group = self.out.new_group();
                for row in rows {
                    self.out
                        .start_block_in(BlockKind::TableRow, Some(group), String::new());
                    for cell in &row.cells {
                        self.out.cell_separator();
                        self.render(&cell.content);
                    }
                    self.out.end_block();
                }
            }
            Node::Preformatted { nodes, .. } => {
                out.start_block(BlockKind::Code);
                self.render(nodes);
                self.out.end_block();
            }
            Node::Tag { name, nodes, .. } => match name.as_ref() {
                "ref" | "references" | "gallery" | "math" | "score" | "graph" | "templatedata"
                | "templatestyles" | "imagemap" | "timeline" | "mapframe" | "maplink"
                | "indicator" | "hiero" | "chem" | "ce" | "inputbox" | "categorytree" => {}
                "pre" | "syntaxhighlight" | "source" => {
                    out.start_block(BlockKind::Code);
                    self.render(nodes);
                    self.out.end_block();
                }
                _ => self.render(nodes),
            },
            Node::StartTag { name, .. } | Node::EndTag { name, .. } => {
                if matches!(name.as_ref(), "br" | "p" | "div") {
                    out.push_space();
                }
            }
            Node::Template {
                name, parameters, ..
            } => self.template(name, parameters),
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

    /// `[https://example.org label]` shows `label`; a bare bracketed URL shows nothing.
    fn external_link(&mut self, nodes: &[Node<'_>]) {
        let mut seen_url = false;
        let mut opened = false;
        for node in nodes {
            if let (false, Node::Text { value, start, .. }) = (seen_url, node) {
                seen_url = true;
                let (url, label) = value.split_once(char::is_whitespace).unwrap_or((value, ""));
                self.out.start_link(url);
                opened = true;
                if !label.is_empty() {
                    let at = start + url.len() + 1;
                    self.out.set_source(at..at + label.len());
                    self.out.push_inline(label);
                }
                continue;
            }
            self.node(node);
        }
        if opened {
            self.out.end_link();
        }
    }

    /// Templates that only wrap inline text keep it; the rest (infoboxes, citations,
    /// navigation boxes) carry no prose and are dropped.
    fn template(&mut self, name: &[Node<'_>], parameters: &[Parameter<'_>]) {
        let name = plain(name).trim().to_lowercase().replace('_', " ");
        let positional: Vec<&Parameter<'_>> =
            parameters.iter().filter(|p| p.name.is_none()).collect();
        let keep = match name.as_str() {
            "nowrap" | "nobr" | "small" | "smaller" | "big" | "larger" | "em" | "strong"
            | "sic" | "abbr" | "visible anchor" | "vanchor" | "mvar" | "var" | "code"
            | "keypress" | "lang" | "nihongo" | "tooltip" | "unbulleted list" | "plainlist"
            | "flatlist" | "hlist" | "ubl" => positional.first(),
            "transl" => positional.get(1),
            "quote" | "blockquote" | "cquote" | "zitat" | "citation bloc" => positional.first(),
            _ if name.starts_with("lang-") => positional.first(),
            _ => None,
        };
        // Punctuation templates: what they print.
        let printed = match name.as_str() {
            "snd" | "spaced ndash" | "spaced en dash" | "sndash" | "nsndns" => Some(" – "),
            "ndash" | "en dash" => Some("–"),
            "mdash" | "em dash" | "spaced mdash" | "smd" => Some(" — "),
            "nbsp" | "sp" | "space" | "thinsp" => Some(" "),
            "'" | "apos" => Some("'"),
            "middot" | "dot" | "·" => Some(" · "),
            "bull" | "bullet" | "•" => Some(" • "),
            "ampersand" | "amp" | "&" => Some("&"),
            "!" => Some("|"),
            _ => None,
        };
        if let Some(text) = printed {
            self.out.push_inline(text);
            return;
        }
        if let Some(parameter) = keep {
            // `{{lang|de|Text}}`: the text is the last positional parameter.
            let parameter = if name == "lang" {
                positional.last().copied().unwrap_or(parameter)
            } else {
                parameter
            };
            self.render(&parameter.value);
        }
    }
}

fn is_namespace(name: &str, names: &[&str]) -> bool {
    let name = name.trim().to_lowercase().replace('_', " ");
    names.contains(&name.as_str())
}

/// Text nodes the parser left with markup it did not take apart (a table inside a
/// template's argument, a file link's parameters, table syntax it could not close).
fn looks_like_leaked_markup(value: &str) -> bool {
    let trimmed = value.trim();
    trimmed.starts_with("{|")
        || trimmed.starts_with("|}")
        || trimmed.starts_with("|-")
        || (trimmed.contains('|')
            && trimmed
                .split('|')
                .all(|p| p.trim().is_empty() || is_image_parameter(p)))
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

/// Wikitext to citation text without a parse tree: what a page the parser cannot finish
/// becomes. Removes comments, `<ref>`s, templates and tables' syntax (rows become `cell |
/// cell` rows), file and category links; keeps link labels, headings and list items.
pub fn strip(content: &str) -> ExtractedText {
    let mut out = TextBuilder::new();
    let cleaned = strip_nested(&unindent_tables(content));
    let mut in_table = None;
    let mut list_group = None;
    let mut offset = 0usize;
    for line in cleaned.split('\n') {
        let line_offset = offset;
        offset += line.len() + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            out.end_block();
            list_group = None;
            continue;
        }
        out.set_source(line_offset..line_offset + line.len());
        if trimmed.starts_with("{|") {
            out.end_block();
            in_table = Some(out.new_group());
            continue;
        }
        if trimmed.starts_with("|}") {
            out.end_block();
            in_table = None;
            continue;
        }
        if let Some(group) = in_table {
            if trimmed.starts_with("|-") {
                out.start_block_in(BlockKind::TableRow, Some(group), String::new());
                continue;
            }
            if trimmed.starts_with("|+") {
                continue;
            }
            if let Some(cells) = trimmed
                .strip_prefix('|')
                .or_else(|| trimmed.strip_prefix('!'))
            {
                if out.open_kind() != Some(BlockKind::TableRow) {
                    out.start_block_in(BlockKind::TableRow, Some(group), String::new());
                }
                for cell in cells.split("||").flat_map(|c| c.split("!!")) {
                    // `style="…" | text`: the text after the attributes.
                    let text = match cell.split_once('|') {
                        Some((attributes, text)) if attributes.contains('=') => text,
                        _ => cell,
                    };
                    out.cell_separator();
                    out.push_inline(&inline(text));
                }
                continue;
            }
            out.push_space();
            out.push_inline(&inline(trimmed));
            continue;
        }
        if let Some(heading) = heading(trimmed) {
            out.start_block(BlockKind::Heading { level: heading.0 });
            out.push_inline(&inline(heading.1));
            out.end_block();
            continue;
        }
        let markers = trimmed
            .bytes()
            .take_while(|b| matches!(b, b'*' | b'#' | b':' | b';'))
            .count();
        if markers > 0 {
            let group = *list_group.get_or_insert_with(|| out.new_group());
            let ordered = trimmed.as_bytes()[markers - 1] == b'#';
            let marker = if ordered { "1." } else { "-" };
            out.start_block_in(
                BlockKind::ListItem,
                Some(group),
                format!("{}{marker} ", "  ".repeat(markers - 1)),
            );
            out.push_inline(&inline(&trimmed[markers..]));
            out.end_block();
            continue;
        }
        list_group = None;
        if out.open_kind() != Some(BlockKind::Paragraph) {
            out.start_block(BlockKind::Paragraph);
        }
        out.push_inline(&inline(trimmed));
        out.push_space();
    }
    out.finish(None)
}

/// The content with comments, `<ref>…</ref>`, `<gallery>…</gallery>`-like tags and
/// templates removed (nested), each replaced by spaces of its length so that every other
/// byte keeps its offset (newlines inside are kept).
fn strip_nested(content: &str) -> String {
    let mut bytes = content.as_bytes().to_vec();
    let blank = |bytes: &mut Vec<u8>, range: std::ops::Range<usize>| {
        for b in &mut bytes[range] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    // Comments and the contents of tags that hold no prose.
    for (open, close) in [
        ("<!--", "-->"),
        ("<ref", "</ref>"),
        ("<gallery", "</gallery>"),
        ("<math", "</math>"),
        ("<score", "</score>"),
        ("<timeline", "</timeline>"),
        ("<imagemap", "</imagemap>"),
        ("<templatestyles", ">"),
    ] {
        let mut at = 0;
        // ASCII lower case keeps every byte where it was.
        let lower = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
        while let Some(found) = lower.get(at..).and_then(|s| s.find(open)).map(|n| n + at) {
            // `<ref name="x" />` closes itself.
            let tag_end = lower[found..].find('>').map(|n| found + n + 1);
            let end = match tag_end {
                Some(end) if open == "<ref" && lower[..end].ends_with("/>") => end,
                _ => lower[found..]
                    .find(close)
                    .map_or(content.len(), |n| found + n + close.len()),
            };
            if end > bytes.len()
                || !content.is_char_boundary(found)
                || !content.is_char_boundary(end)
            {
                break;
            }
            blank(&mut bytes, found..end);
            at = end;
        }
    }
    // Templates, innermost first (`{{` … `}}` with nesting), and file/category links.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut bytes = text.into_bytes();
    let mut stack = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'{' && bytes[i + 1] == b'{' {
            stack.push(i);
            i += 2;
        } else if bytes[i] == b'}' && bytes[i + 1] == b'}' {
            match stack.pop() {
                Some(start) => blank(&mut bytes, start..i + 2),
                // A `}}` whose `{{` is gone (broken markup): the braces at least go.
                None => blank(&mut bytes, i..i + 2),
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    for start in stack {
        blank(&mut bytes, start..start + 2);
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut bytes = text.clone().into_bytes();
    let mut at = 0;
    while let Some(found) = text.get(at..).and_then(|s| s.find("[[")).map(|n| n + at) {
        let inner_start = found + 2;
        let name = text[inner_start..]
            .split(['|', ']', ':'])
            .next()
            .unwrap_or("");
        let is_namespaced = text[inner_start..]
            .trim_start_matches(':')
            .split_once(':')
            .is_some_and(|(ns, _)| {
                is_namespace(ns, FILE_NAMESPACES) || is_namespace(ns, CATEGORY_NAMESPACES)
            })
            && !name.is_empty();
        if is_namespaced {
            // Up to the matching `]]` (captions hold links of their own).
            let mut depth = 0;
            let mut j = found;
            let mut end = text.len();
            while j + 1 < text.len() {
                if text.as_bytes()[j] == b'[' && text.as_bytes()[j + 1] == b'[' {
                    depth += 1;
                    j += 2;
                } else if text.as_bytes()[j] == b']' && text.as_bytes()[j + 1] == b']' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut bytes, found..end);
            at = end;
        } else {
            at = inner_start;
        }
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `== Title ==` → (2, "Title").
fn heading(line: &str) -> Option<(u8, &str)> {
    let level = line.bytes().take_while(|&b| b == b'=').count();
    let trailing = line.bytes().rev().take_while(|&b| b == b'=').count();
    if level < 2 || trailing < 2 || line.len() <= level + trailing {
        return None;
    }
    let level = level.min(trailing).min(6);
    Some((level as u8, line[level..line.len() - level].trim()))
}

/// Inline markup of one line: links keep their label, external links theirs, bold and
/// italic quotes and HTML tags go.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[[") {
            let Some(end) = after.find("]]") else {
                rest = after; // an unclosed `[[`: the brackets go, the text stays
                continue;
            };
            let inner = &after[..end];
            let label = inner.rsplit('|').next().unwrap_or(inner);
            let label = label.trim_start_matches(':');
            out.push_str(&inline(label.rsplit_once(':').map_or(label, |(_, n)| n)));
            rest = &after[end + 2..];
        } else if rest.starts_with("]]") {
            rest = &rest[2..];
        } else if let Some(after) = rest.strip_prefix('[')
            && (after.starts_with("http") || after.starts_with("//"))
        {
            let end = after.find(']').unwrap_or(after.len());
            if let Some((_, label)) = after[..end].split_once(' ') {
                out.push_str(label);
            }
            rest = after.get(end + 1..).unwrap_or("");
        } else if rest.starts_with("''") {
            rest = rest.trim_start_matches('\'');
        } else if rest.starts_with('<')
            && rest[1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
        {
            let end = rest.find('>').map_or(rest.len(), |n| n + 1);
            out.push(' ');
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn localized_files_and_categories_never_reach_the_text() {
        let page = "Die Stadt liegt am Fluss.[[Datei:Blick.jpg|mini|hochkant=1.2|Blick auf die [[Stadt]]]]\n\n[[Kategorie:Ort]] [[:Category:Towns]]";
        let text = extract(page).text;
        assert_eq!(text, "Die Stadt liegt am Fluss.");
    }

    #[test]
    fn the_stripper_leaves_no_markup() {
        let page = "== Geschichte ==\n'''Berlin''' ist<ref name=\"a\">{{Literatur|Titel=X}}</ref> eine [[Stadt|Großstadt]].{{Infobox\n|a = {{b}}\n}}\n{| class=\"wikitable\"\n|-\n! Jahr !! Einwohner\n|-\n| 1900 || style=\"x\" | 1.888.000\n|}\n* Punkt [[Datei:X.png|mini|Bild]]\n# Erster\n";
        let text = strip(page).text;
        assert_eq!(
            text,
            "Geschichte\n\nBerlin ist eine Großstadt.\n\nJahr | Einwohner\n1900 | 1.888.000\n\n- Punkt\n1. Erster"
        );
    }

    #[test]
    fn punctuation_templates_print_what_they_print() {
        assert_eq!(
            extract("another sovereign state{{snd}}the Republic of Ireland.").text,
            "another sovereign state – the Republic of Ireland."
        );
        assert_eq!(extract("1914{{ndash}}1918").text, "1914–1918");
    }

    #[test]
    fn link_trails_are_written_once() {
        assert_eq!(
            extract("The [[Whigs (party)|Whig]]s won.").text,
            "The Whigs won."
        );
        assert_eq!(extract("The [[Whig]]s won.").text, "The Whigs won.");
    }

    #[test]
    fn lists_keep_numbers_and_nesting() {
        let text = extract("Steps:\n# One\n# Two\n#* detail\n# Three\n").text;
        assert_eq!(text, "Steps:\n\n1. One\n2. Two\n  - detail\n3. Three");
    }
}
