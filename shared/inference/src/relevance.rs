//! Calibrated relevance: the probability that a window answers the question, from a
//! logistic model over absolute features of the window (not of its rank among the others,
//! which says nothing when nothing matches): how close its best sentence's vector is to the
//! question's, and how much of the question's words it and its best sentence hold. Fitted
//! on the tune half of SQuAD by `make train-ranker` (a window is relevant when it covers a
//! reference answer); the coefficients ship in `shared/inference/ranker/relevance.json`.
//!
//! A bot uses it to say "I don't know": windows under `min_relevance` are left out, and an
//! answer with none left is an abstention.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::learned::{stem, words};

/// The coefficients `make train-ranker` wrote, compiled in.
pub const SHIPPED: &str = include_str!("../ranker/relevance.json");

/// Feature names, in the order of [`features`]' vectors.
pub const FEATURES: [&str; 4] = [
    "similarity",
    "window_coverage",
    "best_sentence_coverage",
    "query_pairs",
];

pub type Features = [f32; FEATURES.len()];

/// `relevance = 1 / (1 + e^-(bias + Σ weight · (feature − mean) / scale))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub features: Vec<String>,
    pub mean: Vec<f32>,
    pub scale: Vec<f32>,
    pub weights: Vec<f32>,
    pub bias: f32,
    /// What it was fitted on and how it did (free-form, for people).
    #[serde(default)]
    pub trained: serde_json::Value,
}

impl Calibration {
    pub fn from_json(text: &str, source: &str) -> Result<Self> {
        let model: Self = serde_json::from_str(text).map_err(|e| Error::Config {
            reason: format!("relevance calibration {source}: {e}"),
        })?;
        let n = FEATURES.len();
        if model.features != FEATURES
            || model.mean.len() != n
            || model.scale.len() != n
            || model.weights.len() != n
            || model.scale.iter().any(|s| *s <= 0.0 || !s.is_finite())
            || model
                .weights
                .iter()
                .chain(&model.mean)
                .any(|v| !v.is_finite())
            || !model.bias.is_finite()
        {
            return Err(Error::Config {
                reason: format!(
                    "relevance calibration {source} does not fit this build's features {FEATURES:?}: refit with `make train-ranker`"
                ),
            });
        }
        Ok(model)
    }

    /// The shipped coefficients.
    pub fn shipped() -> Result<Self> {
        Self::from_json(SHIPPED, "shipped")
    }

    /// The calibrated probability, in [0, 1].
    pub fn relevance(&self, features: &Features) -> f32 {
        let z: f32 = self.bias
            + features
                .iter()
                .zip(&self.mean)
                .zip(&self.scale)
                .zip(&self.weights)
                .map(|(((x, m), s), w)| w * (x - m) / s)
                .sum::<f32>();
        let p = 1.0 / (1.0 + (-z.clamp(-30.0, 30.0)).exp());
        p.clamp(0.0, 1.0)
    }
}

/// Words too common to say anything.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "an", "and", "are", "as", "at", "be", "been", "before", "being",
    "between", "by", "can", "did", "do", "does", "during", "for", "from", "he", "her", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "my", "no", "not", "of", "on", "or", "our",
    "over", "she", "should", "than", "that", "the", "their", "then", "there", "these", "they",
    "this", "those", "to", "under", "was", "we", "were", "what", "when", "where", "which", "who",
    "whom", "whose", "why", "will", "with", "would", "you", "your",
];

/// The query's content stems (stop words out; all words when it has only stop words).
fn content_stems(query: &str) -> Vec<String> {
    let all: Vec<String> = words(query).collect();
    let mut content: Vec<String> = all
        .iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(w).to_owned())
        .collect();
    if content.is_empty() {
        content = all.iter().map(|w| stem(w).to_owned()).collect();
    }
    content.sort_unstable();
    content.dedup();
    content
}

fn share(stems: &[String], text: &str) -> f32 {
    if stems.is_empty() {
        return 0.0;
    }
    let here: HashSet<String> = words(text).map(|w| stem(&w).to_owned()).collect();
    stems.iter().filter(|s| here.contains(*s)).count() as f32 / stems.len() as f32
}

/// A window's features: `similarity` (the cosine of the question's vector and its best
/// matched sentence's, as the index stores them), the share of the question's content
/// words its text and its best-covering matched sentence hold, and the share of the
/// question's word pairs it holds. Every value is finite and in [-1, 1].
pub fn features(query: &str, text: &str, matches: &[&str], similarity: f32) -> Features {
    let stems = content_stems(query);
    let best = matches
        .iter()
        .map(|m| share(&stems, m))
        .fold(0.0f32, f32::max);
    let query_words: Vec<String> = words(query).collect();
    let pairs: HashSet<(&str, &str)> = query_words
        .windows(2)
        .map(|p| (p[0].as_str(), p[1].as_str()))
        .collect();
    let pair_share = if pairs.is_empty() {
        0.0
    } else {
        let text_words: Vec<String> = words(text).collect();
        let here: HashSet<(&str, &str)> = text_words
            .windows(2)
            .map(|p| (p[0].as_str(), p[1].as_str()))
            .collect();
        pairs.intersection(&here).count() as f32 / pairs.len() as f32
    };
    let similarity = if similarity.is_finite() {
        similarity.clamp(-1.0, 1.0)
    } else {
        0.0
    };
    [similarity, share(&stems, text), best, pair_share]
}

