//! What the reranker reads of a window: at most `max_words` words around its best match
//! (`casement_text::window::excerpt`). Rerank models truncate their input from the start,
//! which would cut the match out of a long window; centring on it keeps the match and the
//! context on both sides.

use super::merge::Window;

/// The window's text, or `max_words` of its words centred on its best-scoring match.
pub fn rerank_text(window: &Window, max_words: usize) -> String {
    let focus = window
        .matches
        .iter()
        .max_by(|a, b| a.score.total_cmp(&b.score))
        .map_or(0..0, |m| {
            m.char_start.saturating_sub(window.char_start)
                ..m.char_end.saturating_sub(window.char_start)
        });
    casement_text::window::excerpt(&window.text, focus, max_words)
}
