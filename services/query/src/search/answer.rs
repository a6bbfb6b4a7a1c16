//! Answer: a selected window as the API returns it, with its matched sentences, scores
//! and character offsets.

use super::merge::Window;
use crate::api::{MatchAnswer, Scores, WindowAnswer};

pub fn answer(window: Window) -> WindowAnswer {
    let tokens = window.tokens();
    WindowAnswer {
        doc_id: window.doc_id,
        title: window.title,
        url: window.url,
        tenant: window.tenant,
        metadata: window.metadata,
        section_path: window.section_path,
        revision: window.revision,
        text: window.text,
        char_start: window.char_start,
        char_end: window.char_end,
        matches: window
            .matches
            .into_iter()
            .map(|m| MatchAnswer {
                sentence: m.sentence,
                char_start: m.char_start,
                char_end: m.char_end,
                score: m.score,
            })
            .collect(),
        scores: Scores {
            fused: window.score,
            rerank: window.rerank,
        },
        tokens,
    }
}
