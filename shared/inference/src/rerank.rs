//! Rerankers: score candidate windows against a query, higher is more relevant. Inputs are
//! window texts (not lone sentences), truncated at the model's limit, batched.
//!
//! - [`CrossEncoder`]: any Hugging Face cross-encoder exported to ONNX with its
//!   `tokenizer.json` (`[CLS] query [SEP] passage [SEP]`, one logit per pair).
//! - [`Rescoring`]: the cosine between the query embedding and the window embedding, blended
//!   with the retrieval score: `w · cos(q, window) + (1 − w) · minmax(retrieval)`.
//! - a remote rerank API ([`crate::RemoteReranker`]);
//! - [`crate::learned::LearnedRanker`]: a linear model over features of the whole window
//!   (the query service's configured reranker).
//!
//! Which one runs is chosen by [`RerankerConfig`] (`none` keeps the retrieval order).
//! Measured on 1,154 SQuAD questions (`make bench-rerank`), rescoring moved held-out MRR by
//! +0.005 (int8) and +0.003 (fp32) over retrieval order, within noise; the learned ranker
//! adds 3.4 points on held-out SQuAD but lowered SciFact (docs/benchmarks.md, "Retrieval quality").

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokenizers::{EncodeInput, Encoding, Tokenizer, TruncationStrategy};

use crate::embedder::{Embed, cosine};
use crate::error::{Error, Result};
use crate::onnx::{OnnxModel, PaddedBatch, load_tokenizer, longest_first};

/// One window to score, with the score retrieval gave it (reciprocal rank fusion).
#[derive(Debug, Clone, Copy, Default)]
pub struct Candidate<'a> {
    /// What a model reads: the window, or an excerpt of it around its best match.
    pub text: &'a str,
    pub retrieval_score: f32,
    /// The whole window and where it comes from, for the learned ranker
    /// ([`crate::learned`]); models read `text` only.
    pub window: WindowParts<'a>,
}

/// A merged window as the learned ranker sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct WindowParts<'a> {
    pub title: &'a str,
    /// The section's headings, outermost first.
    pub headings: &'a [String],
    pub text: &'a str,
    /// The window's sentences that matched the query, with their fused scores.
    pub matches: &'a [(String, f32)],
}

pub trait Rerank: Send + Sync {
    /// Identifies the reranker in responses and metrics.
    fn name(&self) -> &str;
    /// One score per candidate, in the candidates' order.
    fn score(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<f32>>;
}

/// Candidate indices by descending score (ties keep the retrieval order).
pub fn order_by_score(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrossEncoderConfig {
    /// A directory with `model.onnx` (output `logits`, `[batch, 1]` or `[batch, 2]`) and
    /// `tokenizer.json`.
    pub model_dir: PathBuf,
    pub onnxruntime_library: PathBuf,
    pub threads: usize,
    pub batch_size: usize,
    /// Tokens per pair; the passage is truncated, never the query.
    pub max_tokens: usize,
}

impl Default for CrossEncoderConfig {
    fn default() -> Self {
        let models = crate::config::models_dir();
        Self {
            model_dir: models.join("cross-encoder"),
            onnxruntime_library: models.join("onnxruntime/libonnxruntime.so.1.31.1"),
            threads: std::thread::available_parallelism().map_or(2, usize::from),
            batch_size: 16,
            max_tokens: 256,
        }
    }
}

#[derive(Debug)]
pub struct CrossEncoder {
    model: OnnxModel,
    tokenizer: Tokenizer,
    batch_size: usize,
    name: String,
}

impl CrossEncoder {
    pub fn load(config: &CrossEncoderConfig) -> Result<Self> {
        if config.batch_size == 0 || config.threads == 0 {
            return Err(Error::Config {
                reason: "cross-encoder batch_size and threads must be at least 1".to_owned(),
            });
        }
        let tokenizer = load_tokenizer(
            &config.model_dir.join("tokenizer.json"),
            config.max_tokens,
            TruncationStrategy::OnlySecond,
        )?;
        let model = OnnxModel::load(
            &config.model_dir.join("model.onnx"),
            &config.onnxruntime_library,
            config.threads,
        )?;
        let name = format!(
            "cross-encoder:{}",
            config
                .model_dir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        );
        Ok(Self {
            model,
            tokenizer,
            batch_size: config.batch_size,
            name,
        })
    }

    /// The pair encoding `[CLS] query [SEP] passage [SEP]` (exposed for tests).
    pub fn encode_pair(&self, query: &str, passage: &str) -> Result<Encoding> {
        self.tokenizer
            .encode(EncodeInput::Dual(query.into(), passage.into()), true)
            .map_err(|e| Error::Inference {
                reason: format!("tokenizer: {e}"),
            })
    }
}

impl Rerank for CrossEncoder {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<f32>> {
        let encodings: Vec<Encoding> = candidates
            .iter()
            .map(|c| self.encode_pair(query, c.text))
            .collect::<Result<_>>()?;
        let mut scores = vec![0f32; candidates.len()];
        for chunk in longest_first(&encodings).chunks(self.batch_size) {
            let batch = PaddedBatch::new(&chunk.iter().map(|&i| &encodings[i]).collect::<Vec<_>>());
            let logits = self.model.run(&batch, "logits", |shape, values| {
                let classes = shape.last().copied().unwrap_or(1).max(1) as usize;
                // One logit: relevance. Two: [not relevant, relevant] → their difference.
                (0..batch.rows)
                    .map(|row| match classes {
                        1 => values[row],
                        _ => values[row * classes + classes - 1] - values[row * classes],
                    })
                    .collect::<Vec<f32>>()
            })?;
            for (&index, logit) in chunk.iter().zip(logits) {
                scores[index] = logit;
            }
        }
        Ok(scores)
    }
}

/// The default reranker: embedding similarity of the query to the whole window, blended
/// with the retrieval score. No extra model; reuses the embedder.
#[derive(Clone)]
pub struct Rescoring {
    embedder: Arc<dyn Embed>,
    weight: f32,
    name: String,
}

impl std::fmt::Debug for Rescoring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rescoring")
            .field("model", &self.embedder.model_id())
            .field("weight", &self.weight)
            .finish()
    }
}

