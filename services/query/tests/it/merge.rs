//! Property tests of the window merge (DESIGN.md invariant 6): no sentence twice, the union
//! of ranges exact, never across a section, the token budget respected, rerank order
//! monotone.

use std::collections::{BTreeSet, HashSet};

use casement_query::search::expand::{Neighbours, narrow_around};
use casement_query::search::merge::{
    Budget, Matched, Window, WindowScore, apply_rerank, drop_contained, merge_capped,
    merge_overlapping, select,
};
use casement_text::window::window_indices;
use proptest::prelude::*;
use uuid::Uuid;

/// A synthetic document: sections of sentences separated by single spaces (so stitched
/// windows can be compared with the document text exactly), sections by a blank line.
#[derive(Debug, Clone)]
struct Doc {
    id: String,
    text: Vec<char>,
    /// Per section: the sentences' character ranges.
    sections: Vec<Vec<(usize, usize)>>,
}

fn doc(id: usize, counts: &[usize], words: &[usize]) -> Doc {
    let mut text = String::new();
    let mut sections = Vec::new();
    let mut w = 0;
    for (s, &count) in counts.iter().enumerate() {
        if s > 0 {
            text.push_str("\n\n");
        }
        let mut ranges = Vec::new();
        for i in 0..count {
            if i > 0 {
                text.push(' ');
            }
            let start = text.chars().count();
            let n = words[w % words.len()];
            w += 1;
            let sentence: Vec<String> = (0..n).map(|k| format!("d{id}s{s}i{i}w{k}")).collect();
            text.push_str(&sentence.join(" "));
            text.push('.');
            ranges.push((start, text.chars().count()));
        }
        sections.push(ranges);
    }
    Doc {
        id: format!("doc-{id}"),
        text: text.chars().collect(),
        sections,
    }
}

impl Doc {
    fn slice(&self, start: usize, end: usize) -> String {
        self.text[start..end].iter().collect()
    }

    fn window(&self, section: usize, index: usize, radius: usize, score: f32) -> Window {
        let ranges = &self.sections[section];
        let indices = window_indices(index, ranges.len(), radius);
        let (start, end) = (ranges[indices.start].0, ranges[indices.end - 1].1);
        let (s_start, s_end) = ranges[index];
        Window {
            doc_id: self.id.clone(),
            revision: 7,
            section_id: format!("section-{section}"),
            section_path: vec![format!("Heading {section}")],
            title: "T".into(),
            url: None,
            revision_url: None,
            tenant: None,
            metadata: Default::default(),
            sentences: indices.start as u32..indices.end as u32,
            char_start: start,
            char_end: end,
            text: self.slice(start, end),
            matches: vec![Matched {
                id: Uuid::new_v5(
                    &Uuid::NAMESPACE_OID,
                    format!("{}/{section}/{index}", self.id).as_bytes(),
                ),
                index: index as u32,
                sentence: self.slice(s_start, s_end),
                char_start: s_start,
                char_end: s_end,
                score,
                source: None,
            }],
            score,
            rerank: None,
            relevance: None,
            source: None,
            links: Vec::new(),
        }
    }
}

/// Documents, then distinct hits (a point is returned once per query) with scores.
fn case() -> impl Strategy<Value = (Vec<Doc>, Vec<Window>, usize)> {
    (
        prop::collection::vec(prop::collection::vec(1usize..12, 1..4), 1..4),
        prop::collection::vec(1usize..9, 1..8),
        0usize..4,
        prop::collection::vec((any::<prop::sample::Index>(), 0.0f32..1.0), 0..25),
    )
        .prop_map(|(shapes, words, radius, picks)| {
            let docs: Vec<Doc> = shapes
                .iter()
                .enumerate()
                .map(|(i, c)| doc(i, c, &words))
                .collect();
            let all: Vec<(usize, usize, usize)> = docs
                .iter()
                .enumerate()
                .flat_map(|(d, doc)| {
                    doc.sections
                        .iter()
                        .enumerate()
                        .flat_map(move |(s, r)| (0..r.len()).map(move |i| (d, s, i)))
                })
                .collect();
            let mut seen = HashSet::new();
            let windows = picks
                .into_iter()
                .filter_map(|(pick, score)| {
                    let (d, s, i) = all[pick.index(all.len())];
                    seen.insert((d, s, i))
                        .then(|| docs[d].window(s, i, radius, score))
                })
                .collect();
            (docs, windows, radius)
        })
}

