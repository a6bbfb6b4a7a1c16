//! Where the models are and how to run them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which weights of the embedding model to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// `model.onnx`: full precision. A text's vector does not depend on the batch it is
    /// computed in, which the index needs (incremental equals rebuild).
    Fp32,
    /// `model.int8.onnx`: dynamic int8, about 2× faster on CPU, cosine ≥ 0.97 to fp32.
    /// Dynamic quantisation scales activations per batch, so a text's vector depends on
    /// the other texts of its batch (cosine down to 0.96 between alone and in a batch of
    /// 32). With `batch_size = 1` it is batch-independent and still faster than fp32 at
    /// batch 32 (`make bench-embed`).
    Int8,
}

impl Precision {
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Fp32 => "model.onnx",
            Self::Int8 => "model.int8.onnx",
        }
    }
}

/// The model cache that `make models` fills: `CASEMENT_MODELS_DIR`, else
/// `~/.cache/casement/models`.
pub fn models_dir() -> PathBuf {
    std::env::var_os("CASEMENT_MODELS_DIR").map_or_else(
        || {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache/casement/models")
        },
        PathBuf::from,
    )
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedderConfig {
    /// A directory with `tokenizer.json` and `model.onnx` (and `model.int8.onnx`): any
    /// sentence-transformers model exported to ONNX with inputs `input_ids`,
    /// `attention_mask` (and optionally `token_type_ids`) and output `last_hidden_state`.
    pub model_dir: PathBuf,
    pub precision: Precision,
    /// The ONNX Runtime shared library (loaded at run time).
    pub onnxruntime_library: PathBuf,
    /// Threads ONNX Runtime uses inside one inference.
    pub threads: usize,
    /// Texts per inference call; texts are sorted by length first to limit padding.
    pub batch_size: usize,
    /// Tokens per text, special tokens included; longer texts are truncated.
    pub max_tokens: usize,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        let models = models_dir();
        Self {
            model_dir: models.join("all-MiniLM-L6-v2"),
            precision: Precision::Fp32,
            onnxruntime_library: models.join("onnxruntime/libonnxruntime.so.1.31.1"),
            threads: std::thread::available_parallelism().map_or(2, usize::from),
            batch_size: 32,
            max_tokens: 256,
        }
    }
}

impl EmbedderConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.threads == 0 || self.batch_size == 0 {
            return Err("threads and batch_size must be at least 1".to_owned());
        }
        if !(8..=8192).contains(&self.max_tokens) {
            return Err(format!(
                "max_tokens = {} must be between 8 and 8192",
                self.max_tokens
            ));
        }
        Ok(())
    }
}
