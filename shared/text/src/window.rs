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
