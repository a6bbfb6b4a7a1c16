//! Sentence windows: each sentence with up to `radius` neighbours on each side, clamped to
//! its section (a window never crosses a heading).

use std::ops::Range;

/// Index range (into the section's sentences) of the window around sentence `index`.
pub fn window_indices(index: usize, sentence_count: usize, radius: usize) -> Range<usize> {
    debug_assert!(index < sentence_count);
    index.saturating_sub(radius)..(index + radius + 1).min(sentence_count)
}

/// Byte range of the window around sentence `index`: from the start of its first sentence
/// to the end of its last, including whatever separates them in the citation text.
pub fn window_range(sentences: &[Range<usize>], index: usize, radius: usize) -> Range<usize> {
    let indices = window_indices(index, sentences.len(), radius);
    sentences[indices.start].start..sentences[indices.end - 1].end
}

/// Sentence indices of the window around sentence `index` of a section whose sentences
/// are `sentences` (byte ranges in `text`) with structure `units`: the radius window, grown
/// so that it never holds an item of a list (or a row of a table) without the sentence that
/// introduces the list, then by whole items of that list in order, while the window stays
/// within `max_tokens` estimated tokens. When the introduction cannot be reached within
/// them, a list the hit is not in is cut away from the window instead; a hit inside such a
/// list keeps its radius window. Without units, the radius window.
pub fn structured_window(
    text: &str,
    sentences: &[Range<usize>],
    units: &[crate::segmenter::Unit],
    index: usize,
    radius: usize,
    max_tokens: usize,
) -> Range<usize> {
    let base = window_indices(index, sentences.len(), radius);
    if units.len() != sentences.len() || units.iter().all(|u| u.group.is_none()) {
        return base;
    }
    let tokens = |range: &Range<usize>| {
        crate::tokens::estimate_tokens(
            &text[sentences[range.start].start..sentences[range.end - 1].end],
        )
    };
    // The end (exclusive) of the block of sentence `i`.
    let block_end = |i: usize| {
        let block = units[i].block;
        (i..sentences.len())
            .find(|&j| units[j].block != block)
            .unwrap_or(sentences.len())
    };
    let mut range = base.clone();
    let mut done: Vec<u32> = Vec::new();
    while let Some(group) = (range.clone())
        .filter_map(|i| units[i].group.or(units[i].leads))
        .find(|g| !done.contains(g))
    {
        done.push(group);
        let members: Vec<usize> = (0..sentences.len())
            .filter(|&i| units[i].group == Some(group))
            .collect();
        let (Some(&first), Some(&last)) = (members.first(), members.last()) else {
            continue;
        };
        let lead = (0..first).rev().find(|&i| units[i].leads == Some(group));
        let start = lead.unwrap_or(first);
        // The introduction, the items up to the window's last one (whole), the window.
        let through = (range.end - 1).max(start).min(last.max(range.end - 1));
        let wanted = range.start.min(start)..range.end.max(block_end(through.min(last)));
        if tokens(&wanted) <= max_tokens || wanted == range {
            range = wanted;
            // Then the list's next items, whole, while they fit.
            while range.end <= last {
                let next = range.start..block_end(range.end);
                if tokens(&next) > max_tokens {
                    break;
                }
                range = next;
            }
        } else if units[index].group == Some(group) || units[index].leads == Some(group) {
            // The hit is in the list (or introduces it) and the radius window around it
            // does not fit with the lead-in: the lead-in through the hit's item, then the
            // next items, as far as they fit; the radius window when even that is too long.
            let whole_item = start..block_end(index).max(index + 1);
            let required = if tokens(&whole_item) <= max_tokens {
                whole_item
            } else {
                start..index + 1
            };
            if tokens(&required) <= max_tokens {
                range = required;
                while range.end <= last {
                    let next = range.start..block_end(range.end);
                    if tokens(&next) > max_tokens {
                        break;
                    }
                    range = next;
                }
            }
        } else {
            // The list cannot come whole enough: the window stops short of it.
            if first > index {
                range.end = range.end.min(start).max(index + 1);
            } else {
                range.start = range.start.max(last + 1).min(index);
            }
        }
    }
    range
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn clamps_to_the_section() {
        assert_eq!(window_indices(0, 10, 3), 0..4);
        assert_eq!(window_indices(5, 10, 3), 2..9);
        assert_eq!(window_indices(9, 10, 3), 6..10);
        assert_eq!(window_indices(0, 1, 3), 0..1);
        assert_eq!(window_indices(2, 5, 0), 2..3);
    }

    fn section(
        blocks: &[(&str, Option<u32>, bool)],
    ) -> (String, Vec<Range<usize>>, Vec<crate::segmenter::Unit>) {
        let mut text = String::new();
        let mut sentences = Vec::new();
        let mut units = Vec::new();
        for (b, (sentence, group, leads)) in blocks.iter().enumerate() {
            if !text.is_empty() {
                text.push(' ');
            }
            sentences.push(text.len()..text.len() + sentence.len());
            text.push_str(sentence);
            units.push(crate::segmenter::Unit {
                block: b as u32,
                group: *group,
                leads: if *leads { Some(0) } else { None },
                line_start: None,
            });
        }
        (text, sentences, units)
    }

    #[test]
    fn a_window_with_a_list_item_holds_its_introduction_and_whole_list() {
        let (text, sentences, units) = section(&[
            ("Intro one.", None, false),
            ("Intro two.", None, false),
            ("Where you can book:", None, true),
            ("1. First.", Some(0), false),
            ("2. Second.", Some(0), false),
            ("3. Third.", Some(0), false),
            ("4. Fourth.", Some(0), false),
            ("5. Fifth.", Some(0), false),
            ("After.", None, false),
        ]);
        // A hit on the fifth item at radius 1: lead-in and every item.
        assert_eq!(
            structured_window(&text, &sentences, &units, 7, 1, 400),
            2..9
        );
        // A hit on the lead-in: the whole list follows it.
        assert_eq!(
            structured_window(&text, &sentences, &units, 2, 0, 400),
            2..8
        );
        // A cap too small for the list: a window after it that would hold its last items
        // without the lead-in stops short of the list.
        assert_eq!(structured_window(&text, &sentences, &units, 8, 2, 12), 8..9);
        // One that holds the lead-in already keeps what it holds.
        assert_eq!(structured_window(&text, &sentences, &units, 0, 3, 12), 0..4);
        // A hit inside it takes the lead-in through its item when they fit together
        // (here they do not: its radius window).
        assert_eq!(structured_window(&text, &sentences, &units, 6, 1, 12), 5..8);
        // A hit deep in the list whose radius window with the lead-in is too long, while
        // the lead-in through the hit is not: that, not the radius window.
        let cap = crate::tokens::estimate_tokens(&text[sentences[2].start..sentences[7].end]);
        assert!(cap < crate::tokens::estimate_tokens(&text[sentences[2].start..sentences[8].end]));
        assert_eq!(
            structured_window(&text, &sentences, &units, 7, 3, cap),
            2..8
        );
    }

    #[test]
    fn range_spans_first_to_last_sentence() {
        let sentences = [0..5, 6..10, 12..20, 21..30];
        assert_eq!(window_range(&sentences, 1, 1), 0..20);
        assert_eq!(window_range(&sentences, 3, 1), 12..30);
    }
}

