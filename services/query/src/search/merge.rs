//! Merge of sentence windows (DESIGN.md "Query", invariant 6). Pure functions, so that the
//! rules are tested on their own (`tests/it/merge.rs` has the property tests):
//!
//! 1. [`merge_overlapping`]: windows of the same document section whose sentence ranges
//!    overlap or touch become one window covering their union, with every matched sentence
//!    and the best score. Windows never merge across sections (or revisions).
//! 2. [`drop_contained`]: a window whose tokens are mostly (`threshold`) contained in a
//!    higher-scoring window is dropped (near-duplicate pages, copied paragraphs).
//! 3. [`select`]: the answer takes windows in order up to `top_k` within the token budget;
//!    when they do not fit whole, a budget the client asked for is shared out (each window
//!    from its best match, widening in rounds); the server's cap keeps as many windows as
//!    fit at their narrowest and the best of them whole (`select.rs`).

use std::collections::HashMap;
use std::ops::Range;

use uuid::Uuid;

mod select;
pub use select::{Budget, select};

/// A sentence that matched the query, inside a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub id: Uuid,
    /// Index of the sentence in its section.
    pub index: u32,
    pub sentence: String,
    pub char_start: usize,
    pub char_end: usize,
    /// Fused retrieval score of this sentence.
    pub score: f32,
    /// Characters of the submitted content that produced the sentence, when known.
    pub source: Option<(usize, usize)>,
}

/// A window of consecutive sentences of one section of one document revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub doc_id: String,
    pub revision: u64,
    pub section_id: String,
    pub section_path: Vec<String>,
    pub title: String,
    pub url: Option<String>,
    /// The address of the revision (`SentenceRecord::revision_url`).
    pub revision_url: Option<String>,
    pub tenant: Option<String>,
    /// The document's metadata (the event's), as stored with every point.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Sentence indices in the section (half-open).
    pub sentences: Range<u32>,
    /// Characters of the document this window covers (half-open) and their text.
    pub char_start: usize,
    pub char_end: usize,
    pub text: String,
    /// Sorted by position, no sentence twice.
    pub matches: Vec<Matched>,
    /// The window's score from its matches' fused scores (`WindowScore`; the best by
    /// default), by which windows are ordered before any rerank.
    pub score: f32,
    pub rerank: Option<f32>,
    /// Similarity of the closest matched sentence and calibrated relevance, once scored.
    pub relevance: Option<(f32, f32)>,
    /// Characters of the submitted content that produced the window, when known.
    pub source: Option<(usize, usize)>,
    /// Links inside the window, by characters of the document's citation text.
    pub links: Vec<casement_text::records::RecordLink>,
}

impl Window {
    pub fn tokens(&self) -> usize {
        casement_text::estimate_tokens(&self.text)
    }

    fn group(&self) -> (&str, u64, &str) {
        (&self.doc_id, self.revision, &self.section_id)
    }

    /// Absorbs `other` (same section, sentence ranges overlapping or touching).
    fn absorb(&mut self, other: Window) {
        debug_assert_eq!(self.group(), other.group());
        if other.char_start < self.char_start {
            let mut other = other;
            std::mem::swap(self, &mut other);
            self.absorb(other);
            return;
        }
        if other.char_end > self.char_end {
            // `other` starts inside this window, or after it across the separator between
            // two touching windows, which neither text holds: kept as spaces of its length.
            let gap = other.char_start.saturating_sub(self.char_end);
            self.text.extend(std::iter::repeat_n(' ', gap));
            let skip = self.char_end.saturating_sub(other.char_start);
            self.text.extend(other.text.chars().skip(skip));
            self.char_end = other.char_end;
        }
        self.sentences = self.sentences.start.min(other.sentences.start)
            ..self.sentences.end.max(other.sentences.end);
        self.score = self.score.max(other.score);
        self.source = match (self.source, other.source) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        for link in other.links {
            if !self.links.contains(&link) {
                self.links.push(link);
            }
        }
        self.links.sort_by_key(|l| (l.start, l.end));
        for matched in other.matches {
            match self.matches.iter_mut().find(|m| m.id == matched.id) {
                Some(existing) => existing.score = existing.score.max(matched.score),
                None => self.matches.push(matched),
            }
        }
        self.matches.sort_by_key(|m| (m.char_start, m.index));
    }
}

/// Best score first; ties in document order, so answers are deterministic.
pub fn by_score(a: &Window, b: &Window) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.doc_id.cmp(&b.doc_id))
        .then(a.char_start.cmp(&b.char_start))
}

/// How a merged window is scored from its matched sentences' fused scores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowScore {
    /// The best match's score.
    #[default]
    Best,
    /// The sum of the matches' scores: a window where several sentences matched ranks
    /// above one where a single sentence matched as well.
    Sum,
}

impl WindowScore {
    pub fn of(self, matches: &[Matched]) -> f32 {
        match self {
            Self::Best => matches.iter().map(|m| m.score).fold(f32::MIN, f32::max),
            Self::Sum => matches.iter().map(|m| m.score).sum(),
        }
    }
}

/// Rule 1. Returns the merged windows, best score first (scored by `rule`), and how many
/// input windows were absorbed into another.
pub fn merge_overlapping(windows: Vec<Window>, rule: WindowScore) -> (Vec<Window>, usize) {
    merge_capped(windows, rule, usize::MAX)
}

