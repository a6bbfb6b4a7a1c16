//! The learned ranker: a linear model over cheap features of each merged window, trained
//! pairwise (RankNet: logistic loss on the score difference of a window that answers and
//! one that does not) on the tune half of SQuAD by `make train-ranker`. No model to run:
//! scoring 20 windows is tokenizing their text.
//!
//! The features ([`FEATURES`]) describe a window among the candidates of one query: its
//! retrieval rank and fused score, its matched sentences, how much of the query's weight
//! (an IDF over the candidate windows) its text, its best sentence and its title and
//! headings cover, and the query's word pairs it contains. (How much of the candidates
//! come from the window's document was tried and left out: it added nothing on held-out
//! SQuAD and depends on how a corpus is cut into documents.) The weights ship in the repository
//! (`shared/inference/ranker/learned.json`, written by the trainer with what it was trained
//! on) and are compiled in; `weights = "path"` loads another file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::rerank::{Candidate, Rerank};

/// The weights `make train-ranker` wrote, compiled in.
pub const SHIPPED_WEIGHTS: &str = include_str!("../ranker/learned.json");

/// Feature names, in the order of [`features`]' vectors and of a weights file.
pub const FEATURES: [&str; 11] = [
    "reciprocal_rank",
    "log_rank",
    "fused_vs_top",
    "matches",
    "match_sum_vs_top",
    "window_coverage",
    "best_sentence_coverage",
    "max_sentence_coverage",
    "query_pairs",
    "title_coverage",
    "log_words",
];

pub type Features = [f32; FEATURES.len()];

/// A trained model: `score = Σ weight · (feature − mean) / scale`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearModel {
    pub features: Vec<String>,
    pub mean: Vec<f32>,
    pub scale: Vec<f32>,
    pub weights: Vec<f32>,
    /// What the model was trained on and how it did there (free-form, for people).
    #[serde(default)]
    pub trained: serde_json::Value,
}

impl LinearModel {
    pub fn from_json(text: &str, source: &str) -> Result<Self> {
        let model: Self = serde_json::from_str(text).map_err(|e| Error::Config {
            reason: format!("learned ranker weights {source}: {e}"),
        })?;
        let n = FEATURES.len();
        if model.features != FEATURES {
            return Err(Error::Config {
                reason: format!(
                    "learned ranker weights {source} are for the features {:?}, this build computes {:?}: retrain with `make train-ranker`",
                    model.features, FEATURES
                ),
            });
        }
        if model.mean.len() != n || model.scale.len() != n || model.weights.len() != n {
            return Err(Error::Config {
                reason: format!(
                    "learned ranker weights {source}: expected {n} means, scales and weights"
                ),
            });
        }
        if model
            .mean
            .iter()
            .chain(&model.weights)
            .chain(&model.scale)
            .any(|v| !v.is_finite())
            || model.scale.iter().any(|s| *s <= 0.0)
        {
            return Err(Error::Config {
                reason: format!(
                    "learned ranker weights {source}: values must be finite, scales positive"
                ),
            });
        }
        Ok(model)
    }

    pub fn score(&self, features: &Features) -> f32 {
        features
            .iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .zip(&self.weights)
            .map(|(((x, m), s), w)| w * (x - m) / s)
            .sum()
    }
}

/// `kind = "learned"`: which weights.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LearnedConfig {
    /// A weights file written by `make train-ranker`; unset: the weights shipped with this
    /// build.
    pub weights: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct LearnedRanker {
    model: LinearModel,
    name: String,
}

impl LearnedRanker {
    pub fn load(config: &LearnedConfig) -> Result<Self> {
        Ok(match &config.weights {
            None => Self::new(
                LinearModel::from_json(SHIPPED_WEIGHTS, "(shipped)")?,
                "shipped",
            ),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
                    reason: format!("learned ranker weights {}: {e}", path.display()),
                })?;
                let model = LinearModel::from_json(&text, &path.display().to_string())?;
                Self::new(model, &file_stem(path))
            }
        })
    }

    pub fn new(model: LinearModel, label: &str) -> Self {
        Self {
            model,
            name: format!("learned:{label}"),
        }
    }
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

