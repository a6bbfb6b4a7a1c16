#![allow(clippy::unwrap_used)]
use super::*;

#[test]
fn list_items_are_marked_and_joined_by_one_line_break() {
    let mut out = TextBuilder::new();
    out.start_block(BlockKind::Paragraph);
    out.push_inline("Book here:");
    let list = out.new_group();
    out.start_block_in(BlockKind::ListItem, Some(list), "1. ".into());
    out.push_inline("First.");
    out.start_block_in(BlockKind::ListItem, Some(list), "  - ".into());
    out.push_inline("Nested.");
    out.start_block_in(BlockKind::ListItem, Some(list), "2. ".into());
    out.push_inline("  ");
    out.start_block_in(BlockKind::ListItem, Some(list), "2. ".into());
    out.push_inline("Second.");
    out.start_block(BlockKind::Paragraph);
    out.push_inline("After.");
    let text = out.finish(None);
    assert_eq!(
        text.text,
        "Book here:\n\n1. First.\n  - Nested.\n2. Second.\n\nAfter."
    );
    let items: Vec<_> = text.blocks.iter().map(|b| text.block_text(b)).collect();
    assert_eq!(
        items,
        ["Book here:", "First.", "Nested.", "Second.", "After."]
    );
    assert_eq!(
        &text.text[text.blocks[2].line_start..text.blocks[2].range.end],
        "  - Nested."
    );
}

#[test]
fn sources_and_links_follow_the_text() {
    let mut out = TextBuilder::new();
    out.set_source(10..20);
    out.push_inline("Follow ");
    out.start_link("https://example.org/steps");
    out.set_source(21..31);
    out.push_inline("these steps");
    out.end_link();
    out.set_source(32..33);
    out.push_inline(".");
    let text = out.finish(None);
    assert_eq!(text.text, "Follow these steps.");
    assert_eq!(text.links.len(), 1);
    assert_eq!(&text.text[text.links[0].range.clone()], "these steps");
    assert_eq!(text.source_range(0..6), Some(10..20));
    assert_eq!(text.source_range(0..19), Some(10..33));
    assert_eq!(text.source_range(7..18), Some(21..31));
}