/// Each whitespace-separated word of `text` with the character offset (Unicode scalar
/// values) where it starts.
fn words(text: &str) -> Vec<(usize, &str)> {
    let mut spans = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    for (chars, (byte, ch)) in text.char_indices().enumerate() {
        if ch.is_whitespace() {
            if let Some((c, b)) = start.take() {
                spans.push((c, &text[b..byte]));
            }
        } else if start.is_none() {
            start = Some((chars, byte));
        }
    }
    if let Some((c, b)) = start {
        spans.push((c, &text[b..]));
    }
    spans
}

/// `text`, or `max_words` of its words centred on the characters `focus` (half-open,
/// Unicode scalar values into `text`): the words of the focus and as many on each side as
/// fit, sliding at the ends; a focus longer than `max_words` keeps its first words. Words
/// are joined by single spaces. A model that truncates from the start would otherwise cut
/// a sentence in the middle of a long window.
pub fn excerpt(text: &str, focus: std::ops::Range<usize>, max_words: usize) -> String {
    let words = words(text);
    if words.len() <= max_words {
        return text.to_owned();
    }
    let first = words
        .iter()
        .position(|(start, w)| start + w.chars().count() > focus.start)
        .unwrap_or(0);
    let last = words
        .iter()
        .rposition(|(start, _)| *start < focus.end)
        .unwrap_or(first)
        .max(first);
    let span = last - first + 1;
    let (low, high) = if span >= max_words {
        (first, first + max_words)
    } else {
        let before = ((max_words - span) / 2).min(first);
        let high = (first - before + max_words).min(words.len());
        (high.saturating_sub(max_words), high)
    };
    words[low..high]
        .iter()
        .map(|(_, w)| *w)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod excerpt_tests {
    use super::excerpt;

    fn focus(text: &str, part: &str) -> std::ops::Range<usize> {
        let at = text[..text.find(part).expect("part")].chars().count();
        at..at + part.chars().count()
    }

    #[test]
    fn short_texts_are_kept_whole() {
        let text = "One two. Three four.";
        assert_eq!(excerpt(text, focus(text, "Three"), 10), text);
    }

    #[test]
    fn long_texts_are_cut_around_the_focus() {
        let text = "a1 a2 a3 a4 a5 a6 a7 a8. Match here now. b1 b2 b3 b4 b5 b6 b7 b8.";
        assert_eq!(
            excerpt(text, focus(text, "Match here now."), 7),
            "a7 a8. Match here now. b1 b2"
        );
        // At the start and the end, the cut slides instead of shrinking.
        assert_eq!(excerpt(text, focus(text, "a1 a2"), 4), "a1 a2 a3 a4");
        assert_eq!(excerpt(text, focus(text, "b7 b8."), 3), "b6 b7 b8.");
        // A focus longer than the budget: its first words.
        assert_eq!(
            excerpt(text, focus(text, "Match here now."), 2),
            "Match here"
        );
    }

    #[test]
    fn offsets_count_characters_not_bytes() {
        let text = "é é é é é é. Ünïcode match. ß ß ß ß ß ß.";
        assert_eq!(
            excerpt(text, focus(text, "Ünïcode match."), 4),
            "é. Ünïcode match. ß"
        );
    }
}