impl Rerank for LearnedRanker {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<f32>> {
        Ok(features(query, candidates)
            .iter()
            .map(|f| self.model.score(f))
            .collect())
    }
}

/// Words too common to say anything about a window (English; the query's other words
/// count).
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "an", "and", "are", "as", "at", "be", "been", "before", "being",
    "between", "by", "did", "do", "does", "during", "for", "from", "he", "her", "his", "how", "i",
    "in", "into", "is", "it", "its", "no", "not", "of", "on", "or", "our", "over", "she", "than",
    "that", "the", "their", "then", "there", "these", "they", "this", "those", "to", "under",
    "was", "we", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "with",
    "you",
];

/// Lowercased runs of letters and digits.
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A crude suffix strip, so that "built" stays but "ships"/"shipping"/"shipped" meet.
pub(crate) fn stem(word: &str) -> &str {
    for suffix in ["ing", "ed", "es", "s"] {
        if word.chars().count() > 4
            && let Some(stripped) = word.strip_suffix(suffix)
        {
            return stripped;
        }
    }
    word
}

fn stems(text: &str) -> HashSet<String> {
    words(text).map(|w| stem(&w).to_owned()).collect()
}

/// The share of the query's weight whose stems `set` holds (`weights` sorted by stem, so
/// that sums are the same on every run).
fn coverage(weights: &[(String, f32)], total: f32, set: &HashSet<String>) -> f32 {
    weights
        .iter()
        .filter(|(t, _)| set.contains(t))
        .map(|(_, w)| w)
        .sum::<f32>()
        / total
}

/// One feature vector per candidate (in order; the candidates' order is their retrieval
/// rank). Every value is finite.
pub fn features(query: &str, candidates: &[Candidate<'_>]) -> Vec<Features> {
    let n = candidates.len();
    let query_words: Vec<String> = words(query).collect();
    let query_stems: HashSet<String> = query_words
        .iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(w).to_owned())
        .collect();
    let query_pairs: HashSet<(&str, &str)> = query_words
        .windows(2)
        .map(|p| (p[0].as_str(), p[1].as_str()))
        .collect();
    // Each window's words, read once: its stems for coverage, its word pairs.
    let window_words: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| words(c.window.text).collect())
        .collect();
    let window_stems: Vec<HashSet<String>> = window_words
        .iter()
        .map(|ws| ws.iter().map(|w| stem(w).to_owned()).collect())
        .collect();
    // IDF over the candidate windows: a query word every window has says little.
    let mut query_stems: Vec<String> = query_stems.into_iter().collect();
    query_stems.sort_unstable();
    let weights: Vec<(String, f32)> = query_stems
        .into_iter()
        .map(|t| {
            let df = window_stems.iter().filter(|s| s.contains(&t)).count();
            let idf = (1.0 + (n + 1) as f32 / (1 + df) as f32).ln();
            (t, idf)
        })
        .collect();
    let total = weights
        .iter()
        .map(|(_, w)| w)
        .sum::<f32>()
        .max(f32::EPSILON);
    let top = candidates
        .iter()
        .map(|c| c.retrieval_score)
        .fold(f32::EPSILON, f32::max);
    candidates
        .iter()
        .zip(&window_stems)
        .enumerate()
        .map(|(rank, (c, stems_here))| {
            let w = &c.window;
            let sentence_coverage: Vec<f32> = w
                .matches
                .iter()
                .map(|(sentence, _)| coverage(&weights, total, &stems(sentence)))
                .collect();
            let best = w
                .matches
                .iter()
                .zip(&sentence_coverage)
                .max_by(|a, b| a.0.1.total_cmp(&b.0.1))
                .map_or(0.0, |(_, c)| *c);
            let max_sentence = sentence_coverage.iter().copied().fold(0.0, f32::max);
            let text_words = &window_words[rank];
            let pairs = if query_pairs.is_empty() {
                0.0
            } else {
                let here: HashSet<(&str, &str)> = text_words
                    .windows(2)
                    .map(|p| (p[0].as_str(), p[1].as_str()))
                    .collect();
                query_pairs.intersection(&here).count() as f32 / query_pairs.len() as f32
            };
            let mut title = stems(w.title);
            for heading in w.headings {
                title.extend(stems(heading));
            }
            [
                1.0 / (1.0 + rank as f32),
                (1.0 + rank as f32).ln(),
                c.retrieval_score / top,
                w.matches.len() as f32,
                w.matches.iter().map(|m| m.1).sum::<f32>() / top,
                coverage(&weights, total, stems_here),
                best,
                max_sentence,
                pairs,
                coverage(&weights, total, &title),
                (1.0 + text_words.len() as f32).ln(),
            ]
        })
        .collect()
}

