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

#[cfg(test)]
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