fn indices(w: &Window) -> BTreeSet<(String, String, u32)> {
    w.sentences
        .clone()
        .map(|i| (w.doc_id.clone(), w.section_id.clone(), i))
        .collect()
}

proptest! {
    /// With a cap, merged windows are cut between matches: every match is kept exactly
    /// once, windows of a section never overlap, text stays exact, and a window past the
    /// cap holds a single match.
    #[test]
    fn capped_merges_keep_every_match_and_never_overlap((docs, windows, _radius) in case(), cap in 5usize..60) {
        let input_ids: BTreeSet<Uuid> = windows.iter().flat_map(|w| w.matches.iter().map(|m| m.id)).collect();
        let (merged, _) = merge_capped(windows.clone(), WindowScore::Best, cap);
        let ids: Vec<Uuid> = merged.iter().flat_map(|w| w.matches.iter().map(|m| m.id)).collect();
        prop_assert_eq!(ids.len(), input_ids.len());
        prop_assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), input_ids);
        for (i, a) in merged.iter().enumerate() {
            let doc = docs.iter().find(|d| d.id == a.doc_id).expect("doc");
            prop_assert_eq!(&a.text, &doc.slice(a.char_start, a.char_end));
            prop_assert!(a.tokens() <= cap || a.matches.len() == 1, "{} tokens, {} matches", a.tokens(), a.matches.len());
            prop_assert!(!a.matches.is_empty());
            for m in &a.matches {
                prop_assert!(a.sentences.contains(&m.index));
            }
            for b in &merged[i + 1..] {
                if a.doc_id == b.doc_id && a.section_id == b.section_id {
                    prop_assert!(a.sentences.end <= b.sentences.start || b.sentences.end <= a.sentences.start, "{:?} {:?}", a.sentences, b.sentences);
                }
            }
        }
        // No cap: the uncapped merge.
        prop_assert_eq!(merge_capped(windows.clone(), WindowScore::Best, usize::MAX), merge_overlapping(windows, WindowScore::Best));
    }

    #[test]
    fn merged_windows_are_the_exact_union_within_sections((docs, windows, _radius) in case()) {
        let input_union: BTreeSet<_> = windows.iter().flat_map(indices).collect();
        let input_ids: BTreeSet<Uuid> = windows.iter().flat_map(|w| w.matches.iter().map(|m| m.id)).collect();
        let best = windows.iter().map(|w| w.score).fold(f32::MIN, f32::max);
        let (merged, absorbed) = merge_overlapping(windows.clone(), WindowScore::Best);
        prop_assert_eq!(merged.len() + absorbed, windows.len());

        // No sentence twice; every match kept.
        let mut ids = Vec::new();
        let mut covered = Vec::new();
        for w in &merged {
            ids.extend(w.matches.iter().map(|m| m.id));
            covered.extend(indices(w));
        }
        prop_assert_eq!(ids.len(), input_ids.len());
        prop_assert_eq!(ids.iter().copied().collect::<BTreeSet<_>>(), input_ids);
        prop_assert_eq!(covered.len(), input_union.len(), "windows overlap");
        prop_assert_eq!(covered.into_iter().collect::<BTreeSet<_>>(), input_union);

        for w in &merged {
            let doc = docs.iter().find(|d| d.id == w.doc_id).expect("doc");
            let section: usize = w.section_id.trim_start_matches("section-").parse().expect("section");
            let ranges = &doc.sections[section];
            // Within its section, text exact, matches inside, sorted.
            prop_assert!(w.sentences.end as usize <= ranges.len());
            prop_assert_eq!(w.char_start, ranges[w.sentences.start as usize].0);
            prop_assert_eq!(w.char_end, ranges[w.sentences.end as usize - 1].1);
            prop_assert_eq!(&w.text, &doc.slice(w.char_start, w.char_end));
            for m in &w.matches {
                prop_assert!(w.sentences.contains(&m.index));
                prop_assert_eq!(&m.sentence, &doc.slice(m.char_start, m.char_end));
            }
            prop_assert!(w.matches.windows(2).all(|p| p[0].char_start < p[1].char_start));
            let top = w.matches.iter().map(|m| m.score).fold(f32::MIN, f32::max);
            prop_assert_eq!(w.score, top);
        }
        // Windows of one section neither overlap nor touch after the merge.
        for (i, a) in merged.iter().enumerate() {
            for b in &merged[i + 1..] {
                if a.doc_id == b.doc_id && a.section_id == b.section_id {
                    prop_assert!(a.sentences.end < b.sentences.start || b.sentences.end < a.sentences.start);
                }
            }
        }
        prop_assert!(merged.windows(2).all(|p| p[0].score >= p[1].score));
        if let Some(first) = merged.first() {
            prop_assert_eq!(first.score, best);
        }
        // Scored by the sum of the matches: the same windows, ranked by that sum.
        let (summed, _) = merge_overlapping(windows.clone(), WindowScore::Sum);
        prop_assert_eq!(summed.len(), merged.len());
        for w in &summed {
            let sum: f32 = w.matches.iter().map(|m| m.score).sum();
            prop_assert!((w.score - sum).abs() <= 1e-6 * sum.abs().max(1.0));
        }
        prop_assert!(summed.windows(2).all(|p| p[0].score >= p[1].score));
    }

    #[test]
    fn containment_budget_and_rerank((docs, windows, _radius) in case(),
                                     threshold in 0.3f32..1.0,
                                     top_k in 1usize..10,
                                     budget in 1usize..400,
                                     seed in any::<u64>()) {
        let (merged, _) = merge_overlapping(windows, WindowScore::Best);
        let (kept, dropped) = drop_contained(merged.clone(), threshold);
        prop_assert_eq!(kept.len() + dropped, merged.len());
        // Order kept; the best window always stays.
        prop_assert_eq!(kept.first().map(|w| w.score), merged.first().map(|w| w.score));

        let scores: Vec<f32> = (0..kept.len().min(5))
            .map(|i| ((seed.wrapping_mul(i as u64 + 1) >> 7) % 1000) as f32 / 1000.0)
            .collect();
        let reranked = apply_rerank(kept.clone(), &scores);
        prop_assert_eq!(reranked.len(), kept.len());
        let scored: Vec<f32> = reranked.iter().map_while(|w| w.rerank).collect();
        prop_assert_eq!(scored.len(), scores.len());
        prop_assert!(scored.windows(2).all(|p| p[0] >= p[1]), "rerank scores not monotone: {:?}", scored);
        prop_assert!(reranked[scored.len()..].iter().all(|w| w.rerank.is_none()));

        // Without sentence ranges nothing can be narrowed: the answer is a prefix.
        for policy in [Budget::Cap, Budget::Share] {
            let (answer, cut, narrowed) = select(reranked.clone(), top_k, budget, &Neighbours::new(), policy);
            prop_assert_eq!(narrowed, 0);
            prop_assert!(answer.len() <= top_k);
            prop_assert!(answer.iter().map(Window::tokens).sum::<usize>() <= budget);
            prop_assert_eq!(answer.len() + cut, reranked.len().min(top_k));
            prop_assert_eq!(&answer[..], &reranked[..answer.len()]);
        }
        let prefix = select(reranked.clone(), top_k, budget, &Neighbours::new(), Budget::Cap).0;

        // With them, windows that do not fit are narrowed: still within the budget, in the
        // same order, each inside the window it came from and keeping its best match and
        // score; at least as many windows as the prefix. The cap returns as many windows as
        // fit at their narrowest (top_k whenever their best matches fit together).
        for policy in [Budget::Cap, Budget::Share] {
            let (answer, cut, narrowed) = select(reranked.clone(), top_k, budget, &neighbours(&docs), policy);
            prop_assert!(answer.len() >= prefix.len());
            prop_assert!(answer.iter().map(Window::tokens).sum::<usize>() <= budget);
            prop_assert_eq!(answer.len() + cut, reranked.len().min(top_k));
            prop_assert!(narrowed <= answer.len());
            for (got, from) in answer.iter().zip(&reranked) {
                prop_assert_eq!((&got.doc_id, &got.section_id), (&from.doc_id, &from.section_id));
                prop_assert!(got.sentences.start >= from.sentences.start && got.sentences.end <= from.sentences.end);
                prop_assert_eq!(got.score, from.score);
                let best = from.matches.iter().max_by(|a, b| a.score.total_cmp(&b.score)).map(|m| m.score);
                prop_assert_eq!(got.matches.iter().map(|m| m.score).fold(None, |b: Option<f32>, s| Some(b.map_or(s, |b| b.max(s)))), best);
            }
            prop_assert_eq!(answer.iter().filter(|w| !reranked.contains(w)).count(), narrowed);
            if policy == Budget::Cap {
                let narrowest: Vec<usize> = reranked
                    .iter()
                    .take(top_k)
                    .map(|w| {
                        let best = w.matches.iter().max_by(|a, b| a.score.total_cmp(&b.score).then(b.index.cmp(&a.index)));
                        best.map_or(w.tokens(), |m| narrow_around(w.clone(), m.index, 0, &neighbours(&docs)).tokens())
                    })
                    .collect();
                let fit = narrowest
                    .iter()
                    .scan(0usize, |sum, t| { *sum += t; Some(*sum) })
                    .take_while(|sum| *sum <= budget)
                    .count();
                prop_assert_eq!(answer.len(), fit);
            }
        }
    }
}