/// Fits a [`Calibration`] by logistic regression (full-batch gradient descent on the
/// standardised features, a little L2); deterministic for given samples.
pub fn fit(samples: &[(Features, bool)], epochs: usize) -> Calibration {
    let n = FEATURES.len();
    let count = samples.len().max(1) as f64;
    let mut mean = vec![0f32; n];
    let mut scale = vec![1f32; n];
    for j in 0..n {
        let m = samples.iter().map(|(f, _)| f64::from(f[j])).sum::<f64>() / count;
        let var = samples
            .iter()
            .map(|(f, _)| (f64::from(f[j]) - m).powi(2))
            .sum::<f64>()
            / count;
        mean[j] = m as f32;
        scale[j] = (var.sqrt() as f32).max(1e-6);
    }
    let x: Vec<(Vec<f64>, f64)> = samples
        .iter()
        .map(|(f, y)| {
            (
                (0..n)
                    .map(|j| f64::from((f[j] - mean[j]) / scale[j]))
                    .collect(),
                if *y { 1.0 } else { 0.0 },
            )
        })
        .collect();
    let mut w = vec![0f64; n];
    let mut b = 0f64;
    let rate = 0.5;
    let l2 = 1e-4;
    for _ in 0..epochs {
        let mut gw = vec![0f64; n];
        let mut gb = 0f64;
        for (xi, yi) in &x {
            let z = b + w.iter().zip(xi).map(|(a, c)| a * c).sum::<f64>();
            let p = 1.0 / (1.0 + (-z.clamp(-30.0, 30.0)).exp());
            let e = p - yi;
            for j in 0..n {
                gw[j] += e * xi[j];
            }
            gb += e;
        }
        for j in 0..n {
            w[j] -= rate * (gw[j] / count + l2 * w[j]);
        }
        b -= rate * gb / count;
    }
    Calibration {
        features: FEATURES.iter().map(|s| (*s).to_owned()).collect(),
        mean,
        scale,
        weights: w.iter().map(|v| *v as f32).collect(),
        bias: b as f32,
        trained: serde_json::Value::Null,
    }
}

/// The area under the ROC curve of `scores` for `labels` (the probability that a random
/// positive scores above a random negative, ties half).
pub fn auc(scored: &[(f32, bool)]) -> f64 {
    let mut sorted: Vec<(f32, bool)> = scored.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = sorted.iter().filter(|s| s.1).count() as f64;
    let negatives = sorted.len() as f64 - positives;
    if positives == 0.0 || negatives == 0.0 {
        return 0.5;
    }
    // Rank sum with ties averaged.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        let average = (i + j + 1) as f64 / 2.0;
        rank_sum += average * sorted[i..j].iter().filter(|s| s.1).count() as f64;
        i = j;
    }
    (rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn features_are_absolute_and_bounded() {
        let f = features(
            "How do I reset my password?",
            "To reset your password, open settings. Then choose Reset.",
            &["To reset your password, open settings."],
            0.71,
        );
        assert_eq!(f[0], 0.71);
        assert_eq!(f[1], 1.0); // reset, password
        assert_eq!(f[2], 1.0);
        let none = features(
            "quantum chromodynamics",
            "To reset your password.",
            &["To reset your password."],
            0.05,
        );
        assert_eq!((none[1], none[2], none[3]), (0.0, 0.0, 0.0));
    }

    #[test]
    fn a_fit_separates_and_calibrates() {
        // Relevant windows are close and covered; the others are not.
        let mut samples = Vec::new();
        for i in 0..200 {
            let t = i as f32 / 200.0;
            samples.push(([0.6 + 0.3 * t, 0.7 + 0.3 * t, 0.6, 0.3], true));
            samples.push(([0.1 + 0.3 * t, 0.2 * t, 0.1, 0.0], false));
        }
        let model = fit(&samples, 500);
        let high = model.relevance(&[0.8, 0.9, 0.6, 0.3]);
        let low = model.relevance(&[0.15, 0.05, 0.1, 0.0]);
        assert!(high > 0.9 && low < 0.1, "{high} {low}");
        let scored: Vec<(f32, bool)> = samples
            .iter()
            .map(|(f, y)| (model.relevance(f), *y))
            .collect();
        assert!(auc(&scored) > 0.99);
        let json = serde_json::to_string(&model).unwrap();
        assert_eq!(Calibration::from_json(&json, "test").unwrap(), model);
    }

    #[test]
    fn auc_counts_ties_half() {
        assert_eq!(auc(&[(0.5, true), (0.5, false)]), 0.5);
        assert_eq!(auc(&[(0.9, true), (0.1, false)]), 1.0);
        assert_eq!(auc(&[(0.1, true), (0.9, false)]), 0.0);
    }

    #[test]
    fn the_shipped_calibration_loads() {
        Calibration::shipped().unwrap();
    }
}
