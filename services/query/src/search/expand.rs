//! Expansion of each sentence hit to its window, clamped to its section. At the indexed
//! radius the window is the one stored in the hit's payload. A smaller radius needs the
//! neighbours' character ranges: the hit documents' records are read once per request
//! and the narrower window is cut out of the stored one.

use std::collections::HashMap;

use casement_store::{Hit, Store};
use casement_text::DocRef;
use casement_text::window::window_indices;

use super::merge::{Matched, Window};
use crate::error::ApiError;

/// The window stored with a hit (the indexed radius).
pub fn stored_window(hit: Hit, indexed_radius: usize) -> Window {
    let r = hit.record;
    let index = r.position.index as usize;
    let count = (r.position.count as usize).max(index + 1);
    // The window's own sentences when the record says (a list's window is wider than
    // the radius), else the radius window.
    let range = match r.cite.window_sentences {
        Some([start, end]) if start as usize <= index && index < end as usize => {
            start as usize..end as usize
        }
        _ => window_indices(index, count, indexed_radius),
    };
    let pair = |a: Option<usize>, b: Option<usize>| Some((a?, b?));
    Window {
        source: pair(r.cite.window_source_start, r.cite.window_source_end),
        links: r.cite.links,
        sentences: range.start as u32..range.end as u32,
        char_start: r.window_char_start,
        char_end: r.window_char_end,
        text: r.window,
        matches: vec![Matched {
            id: r.id,
            index: r.position.index,
            sentence: r.sentence,
            char_start: r.char_start,
            char_end: r.char_end,
            score: hit.score,
            source: pair(r.cite.source_start, r.cite.source_end),
        }],
        score: hit.score,
        rerank: None,
        relevance: None,
        doc_id: r.doc_id,
        revision: r.revision,
        section_id: r.section_id,
        section_path: r.section_path,
        title: r.title,
        url: r.url,
        revision_url: r.revision_url,
        tenant: r.tenant,
        metadata: r.metadata,
    }
}

/// Character ranges of sentences, by (tenant, document id, section id, index).
pub type Neighbours = HashMap<(Option<String>, String, String, u32), (usize, usize)>;

/// Narrows a stored window to `radius` around its hit using the neighbours' ranges; keeps
/// the stored window if a neighbour is missing (the document is being rewritten right now).
pub fn narrow(window: Window, radius: usize, neighbours: &Neighbours) -> Window {
    let Some(centre) = window.matches.first().map(|m| m.index) else {
        return window;
    };
    narrow_around(window, centre, radius, neighbours)
}

/// Narrows a window to `radius` sentences each side of sentence `centre` (within the
/// window), keeping only the matches inside and the window's score; the window itself when
/// a neighbour's range is missing.
pub fn narrow_around(
    window: Window,
    centre: u32,
    radius: usize,
    neighbours: &Neighbours,
) -> Window {
    let index = centre as usize;
    let start = index.saturating_sub(radius);
    let end = (index + radius + 1).min(window.sentences.end as usize);
    let start = start.max(window.sentences.start as usize);
    if start >= end {
        return window;
    }
    let range = |i: usize| {
        neighbours
            .get(&(
                window.tenant.clone(),
                window.doc_id.clone(),
                window.section_id.clone(),
                i as u32,
            ))
            .copied()
    };
    let (Some((char_start, _)), Some((_, char_end))) = (range(start), range(end - 1)) else {
        return window;
    };
    if char_start < window.char_start || char_end > window.char_end || char_start > char_end {
        return window;
    }
    let text = window
        .text
        .chars()
        .skip(char_start - window.char_start)
        .take(char_end - char_start)
        .collect();
    let sentences = start as u32..end as u32;
    let matches: Vec<_> = window
        .matches
        .into_iter()
        .filter(|m| sentences.contains(&m.index))
        .collect();
    let links = window
        .links
        .iter()
        .filter(|l| char_start <= l.start && l.end <= char_end)
        .cloned()
        .collect();
    // The score stays the one the window was ranked by; the source range stays the
    // stored window's (it holds the narrower one).
    Window {
        sentences,
        char_start,
        char_end,
        text,
        matches,
        links,
        ..window
    }
}

/// The sentence ranges of the given documents at the given revisions (one store read per
/// document): what narrowing needs.
pub async fn neighbours<S: Store>(
    store: &S,
    revisions: &HashMap<DocRef<'_>, u64>,
) -> Result<Neighbours, ApiError> {
    let mut neighbours = Neighbours::new();
    for (&doc, &revision) in revisions {
        // Only the neighbours of the revision the windows were cut from: the document may
        // be rewritten between the search and this read.
        for record in store
            .records(doc)
            .await
            .map_err(ApiError::store)?
            .into_iter()
            .filter(|r| r.revision == revision)
        {
            neighbours.insert(
                (
                    record.tenant,
                    record.doc_id,
                    record.section_id,
                    record.position.index,
                ),
                (record.char_start, record.char_end),
            );
        }
    }
    Ok(neighbours)
}

/// Every hit as a window of `radius` sentences each side (at most the indexed radius).
pub async fn expand<S: Store>(
    store: &S,
    hits: Vec<Hit>,
    radius: usize,
    indexed_radius: usize,
) -> Result<Vec<Window>, ApiError> {
    let windows: Vec<Window> = hits
        .into_iter()
        .map(|hit| stored_window(hit, indexed_radius))
        .collect();
    if radius >= indexed_radius {
        return Ok(windows);
    }
    let revisions: HashMap<DocRef<'_>, u64> = windows
        .iter()
        .map(|w| (DocRef::new(w.tenant.as_deref(), &w.doc_id), w.revision))
        .collect();
    let neighbours = neighbours(store, &revisions).await?;
    Ok(windows
        .into_iter()
        .map(|w| narrow(w, radius, &neighbours))
        .collect())
}
