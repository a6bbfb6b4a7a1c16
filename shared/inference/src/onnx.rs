//! What every ONNX model of this crate shares: session creation, tokenizer loading with
//! Casement's truncation, and padding a batch of encodings into input tensors.

use std::path::Path;
use std::sync::Mutex;

use ort::session::builder::GraphOptimizationLevel;
use ort::session::{Session, SessionOutputs};
use ort::value::Tensor;
use tokenizers::{Encoding, Tokenizer, TruncationParams, TruncationStrategy};

use crate::error::{Error, Result};
use crate::runtime::environment;

/// A loaded model: a session (runs are serialised; ONNX Runtime uses `threads` inside one
/// run) and which optional inputs it takes.
#[derive(Debug)]
pub struct OnnxModel {
    session: Mutex<Session>,
    has_token_types: bool,
}

impl OnnxModel {
    pub fn load(model: &Path, library: &Path, threads: usize) -> Result<Self> {
        if !model.exists() {
            return Err(Error::MissingFile {
                what: "ONNX model",
                path: model.to_owned(),
            });
        }
        let env = environment(library)?;
        let session = (|| -> std::result::Result<Session, String> {
            let text = |e: &dyn std::fmt::Display| e.to_string();
            Session::builder(env)
                .map_err(|e| text(&e))?
                .with_optimization_level(GraphOptimizationLevel::Level3)
                .map_err(|e| text(&e))?
                .with_intra_threads(threads)
                .map_err(|e| text(&e))?
                .with_inter_threads(1)
                .map_err(|e| text(&e))?
                .commit_from_file(model)
                .map_err(|e| text(&e))
        })()
        .map_err(|reason| Error::Model {
            path: model.to_owned(),
            reason,
        })?;
        let inputs: Vec<String> = session
            .inputs()
            .iter()
            .map(|i| i.name().to_owned())
            .collect();
        for required in ["input_ids", "attention_mask"] {
            if !inputs.iter().any(|n| n == required) {
                return Err(Error::Signature {
                    path: model.to_owned(),
                    name: required.to_owned(),
                });
            }
        }
        Ok(Self {
            has_token_types: inputs.iter().any(|n| n == "token_type_ids"),
            session: Mutex::new(session),
        })
    }

    /// Runs one padded batch and hands the output named `output` (shape, values) to `read`.
    pub fn run<T>(
        &self,
        batch: &PaddedBatch,
        output: &str,
        read: impl FnOnce(&[i64], &[f32]) -> T,
    ) -> Result<T> {
        let shape = [batch.rows, batch.width];
        let inference = |e: &dyn std::fmt::Display| Error::Inference {
            reason: e.to_string(),
        };
        let ids = Tensor::from_array((shape, batch.ids.clone())).map_err(|e| inference(&e))?;
        let mask = Tensor::from_array((shape, batch.mask.clone())).map_err(|e| inference(&e))?;
        let mut session = self.session.lock().map_err(|_| Error::Inference {
            reason: "a previous inference panicked".to_owned(),
        })?;
        let outputs: SessionOutputs<'_> = if self.has_token_types {
            let types = Tensor::from_array((shape, batch.types.clone())).map_err(|e| inference(&e))?;
            session.run(ort::inputs!["input_ids" => ids, "attention_mask" => mask, "token_type_ids" => types])
        } else {
            session.run(ort::inputs!["input_ids" => ids, "attention_mask" => mask])
        }
        .map_err(|e| inference(&e))?;
        let value = outputs.get(output).ok_or_else(|| Error::Inference {
            reason: format!("the model has no output named `{output}`"),
        })?;
        let (out_shape, values) = value
            .try_extract_tensor::<f32>()
            .map_err(|e| inference(&e))?;
        Ok(read(out_shape, values))
    }
}

/// Token ids of a batch, padded with zeros to its longest member.
#[derive(Debug)]
pub struct PaddedBatch {
    pub rows: usize,
    pub width: usize,
    pub ids: Vec<i64>,
    pub mask: Vec<i64>,
    pub types: Vec<i64>,
}

impl PaddedBatch {
    pub fn new(encodings: &[&Encoding]) -> Self {
        let rows = encodings.len();
        let width = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut batch = Self {
            rows,
            width,
            ids: vec![0; rows * width],
            mask: vec![0; rows * width],
            types: vec![0; rows * width],
        };
        for (row, encoding) in encodings.iter().enumerate() {
            let at = row * width;
            for (i, (&id, &kind)) in encoding
                .get_ids()
                .iter()
                .zip(encoding.get_type_ids())
                .enumerate()
            {
                batch.ids[at + i] = i64::from(id);
                batch.types[at + i] = i64::from(kind);
                batch.mask[at + i] = 1;
            }
        }
        batch
    }
}

/// The tokenizer with truncation at `max_tokens` and no padding (batches pad themselves).
/// Some exported `tokenizer.json` files hard-code padding and truncation at 128.
pub fn load_tokenizer(
    path: &Path,
    max_tokens: usize,
    strategy: TruncationStrategy,
) -> Result<Tokenizer> {
    if !path.exists() {
        return Err(Error::MissingFile {
            what: "tokenizer",
            path: path.to_owned(),
        });
    }
    let error = |reason: String| Error::Tokenizer {
        path: path.to_owned(),
        reason,
    };
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| error(e.to_string()))?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            strategy,
            ..TruncationParams::default()
        }))
        .map_err(|e| error(e.to_string()))?;
    Ok(tokenizer)
}

/// Indices of `texts` sorted longest first (by token count), so batches pad little.
pub fn longest_first(encodings: &[Encoding]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..encodings.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].get_ids().len()));
    order
}

/// Cuts `order` (longest first, `len` gives each one's tokens) into batches of at most
/// `max_rows` rows whose padded size (rows × the first row's length) stays within
/// `max_tokens`; a batch has at least one row.
pub fn token_batches(
    order: &[usize],
    len: impl Fn(usize) -> usize,
    max_rows: usize,
    max_tokens: usize,
) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut rest = order;
    while let Some(&first) = rest.first() {
        let width = len(first).max(1);
        let rows = (max_tokens / width)
            .clamp(1, max_rows.max(1))
            .min(rest.len());
        batches.push(rest[..rows].to_vec());
        rest = &rest[rows..];
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::token_batches;

    #[test]
    fn long_texts_go_in_smaller_batches_and_every_text_in_exactly_one() {
        // Longest first: 4 texts of 256 tokens, 40 of 100, 30 of 10.
        let lengths: Vec<usize> = [vec![256; 4], vec![100; 40], vec![10; 30]].concat();
        let order: Vec<usize> = (0..lengths.len()).collect();
        let batches = token_batches(&order, |i| lengths[i], 32, 1024);
        for batch in &batches {
            let width = lengths[batch[0]];
            assert!(batch.len() <= 32);
            assert!(
                batch.len() == 1 || batch.len() * width <= 1024,
                "{} rows of {width} tokens",
                batch.len()
            );
        }
        let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
        assert_eq!(sizes, [4, 10, 10, 10, 10, 30]);
        let flat: Vec<usize> = batches.concat();
        assert_eq!(flat, order, "every text once, in order");
        // A text longer than the budget still gets a batch of its own.
        assert_eq!(
            token_batches(&[0, 1], |_| 2000, 32, 1024),
            [vec![0], vec![1]]
        );
    }
}