/// [`merge_overlapping`], where a merged window longer than `max_tokens` (estimated) is cut
/// into windows that are not, between its matched sentences: each piece holds whole
/// sentences and at least one match, pieces do not overlap, and every match is in one. So
/// many hits in one long section give several windows, not one that holds the section.
pub fn merge_capped(
    windows: Vec<Window>,
    rule: WindowScore,
    max_tokens: usize,
) -> (Vec<Window>, usize) {
    let total = windows.len();
    let mut groups: HashMap<(String, u64, String), Vec<Window>> = HashMap::new();
    for window in windows {
        let key = (
            window.doc_id.clone(),
            window.revision,
            window.section_id.clone(),
        );
        groups.entry(key).or_default().push(window);
    }
    let mut merged = Vec::with_capacity(groups.len());
    for (_, mut group) in groups {
        group.sort_by_key(|w| (w.sentences.start, w.sentences.end));
        let mut group = group.into_iter();
        let Some(mut current) = group.next() else {
            continue;
        };
        for next in group {
            if next.sentences.start <= current.sentences.end {
                current.absorb(next);
            } else {
                merged.push(std::mem::replace(&mut current, next));
            }
        }
        merged.push(current);
    }
    let absorbed = total - merged.len();
    let mut pieces = Vec::with_capacity(merged.len());
    for window in merged {
        if window.tokens() <= max_tokens || window.matches.len() < 2 {
            pieces.push(window);
        } else {
            pieces.extend(window.cut(max_tokens));
        }
    }
    for window in &mut pieces {
        window.score = rule.of(&window.matches);
    }
    pieces.sort_by(by_score);
    let split = pieces.len().saturating_sub(total - absorbed);
    (pieces, absorbed.saturating_sub(split))
}

impl Window {
    /// Cuts this window before matched sentences so that each piece stays within
    /// `max_tokens` where it can (a piece holds at least one match; the first piece starts
    /// where the window does, the last ends where it does).
    fn cut(self, max_tokens: usize) -> Vec<Window> {
        let chars: Vec<char> = self.text.chars().collect();
        let n = self.matches.len();
        // Where match `i` starts in `chars` (`n`: the end).
        let offset = |i: usize| {
            self.matches.get(i).map_or(chars.len(), |m| {
                m.char_start
                    .saturating_sub(self.char_start)
                    .min(chars.len())
            })
        };
        let slice = |a: usize, b: usize| chars[a..b.max(a)].iter().collect::<String>();
        let mut pieces = Vec::new();
        let mut first = 0;
        while first < n {
            let from = if first == 0 { 0 } else { offset(first) };
            let mut end = first + 1;
            while end < n
                && casement_text::estimate_tokens(&slice(from, offset(end + 1))) <= max_tokens
            {
                end += 1;
            }
            let to = offset(end);
            let text = trim_marker(slice(from, to).trim_end());
            let char_start = self.char_start + from;
            let char_end = char_start + text.chars().count();
            pieces.push(Window {
                sentences: if first == 0 {
                    self.sentences.start
                } else {
                    self.matches[first].index
                }..if end == n {
                    self.sentences.end
                } else {
                    self.matches[end].index
                },
                char_start,
                char_end,
                text,
                matches: self.matches[first..end].to_vec(),
                links: self
                    .links
                    .iter()
                    .filter(|l| char_start <= l.start && l.end <= char_end)
                    .cloned()
                    .collect(),
                ..self.clone()
            });
            first = end;
        }
        pieces
    }
}

/// `text` without a list marker left dangling on its last line (a piece cut before an
/// item's sentence keeps the text up to it, the item's marker included).
fn trim_marker(text: &str) -> String {
    let last = text.rsplit('\n').next().unwrap_or("");
    let marker = last.trim();
    let is_marker = marker == "-"
        || (marker.ends_with('.')
            && marker.len() > 1
            && marker[..marker.len() - 1]
                .chars()
                .all(|c| c.is_ascii_digit()));
    if is_marker && text.len() > last.len() {
        text[..text.len() - last.len()].trim_end().to_owned()
    } else {
        text.to_owned()
    }
}

fn token_counts(text: &str) -> HashMap<String, u32> {
    let mut counts = HashMap::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    counts
}

/// Share of `inner`'s tokens (with multiplicity) that `outer` also has.
pub fn containment(inner: &HashMap<String, u32>, outer: &HashMap<String, u32>) -> f32 {
    let total: u32 = inner.values().sum();
    if total == 0 {
        return 0.0;
    }
    let shared: u32 = inner
        .iter()
        .map(|(token, &n)| n.min(outer.get(token).copied().unwrap_or(0)))
        .sum();
    shared as f32 / total as f32
}

/// Rule 2, over windows sorted best first. Returns the kept windows and the dropped count.
pub fn drop_contained(windows: Vec<Window>, threshold: f32) -> (Vec<Window>, usize) {
    let mut kept: Vec<(Window, HashMap<String, u32>)> = Vec::with_capacity(windows.len());
    let mut dropped = 0;
    for window in windows {
        let tokens = token_counts(&window.text);
        if kept
            .iter()
            .any(|(_, better)| containment(&tokens, better) >= threshold)
        {
            dropped += 1;
        } else {
            kept.push((window, tokens));
        }
    }
    (kept.into_iter().map(|(w, _)| w).collect(), dropped)
}

/// Orders windows by their rerank scores (best first; ties keep the retrieval order) and
/// records the scores. `scores[i]` belongs to `windows[i]`; windows past `scores.len()`
/// (beyond the rerank candidate count) follow in retrieval order, unscored.
pub fn apply_rerank(windows: Vec<Window>, scores: &[f32]) -> Vec<Window> {
    let order = casement_inference::order_by_score(scores);
    let mut slots: Vec<Option<Window>> = windows.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len());
    for &i in &order {
        if let Some(mut window) = slots[i].take() {
            window.rerank = Some(scores[i]);
            out.push(window);
        }
    }
    out.extend(slots.into_iter().flatten());
    out
}
