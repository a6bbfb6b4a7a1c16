//! Dense sentence embeddings with a local ONNX model: tokenise (truncating at the model's
//! limit), sort by length and batch (padding to the longest in each batch), run, mean-pool
//! over the attention mask, L2-normalise. Synchronous: call it from a blocking thread
//! (`tokio::task::spawn_blocking` or a dedicated thread), never from an async task.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};

use crate::config::EmbedderConfig;
use crate::error::{Error, Result};
use crate::runtime::environment;

/// Something that turns texts into unit-length vectors.
pub trait Embed: Send + Sync {
    fn dimension(&self) -> usize;
    /// A name that identifies the model and its precision (cache keys include it).
    fn model_id(&self) -> &str;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

#[derive(Debug)]
pub struct OnnxEmbedder {
    session: Mutex<Session>,
    tokenizer: Tokenizer,
    has_token_types: bool,
    dimension: usize,
    batch_size: usize,
    model_id: String,
}

/// Token ids of one text after truncation.
struct Encoded {
    ids: Vec<i64>,
    types: Vec<i64>,
}

impl OnnxEmbedder {
    pub fn load(config: &EmbedderConfig) -> Result<Self> {
        config
            .validate()
            .map_err(|reason| Error::Config { reason })?;
        let model_path = config.model_dir.join(config.precision.file_name());
        let tokenizer_path = config.model_dir.join("tokenizer.json");
        for (what, path) in [
            ("embedding model", &model_path),
            ("tokenizer", &tokenizer_path),
        ] {
            if !path.exists() {
                return Err(Error::MissingFile {
                    what,
                    path: path.clone(),
                });
            }
        }
        let env = environment(&config.onnxruntime_library)?;
        let tokenizer = load_tokenizer(&tokenizer_path, config.max_tokens)?;
        let model_error = |reason: String| Error::Model {
            path: model_path.clone(),
            reason,
        };
        let session = (|| -> std::result::Result<Session, String> {
            let text = |e: &dyn std::fmt::Display| e.to_string();
            Session::builder(env)
                .map_err(|e| text(&e))?
                .with_optimization_level(GraphOptimizationLevel::Level3)
                .map_err(|e| text(&e))?
                .with_intra_threads(config.threads)
                .map_err(|e| text(&e))?
                .with_inter_threads(1)
                .map_err(|e| text(&e))?
                .commit_from_file(&model_path)
                .map_err(|e| text(&e))
        })()
        .map_err(model_error)?;
        let inputs: Vec<String> = session
            .inputs()
            .iter()
            .map(|i| i.name().to_owned())
            .collect();
        for required in ["input_ids", "attention_mask"] {
            if !inputs.iter().any(|n| n == required) {
                return Err(Error::Signature {
                    path: model_path,
                    name: required.to_owned(),
                });
            }
        }
        let has_token_types = inputs.iter().any(|n| n == "token_type_ids");
        let mut embedder = Self {
            session: Mutex::new(session),
            tokenizer,
            has_token_types,
            dimension: 0,
            batch_size: config.batch_size,
            model_id: format!("{}:{:?}", model_name(&config.model_dir), config.precision)
                .to_lowercase(),
        };
        // One probe run checks the output name and learns the dimension.
        embedder.dimension = embedder.run_batch(&[embedder.encode("probe")?])?[0].len();
        Ok(embedder)
    }

    /// Tokens the model sees for `text` (special tokens included, after truncation).
    pub fn count_tokens(&self, text: &str) -> Result<usize> {
        Ok(self.encode(text)?.ids.len())
    }

