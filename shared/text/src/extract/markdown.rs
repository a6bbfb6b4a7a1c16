//! Markdown (CommonMark + tables + YAML front matter) to citation text, with pulldown-cmark.
//! Raw HTML blocks go through the HTML extractor so their text is not lost.

use pulldown_cmark::{Event, MetadataBlockKind, Options, Parser, Tag, TagEnd};

use super::builder::{BlockKind, ExtractedText, TextBuilder};

pub fn extract(content: &str) -> ExtractedText {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut out = TextBuilder::new();
    let mut title = None;
    let mut in_metadata = false;
    let mut html_block = String::new();
    let mut in_html_block = false;
    // List items that are still open, so text after a nested list resumes as its own unit.
    let mut item_depth = 0usize;

    for event in Parser::new_ext(content, options) {
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
                        out.start_block(BlockKind::ListItem);
                    } else {
                        out.start_block(BlockKind::Paragraph);
                    }
                }
                Tag::Item => {
                    item_depth += 1;
                    out.start_block(BlockKind::ListItem);
                }
                Tag::List(_) => out.end_block(),
                Tag::CodeBlock(_) => out.start_block(BlockKind::Code),
                Tag::HtmlBlock => {
                    out.end_block();
                    in_html_block = true;
                    html_block.clear();
                }
                Tag::TableHead | Tag::TableRow => out.start_block(BlockKind::TableRow),
                Tag::TableCell => out.cell_separator(),
                Tag::BlockQuote(_) | Tag::Table(_) | Tag::FootnoteDefinition(_) => out.end_block(),
                Tag::Emphasis
                | Tag::Strong
                | Tag::Strikethrough
                | Tag::Superscript
                | Tag::Subscript
                | Tag::Link { .. }
                | Tag::Image { .. }
                | Tag::DefinitionList
                | Tag::DefinitionListTitle
                | Tag::DefinitionListDefinition => {}
            },
            Event::End(tag) => match tag {
                TagEnd::MetadataBlock(_) => in_metadata = false,
                TagEnd::Heading(_) | TagEnd::CodeBlock | TagEnd::TableHead | TagEnd::TableRow => {
                    out.end_block()
                }
                TagEnd::Paragraph if item_depth == 0 => out.end_block(),
                TagEnd::Item => {
                    item_depth = item_depth.saturating_sub(1);
                    out.end_block();
                }
                TagEnd::HtmlBlock => {
                    in_html_block = false;
                    super::html::extract_fragment_into(&html_block, &mut out);
                }
                _ => {}
            },
            Event::Text(text) => {
                if in_metadata {
                    title = title.or_else(|| front_matter_title(&text));
                } else if in_html_block {
                    html_block.push_str(&text);
                } else {
                    out.push_inline(&text);
                }
            }
            Event::Code(code) => out.push_inline(&code),
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