/// Every sentence's character range, as the store's records give them.
fn neighbours(docs: &[Doc]) -> Neighbours {
    let mut all = Neighbours::new();
    for doc in docs {
        for (s, ranges) in doc.sections.iter().enumerate() {
            for (i, range) in ranges.iter().enumerate() {
                all.insert(
                    (None, doc.id.clone(), format!("section-{s}"), i as u32),
                    *range,
                );
            }
        }
    }
    all
}

proptest! {
    /// Narrowing a merged window (to fit a token budget) around one of its matches gives
    /// the exact text of the sentences `radius` each side of it, clamped to the window,
    /// with only the matches inside and their best score.
    #[test]
    fn narrowing_cuts_the_exact_sentences_around_a_match((docs, windows, _radius) in case(),
                                                          pick in any::<prop::sample::Index>(),
                                                          radius in 0usize..4) {
        let (merged, _) = merge_overlapping(windows, WindowScore::Best);
        prop_assume!(!merged.is_empty());
        let window = merged[pick.index(merged.len())].clone();
        let centre = window.matches[pick.index(window.matches.len())].index;
        let narrowed = narrow_around(window.clone(), centre, radius, &neighbours(&docs));
        let start = (centre as usize).saturating_sub(radius).max(window.sentences.start as usize);
        let end = (centre as usize + radius + 1).min(window.sentences.end as usize);
        prop_assert_eq!(narrowed.sentences.clone(), start as u32..end as u32);
        let doc = docs.iter().find(|d| d.id == window.doc_id).expect("doc");
        prop_assert_eq!(&narrowed.text, &doc.slice(narrowed.char_start, narrowed.char_end));
        prop_assert!(narrowed.char_start >= window.char_start && narrowed.char_end <= window.char_end);
        prop_assert!(narrowed.matches.iter().any(|m| m.index == centre));
        prop_assert!(narrowed.matches.iter().all(|m| narrowed.sentences.contains(&m.index)));
        let inside = window.matches.iter().filter(|m| narrowed.sentences.contains(&m.index)).count();
        prop_assert_eq!(narrowed.matches.len(), inside);
        prop_assert_eq!(narrowed.score, window.score);
        prop_assert!(narrowed.tokens() <= window.tokens());
    }
}

