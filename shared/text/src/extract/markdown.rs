//! Markdown (CommonMark + tables + YAML front matter) to citation text, with pulldown-cmark.
//! Raw HTML blocks go through the HTML extractor so their text is not lost. Template tags
//! are removed first (`templates`); the offsets recorded here point into the content the
//! parser read and are mapped back by the caller.

use pulldown_cmark::{Event, MetadataBlockKind, Options, Parser, Tag, TagEnd};

use super::builder::{BlockKind, ExtractedText, TextBuilder};

/// A list being walked: its group (the outermost list's), the next number of an ordered
/// list, and its depth.
struct OpenList {
    group: u32,
    next: Option<u64>,
}

pub fn extract(content: &str) -> ExtractedText {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut out = TextBuilder::new();
    let mut title = None;
    let mut in_metadata = false;
    let mut html_block = String::new();
    let mut in_html_block = false;
    let mut lists: Vec<OpenList> = Vec::new();
    // List items that are still open, so text after a nested list resumes as its own unit.
    let mut item_depth = 0usize;
    let mut table: Option<u32> = None;
    // Inside an image: its alt text is kept, its link is not.
    let mut in_image = 0usize;

    for (event, range) in Parser::new_ext(content, options).into_offset_iter() {
        match event {
            Event::Start(tag) => match tag {
                Tag::MetadataBlock(MetadataBlockKind::YamlStyle) => in_metadata = true,
                Tag::MetadataBlock(_) => in_metadata = true,
                Tag::Heading { level, .. } => {
                    out.start_block(BlockKind::Heading { level: level as u8 })
                }
                Tag::Paragraph => {
                    if item_depth > 0 && out.open_kind() == Some(BlockKind::ListItem) {
                        out.push_space();
                    } else if item_depth > 0 {
                        // Text of an item after its nested list: same item, no marker.
                        let group = lists.last().map(|l| l.group);
                        out.start_block_in(BlockKind::ListItem, group, indent(lists.len()));
                    } else {
                        out.start_block(BlockKind::Paragraph);
                    }
                }
                Tag::Item => {
                    item_depth += 1;
                    let depth = lists.len();
                    let (group, marker) = match lists.last_mut() {
                        Some(list) => {
                            let marker = match list.next.as_mut() {
                                Some(n) => {
                                    *n += 1;
                                    format!("{}.", *n - 1)
                                }
                                None => "-".to_owned(),
                            };
                            (Some(list.group), marker)
                        }
                        None => (None, "-".to_owned()),
                    };
                    out.start_block_in(
                        BlockKind::ListItem,
                        group,
                        format!("{}{marker} ", indent(depth)),
                    );
                }
                Tag::List(start) => {
                    out.end_block();
                    let group = match lists.first() {
                        Some(outer) => outer.group,
                        None => out.new_group(),
                    };
                    lists.push(OpenList { group, next: start });
                }
                Tag::CodeBlock(_) => out.start_block(BlockKind::Code),
                Tag::HtmlBlock => {
                    out.end_block();
                    in_html_block = true;
                    html_block.clear();
                }
                Tag::Table(_) => {
                    out.end_block();
                    table = Some(out.new_group());
                }
                Tag::TableHead | Tag::TableRow => {
                    out.start_block_in(BlockKind::TableRow, table, String::new())
                }
                Tag::TableCell => out.cell_separator(),
                Tag::BlockQuote(_) | Tag::FootnoteDefinition(_) => out.end_block(),
                Tag::Link { dest_url, .. } => {
                    if in_image == 0 {
                        out.start_link(&dest_url);
                    }
                }
                Tag::Image { .. } => in_image += 1,
                Tag::Emphasis
                | Tag::Strong
                | Tag::Strikethrough
                | Tag::Superscript
                | Tag::Subscript
                | Tag::DefinitionList
                | Tag::DefinitionListTitle
                | Tag::DefinitionListDefinition => {}
            },
            Event::End(tag) => match tag {
                TagEnd::MetadataBlock(_) => in_metadata = false,
                TagEnd::Heading(_) | TagEnd::CodeBlock | TagEnd::TableHead | TagEnd::TableRow => {
                    out.end_block()
                }
                TagEnd::Table => {
                    out.end_block();
                    table = None;
                }
                TagEnd::Paragraph if item_depth == 0 => out.end_block(),
                TagEnd::Item => {
                    item_depth = item_depth.saturating_sub(1);
                    out.end_block();
                }
                TagEnd::List(_) => {
                    out.end_block();
                    lists.pop();
                }
                TagEnd::HtmlBlock => {
                    in_html_block = false;
                    out.set_source(range);
                    super::html::extract_fragment_into(&html_block, &mut out);
                }
                TagEnd::Link if in_image == 0 => out.end_link(),
                TagEnd::Image => {
                    in_image = in_image.saturating_sub(1);
                    out.push_space();
                }
                _ => {}
            },
            Event::Text(text) => {
                if in_metadata {
                    title = title.or_else(|| front_matter_title(&text));
                } else if in_html_block {
                    html_block.push_str(&text);
                } else if is_delimiter_row(&text) {
                    // `|---|---|` of a table the parser did not take (no header row).
                } else {
                    out.set_source(range);
                    out.push_inline(&text);
                }
            }
            Event::Code(code) => {
                out.set_source(range);
                out.push_inline(&code);
            }
            Event::Html(html) => {
                if in_html_block {
                    html_block.push_str(&html);
                }
            }
            Event::InlineHtml(html) => {
                if is_line_break_tag(&html) {
                    out.push_space();
                }
            }
            Event::SoftBreak | Event::HardBreak => out.push_space(),
            Event::FootnoteReference(_)
            | Event::InlineMath(_)
            | Event::DisplayMath(_)
            | Event::Rule
            | Event::TaskListMarker(_) => {}
        }
    }
    out.finish(title)
}

/// Two spaces per level of nesting below the outermost list.
fn indent(depth: usize) -> String {
    "  ".repeat(depth.saturating_sub(1))
}

fn is_delimiter_row(text: &str) -> bool {
    let text = text.trim();
    text.contains("---")
        && text.contains('|')
        && text.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

fn is_line_break_tag(html: &str) -> bool {
    let tag = html.trim().trim_start_matches('<').to_ascii_lowercase();
    tag.starts_with("br") || tag.starts_with("/p") || tag.starts_with("p>")
}

/// The `title:` of YAML front matter (flow scalars, optionally quoted). A full YAML parser
/// would buy nothing here: only this one key is read.
fn front_matter_title(yaml: &str) -> Option<String> {
    yaml.lines().find_map(|line| {
        let value = line.strip_prefix("title:")?.trim();
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        (!unquoted.is_empty()).then(|| unquoted.to_owned())
    })
}
