//! Rule 3 of the merge: the answer's windows within the token budget (`select`).

use super::Window;
use crate::search::expand::{Neighbours, narrow_around};

/// How [`select`] fits windows into the token budget when they do not fit whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// The server's cap (`search.token_budget`): as many of the `top_k` windows as fit at
    /// their narrowest (the best match alone); each, in rank order, as wide as the room
    /// left after the narrowest of those still to come: whole while it fits, else narrowed
    /// around its best match. The best windows stay whole and `top_k` is met when it can be.
    Cap,
    /// The room the client asked for (`token_budget`): shared out over the windows. Each
    /// starts as its best-scoring match alone, windows are taken in rank order while those
    /// fit, then they widen one sentence each side per round, in rank order, back towards
    /// their merged extent, until the next widening would pass the budget.
    Share,
}

/// Rule 3: the first `top_k` windows, within the token budget; when they do not fit
/// whole, narrowed as `policy` says (with the sentence ranges in `neighbours`; a window
/// whose ranges are unknown counts whole). Returns the answer, how many of the first
/// `top_k` windows the budget cut, and how many answer windows are narrower than merged.
pub fn select(
    windows: Vec<Window>,
    top_k: usize,
    budget: usize,
    neighbours: &Neighbours,
    policy: Budget,
) -> (Vec<Window>, usize, usize) {
    let candidates: Vec<Window> = windows.into_iter().take(top_k).collect();
    if candidates.iter().map(Window::tokens).sum::<usize>() <= budget {
        return (candidates, 0, 0);
    }
    let centres: Vec<Option<u32>> = candidates
        .iter()
        .map(|w| {
            w.matches
                .iter()
                .max_by(|a, b| a.score.total_cmp(&b.score).then(b.index.cmp(&a.index)))
                .map(|m| m.index)
        })
        .collect();
    let at = |i: usize, radius: usize| match centres[i] {
        Some(centre) => narrow_around(candidates[i].clone(), centre, radius, neighbours),
        None => candidates[i].clone(),
    };
    let narrowed = |answer: &[Window]| {
        answer
            .iter()
            .zip(&candidates)
            .filter(|(a, c)| a.sentences != c.sentences)
            .count()
    };
    if policy == Budget::Cap {
        // As many windows as fit at their narrowest (the best match alone), so `top_k` is
        // met whenever it can be; then each in rank order as wide as the room left after
        // the narrowest of those still to come allows: the best windows stay whole.
        let narrowest: Vec<usize> = (0..candidates.len()).map(|i| at(i, 0).tokens()).collect();
        let mut count = 0;
        let mut total = 0;
        while count < narrowest.len() && total + narrowest[count] <= budget {
            total += narrowest[count];
            count += 1;
        }
        let mut answer = Vec::with_capacity(count);
        let mut used = 0;
        for (i, window) in candidates.iter().enumerate().take(count) {
            let room = budget - used - narrowest[i + 1..count].iter().sum::<usize>();
            let fitted = if window.tokens() <= room {
                window.clone()
            } else {
                (0..window.sentences.len())
                    .rev()
                    .map(|radius| at(i, radius))
                    .find(|w| w.tokens() <= room)
                    .unwrap_or_else(|| at(i, 0))
            };
            used += fitted.tokens();
            answer.push(fitted);
        }
        let (cut, narrowed) = (candidates.len() - answer.len(), narrowed(&answer));
        return (answer, cut, narrowed);
    }
    let mut answer: Vec<Window> = Vec::new();
    let mut used = 0;
    for i in 0..candidates.len() {
        let window = at(i, 0);
        if used + window.tokens() > budget {
            break;
        }
        used += window.tokens();
        answer.push(window);
    }
    let widest = candidates
        .iter()
        .map(|w| w.sentences.len())
        .max()
        .unwrap_or(0);
    'rounds: for radius in 1..widest {
        let mut grew = false;
        for (i, window) in answer.iter_mut().enumerate() {
            let wider = at(i, radius);
            if wider.sentences == window.sentences {
                continue;
            }
            let extra = wider.tokens().saturating_sub(window.tokens());
            if used + extra > budget {
                break 'rounds;
            }
            used += extra;
            *window = wider;
            grew = true;
        }
        if !grew {
            break;
        }
    }
    let narrowed = narrowed(&answer);
    let cut = candidates.len() - answer.len();
    (answer, cut, narrowed)
}