#[test]
fn a_near_duplicate_in_another_document_is_dropped() {
    let a = doc(1, &[5], &[6]);
    let mut copy = a.clone();
    copy.id = "copy".into();
    let first = a.window(0, 2, 2, 0.9);
    let mut second = copy.window(0, 2, 2, 0.5);
    second.text = first.text.replace("w0", "changed");
    let (kept, dropped) = drop_contained(vec![first.clone(), second], 0.6);
    assert_eq!((kept.len(), dropped), (1, 1));
    assert_eq!(kept[0], first);
}

#[test]
fn touching_windows_merge_and_distant_ones_do_not() {
    let d = doc(0, &[12], &[3]);
    // Radius 1: sentence 1 covers 0..3, sentence 4 covers 3..6 (touching), 9 covers 8..11.
    let windows = vec![
        d.window(0, 1, 1, 0.3),
        d.window(0, 4, 1, 0.8),
        d.window(0, 9, 1, 0.5),
    ];
    let (merged, absorbed) = merge_overlapping(windows, WindowScore::Best);
    assert_eq!(absorbed, 1);
    assert_eq!(merged.len(), 2);
    assert_eq!(merged[0].sentences, 0..6);
    assert_eq!(merged[0].score, 0.8);
    assert_eq!(merged[0].matches.len(), 2);
    assert_eq!(merged[1].sentences, 8..11);
}