/// The blend weight chosen on the tune half of SQuAD by `make bench-rerank` (int8).
pub const DEFAULT_RESCORING_WEIGHT: f32 = 0.4;

impl Rescoring {
    pub fn new(embedder: Arc<dyn Embed>, weight: f32) -> Self {
        let name = format!("rescoring:{}", embedder.model_id());
        Self {
            embedder,
            weight: weight.clamp(0.0, 1.0),
            name,
        }
    }
}

impl Rerank for Rescoring {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<f32>> {
        let mut texts: Vec<&str> = Vec::with_capacity(candidates.len() + 1);
        texts.push(query);
        texts.extend(candidates.iter().map(|c| c.text));
        let vectors = self.embedder.embed(&texts)?;
        Ok(blend(&vectors[0], &vectors[1..], candidates, self.weight))
    }
}

/// `w · cos(q, window) + (1 − w) · minmax(retrieval)`; min-max over this candidate set, so
/// the blend does not depend on the fusion's score scale.
pub fn blend(
    query: &[f32],
    windows: &[Vec<f32>],
    candidates: &[Candidate<'_>],
    weight: f32,
) -> Vec<f32> {
    let (low, high) = candidates.iter().fold((f32::MAX, f32::MIN), |(l, h), c| {
        (l.min(c.retrieval_score), h.max(c.retrieval_score))
    });
    let span = (high - low).max(f32::EPSILON);
    windows
        .iter()
        .zip(candidates)
        .map(|(window, c)| {
            weight * cosine(query, window) + (1.0 - weight) * (c.retrieval_score - low) / span
        })
        .collect()
}

/// Which reranker the query service runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum RerankerConfig {
    /// Keep retrieval order (this type's default; the query service configures `Learned`).
    #[default]
    None,
    /// Embedding rescoring with the query embedder.
    Rescoring { weight: f32 },
    /// A local cross-encoder exported to ONNX.
    CrossEncoder(CrossEncoderConfig),
    /// A Cohere-shaped `/rerank` API.
    Remote(crate::remote::RemoteConfig),
    /// The linear ranker over window features trained by `make train-ranker`
    /// ([`crate::learned`]).
    Learned(crate::learned::LearnedConfig),
}

impl RerankerConfig {
    /// Whether [`Self::build`] needs an embedder (rescoring); the others load their own
    /// model or none, so callers load an embedder only when this says so.
    pub fn needs_embedder(&self) -> bool {
        matches!(self, Self::Rescoring { .. })
    }

    /// Builds the reranker; `None` means keep retrieval order. `embedder` is used by
    /// rescoring only (see [`Self::needs_embedder`]); rescoring without one is an error. A
    /// missing model or an unreachable setting fails here, at start.
    pub fn build(&self, embedder: Option<Arc<dyn Embed>>) -> Result<Option<Arc<dyn Rerank>>> {
        Ok(match self {
            Self::None => None,
            Self::Rescoring { weight } => {
                if !(0.0..=1.0).contains(weight) {
                    return Err(Error::Config {
                        reason: format!("rescoring weight {weight} must be between 0 and 1"),
                    });
                }
                let embedder = embedder.ok_or_else(|| Error::Config {
                    reason: "the rescoring reranker needs an embedder".to_owned(),
                })?;
                Some(Arc::new(Rescoring::new(embedder, *weight)))
            }
            Self::CrossEncoder(config) => Some(Arc::new(CrossEncoder::load(config)?)),
            Self::Remote(config) => Some(Arc::new(crate::remote::RemoteReranker::new(config)?)),
            Self::Learned(config) => Some(Arc::new(crate::learned::LearnedRanker::load(config)?)),
        })
    }
}