/// One query's candidates for training: features in retrieval order and whether each
/// answers.
#[derive(Debug, Clone)]
pub struct Judged {
    pub features: Vec<Features>,
    pub relevant: Vec<bool>,
}

/// Training settings; the defaults are what `make train-ranker` uses.
#[derive(Debug, Clone)]
pub struct Training {
    pub epochs: usize,
    pub learning_rate: f32,
    /// Learning-rate factor after each epoch.
    pub decay: f32,
    pub l2: f32,
    /// Relevant windows per query paired with every irrelevant one.
    pub positives: usize,
    /// Seed of the pair shuffle (a fixed seed makes the weights reproducible).
    pub seed: u64,
}

impl Default for Training {
    fn default() -> Self {
        Self {
            epochs: 6,
            learning_rate: 0.05,
            decay: 0.6,
            l2: 1e-4,
            positives: 3,
            seed: 1,
        }
    }
}

/// Fits a [`LinearModel`] pairwise (RankNet with a linear scorer, plain SGD), on features
/// standardised by their mean and deviation over every candidate. Deterministic for given
/// data and settings.
pub fn train(queries: &[Judged], settings: &Training) -> LinearModel {
    let n = FEATURES.len();
    let all: Vec<&Features> = queries.iter().flat_map(|q| &q.features).collect();
    let count = all.len().max(1) as f64;
    let mut mean = vec![0f32; n];
    let mut scale = vec![1f32; n];
    for j in 0..n {
        let m = all.iter().map(|f| f64::from(f[j])).sum::<f64>() / count;
        let var = all
            .iter()
            .map(|f| (f64::from(f[j]) - m).powi(2))
            .sum::<f64>()
            / count;
        mean[j] = m as f32;
        scale[j] = (var.sqrt() as f32).max(1e-6);
    }
    let standard =
        |f: &Features| -> Vec<f32> { (0..n).map(|j| (f[j] - mean[j]) / scale[j]).collect() };
    let mut pairs: Vec<Vec<f32>> = Vec::new();
    for q in queries {
        let x: Vec<Vec<f32>> = q.features.iter().map(standard).collect();
        let positive: Vec<usize> = (0..x.len()).filter(|&i| q.relevant[i]).collect();
        let negative: Vec<usize> = (0..x.len()).filter(|&i| !q.relevant[i]).collect();
        for &p in positive.iter().take(settings.positives) {
            for &m in &negative {
                pairs.push(x[p].iter().zip(&x[m]).map(|(a, b)| a - b).collect());
            }
        }
    }
    let mut weights = vec![0f32; n];
    let mut rate = settings.learning_rate;
    let mut rng = settings.seed.max(1);
    for _ in 0..settings.epochs {
        // Fisher–Yates with xorshift64: the same order on every machine.
        for i in (1..pairs.len()).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            pairs.swap(i, (rng % (i as u64 + 1)) as usize);
        }
        for d in &pairs {
            let s: f32 = weights.iter().zip(d).map(|(w, x)| w * x).sum();
            let g = 1.0 / (1.0 + s.min(30.0).exp());
            for j in 0..n {
                weights[j] += rate * (g * d[j] - settings.l2 * weights[j]);
            }
        }
        rate *= settings.decay;
    }
    LinearModel {
        features: FEATURES.iter().map(|s| (*s).to_owned()).collect(),
        mean,
        scale,
        weights,
        trained: serde_json::Value::Null,
    }
}