    fn encode(&self, text: &str) -> Result<Encoded> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| Error::Inference {
                reason: format!("tokenizer: {e}"),
            })?;
        Ok(Encoded {
            ids: encoding.get_ids().iter().map(|&i| i64::from(i)).collect(),
            types: encoding
                .get_type_ids()
                .iter()
                .map(|&i| i64::from(i))
                .collect(),
        })
    }

    fn run_batch(&self, batch: &[Encoded]) -> Result<Vec<Vec<f32>>> {
        let rows = batch.len();
        let width = batch.iter().map(|e| e.ids.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![0i64; rows * width];
        let mut mask = vec![0i64; rows * width];
        let mut types = vec![0i64; rows * width];
        for (row, encoded) in batch.iter().enumerate() {
            let at = row * width;
            ids[at..at + encoded.ids.len()].copy_from_slice(&encoded.ids);
            types[at..at + encoded.types.len()].copy_from_slice(&encoded.types);
            mask[at..at + encoded.ids.len()].fill(1);
        }
        let shape = [rows, width];
        let tensor = |data: Vec<i64>| {
            Tensor::from_array((shape, data)).map_err(|e| Error::Inference {
                reason: e.to_string(),
            })
        };
        let mut session = self.session.lock().map_err(|_| Error::Inference {
            reason: "a previous inference panicked".to_owned(),
        })?;
        let run = |session: &mut Session| -> ort::Result<Vec<Vec<f32>>> {
            let outputs = if self.has_token_types {
                session.run(ort::inputs![
                    "input_ids" => tensor(ids.clone()).map_err(|e| ort::Error::new(e.to_string()))?,
                    "attention_mask" => tensor(mask.clone()).map_err(|e| ort::Error::new(e.to_string()))?,
                    "token_type_ids" => tensor(types.clone()).map_err(|e| ort::Error::new(e.to_string()))?,
                ])?
            } else {
                session.run(ort::inputs![
                    "input_ids" => tensor(ids.clone()).map_err(|e| ort::Error::new(e.to_string()))?,
                    "attention_mask" => tensor(mask.clone()).map_err(|e| ort::Error::new(e.to_string()))?,
                ])?
            };
            let hidden = outputs
                .get("last_hidden_state")
                .ok_or_else(|| ort::Error::new("no output named `last_hidden_state`"))?;
            let (out_shape, values) = hidden.try_extract_tensor::<f32>()?;
            let dim = *out_shape.last().unwrap_or(&0) as usize;
            Ok(mean_pool_normalise(values, &mask, rows, width, dim))
        };
        run(&mut session).map_err(|e| Error::Inference {
            reason: e.to_string(),
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
        let encoded: Vec<Encoded> = texts
            .iter()
            .map(|t| self.encode(t))
            .collect::<Result<_>>()?;
        // Longest first, so each batch pads to a similar length.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encoded[i].ids.len()));
        let mut vectors = vec![Vec::new(); texts.len()];
        let mut encoded: Vec<Option<Encoded>> = encoded.into_iter().map(Some).collect();
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<Encoded> = chunk.iter().filter_map(|&i| encoded[i].take()).collect();
            for (&index, vector) in chunk.iter().zip(self.run_batch(&batch)?) {
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
            for token in 0..width {
                if mask[row * width + token] == 0 {
                    continue;
                }
                count += 1.0;
                let at = (row * width + token) * dim;
                for (s, v) in sum.iter_mut().zip(&hidden[at..at + dim]) {
                    *s += v;
                }
            }
            let count = count.max(1.0);
            sum.iter_mut().for_each(|s| *s /= count);
            let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            sum.iter_mut().for_each(|s| *s /= norm);
            sum
        })
        .collect()
}

/// The tokenizer with truncation at `max_tokens` and no padding (batches pad themselves).
/// Some exported `tokenizer.json` files hard-code padding to 128 and truncation at 128.
fn load_tokenizer(path: &Path, max_tokens: usize) -> Result<Tokenizer> {
    let error = |reason: String| Error::Tokenizer {
        path: path.to_owned(),
        reason,
    };
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| error(e.to_string()))?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            strategy: TruncationStrategy::LongestFirst,
            ..TruncationParams::default()
        }))
        .map_err(|e| error(e.to_string()))?;
    Ok(tokenizer)
}

fn model_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || PathBuf::from(dir).display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
