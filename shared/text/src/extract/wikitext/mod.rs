//! MediaWiki wikitext to citation text, with parse-wiki-text-2: headings, lists and table rows
//! become blocks; links keep their label (and their target beside the text); references,
//! comments, categories, files and most templates are dropped; a few inline templates that
//! wrap readable text keep it.
//!
//! Namespace names are those of the larger Wikipedias (File/Image/Datei/Bild/Fichier/
//! Archivo/…, Category/Kategorie/Catégorie/…), so a localized file link is an image (its
//! parameters never reach the text) and a localized category link goes.

use parse_wiki_text_2::{Configuration, ConfigurationSource, Node, Parameter};

mod strip;

pub use strip::strip;

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

/// The parser's configuration, built once (its tries are not free to build per page).
static CONFIGURATION: std::sync::LazyLock<Configuration> = std::sync::LazyLock::new(|| {
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
});

/// Wikitext the parser cannot handle (it gives up after its time limit, or panics on some
/// malformed input, a bug of parse-wiki-text-2 found by our property tests and by `make
/// fuzz`) goes through [`strip`], a markup stripper that needs no tree: the text is kept,
/// the markup is not.
pub fn extract(content: &str) -> ExtractedText {
    let content = &unindent_tables(content);
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        CONFIGURATION
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
