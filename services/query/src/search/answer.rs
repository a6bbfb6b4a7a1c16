//! Answer: a selected window as the API returns it, with its matched sentences, scores
//! and character offsets.

use super::merge::Window;
use crate::api::{LinkAnswer, MatchAnswer, Scores, WindowAnswer};

/// `url` resolved against the document's own address when it is relative (a wiki link's
/// page name, a handbook's `/path/`); as written otherwise.
pub fn resolve(base: Option<&str>, url: &str) -> String {
    if let Ok(absolute) = url::Url::parse(url) {
        return absolute.to_string();
    }
    base.and_then(|b| url::Url::parse(b).ok())
        .and_then(|b| b.join(url).ok())
        .map_or_else(|| url.to_owned(), |u| u.to_string())
}

pub fn answer(window: Window) -> WindowAnswer {
    let tokens = window.tokens();
    let chars: Vec<char> = window.text.chars().collect();
    let links = window
        .links
        .iter()
        .filter(|l| window.char_start <= l.start && l.end <= window.char_end)
        .map(|l| {
            let (start, end) = (l.start - window.char_start, l.end - window.char_start);
            LinkAnswer {
                text: chars[start.min(chars.len())..end.min(chars.len())]
                    .iter()
                    .collect(),
                url: resolve(window.url.as_deref(), &l.url),
                start,
                end,
            }
        })
        .collect();
    WindowAnswer {
        source_start: window.source.map(|s| s.0),
        source_end: window.source.map(|s| s.1),
        links,
        doc_id: window.doc_id,
        title: window.title,
        url: window.url,
        revision_url: window.revision_url,
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
                source_start: m.source.map(|s| s.0),
                source_end: m.source.map(|s| s.1),
                score: m.score,
            })
            .collect(),
        scores: Scores {
            fused: window.score,
            rerank: window.rerank,
            similarity: window.relevance.map_or(0.0, |r| r.0),
            relevance: window.relevance.map_or(0.0, |r| r.1),
        },
        tokens,
    }
}
