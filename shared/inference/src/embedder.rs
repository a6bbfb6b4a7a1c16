//! Dense sentence embeddings with a local ONNX model: tokenise (truncating at the model's
//! limit), sort by length and batch (padding to the longest in each batch), run, mean-pool
//! over the attention mask, L2-normalise. Synchronous: call it from a blocking thread
//! (`tokio::task::spawn_blocking` or a dedicated thread), never from an async task.

use std::path::Path;
use std::sync::Arc;

use tokenizers::{Encoding, Tokenizer, TruncationStrategy};

use crate::config::{EmbedderConfig, EmbedderKind};
use crate::error::{Error, Result};
use crate::onnx::{OnnxModel, PaddedBatch, load_tokenizer, longest_first, token_batches};
use crate::remote::OpenAiEmbedder;

/// Something that turns texts into unit-length vectors.
pub trait Embed: Send + Sync {
    fn dimension(&self) -> usize;
    /// A name that identifies the model and its precision (cache keys include it).
    fn model_id(&self) -> &str;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

/// The embedder `config.kind` names: the local ONNX model, or the hosted OpenAI-compatible
/// endpoint of `config.openai`. Either one embeds a probe text before returning, so a
/// missing model, a wrong URL or key fails here, at start, and `dimension()` is what the
/// model really returns. Blocking: call it from `spawn_blocking` or a plain thread.
pub fn load_embedder(config: &EmbedderConfig) -> Result<Arc<dyn Embed>> {
    config
        .validate()
        .map_err(|reason| Error::Config { reason })?;
    Ok(match config.kind {
        EmbedderKind::Onnx => Arc::new(OnnxEmbedder::load(config)?),
        EmbedderKind::Openai => {
            let remote = config.openai.as_ref().ok_or_else(|| Error::Config {
                reason: "kind = \"openai\" needs an `openai` table with base_url and model"
                    .to_owned(),
            })?;
            Arc::new(OpenAiEmbedder::connect(remote)?)
        }
    })
}

#[derive(Debug)]
pub struct OnnxEmbedder {
    model: OnnxModel,
    tokenizer: Tokenizer,
    dimension: usize,
    batch_size: usize,
    batch_tokens: usize,
    model_id: String,
}

impl OnnxEmbedder {
    pub fn load(config: &EmbedderConfig) -> Result<Self> {
        config
            .validate()
            .map_err(|reason| Error::Config { reason })?;
        let model_path = config.model_dir.join(config.precision.file_name());
        if !model_path.exists() {
            return Err(Error::MissingFile {
                what: "embedding model",
                path: model_path,
            });
        }
        let tokenizer = load_tokenizer(
            &config.model_dir.join("tokenizer.json"),
            config.max_tokens,
            TruncationStrategy::LongestFirst,
        )?;
        let model = OnnxModel::load(&model_path, &config.onnxruntime_library, config.threads)?;
        let mut embedder = Self {
            model,
            tokenizer,
            dimension: 0,
            batch_size: config.batch_size,
            batch_tokens: config.batch_tokens,
            model_id: format!("{}:{:?}", model_name(&config.model_dir), config.precision)
                .to_lowercase(),
        };
        // One probe run checks the output name and learns the dimension.
        embedder.dimension = embedder.embed(&["probe"])?[0].len();
        Ok(embedder)
    }

    /// Tokens the model sees for `text` (special tokens included, after truncation).
    pub fn count_tokens(&self, text: &str) -> Result<usize> {
        Ok(self.encode(text)?.get_ids().len())
    }

    fn encode(&self, text: &str) -> Result<Encoding> {
        self.tokenizer
            .encode(text, true)
            .map_err(|e| Error::Inference {
                reason: format!("tokenizer: {e}"),
            })
    }
}

impl Embed for OnnxEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let encodings: Vec<Encoding> = texts
            .iter()
            .map(|t| self.encode(t))
            .collect::<Result<_>>()?;
        let mut vectors = vec![Vec::new(); texts.len()];
        let order = longest_first(&encodings);
        let tokens = |i: usize| encodings[i].get_ids().len();
        for chunk in token_batches(&order, tokens, self.batch_size, self.batch_tokens) {
            let batch = PaddedBatch::new(&chunk.iter().map(|&i| &encodings[i]).collect::<Vec<_>>());
            let pooled = self
                .model
                .run(&batch, "last_hidden_state", |shape, hidden| {
                    let dim = shape.last().copied().unwrap_or(0) as usize;
                    mean_pool_normalise(hidden, &batch.mask, batch.rows, batch.width, dim)
                })?;
            for (&index, vector) in chunk.iter().zip(pooled) {
                vectors[index] = vector;
            }
        }
        Ok(vectors)
    }
}

/// Mean of the token vectors where the mask is 1, then scaled to unit length.
fn mean_pool_normalise(
    hidden: &[f32],
    mask: &[i64],
    rows: usize,
    width: usize,
    dim: usize,
) -> Vec<Vec<f32>> {
    (0..rows)
        .map(|row| {
            let mut sum = vec![0f32; dim];
            let mut count = 0f32;
            for token in (0..width).filter(|t| mask[row * width + t] != 0) {
                count += 1.0;
                let at = (row * width + token) * dim;
                sum.iter_mut()
                    .zip(&hidden[at..at + dim])
                    .for_each(|(s, v)| *s += v);
            }
            let count = count.max(1.0);
            sum.iter_mut().for_each(|s| *s /= count);
            let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            sum.iter_mut().for_each(|s| *s /= norm);
            sum
        })
        .collect()
}

/// Cosine of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn model_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
