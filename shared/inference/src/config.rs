//! Where the models are and how to run them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::remote::RemoteConfig;

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
    /// `model.int8-static.onnx`: static int8 (activation scales calibrated once at
    /// provisioning, `deploy/models/quantize_static.py`), so a text's vector does not depend
    /// on its batch; cosine 0.993 mean to fp32 and the same SQuAD retrieval, but only
    /// 1.1-1.3x faster than fp32 here (the FFN input projections stay fp32 for accuracy),
    /// under the 1.5x that would make it the default.
    #[serde(rename = "int8-static")]
    Int8Static,
}

impl Precision {
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Fp32 => "model.onnx",
            Self::Int8 => "model.int8.onnx",
            Self::Int8Static => "model.int8-static.onnx",
        }
    }
}

/// Where the models are: `CASEMENT_MODELS_DIR`; else `models/` beside the directory of the
/// running binary, as `make dist`'s archive lays it out (`bin/casement`, `models/`); else the
/// cache that `make models` fills, `~/.cache/casement/models`.
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CASEMENT_MODELS_DIR") {
        return PathBuf::from(dir);
    }
    let shipped = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("models")))
        .filter(|dir| dir.join("manifest.json").is_file());
    shipped.unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        home.join(".cache/casement/models")
    })
}

/// Where the embeddings are computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum EmbedderKind {
    /// A local ONNX model (`model_dir`, `precision`, ...).
    #[default]
    Onnx,
    /// An OpenAI-compatible `/v1/embeddings` endpoint (the `openai` table).
    Openai,
}

/// Parsed by hand so that a wrong value names the key whatever the config layer reports
/// (the layered loader keeps serde's message but not the path).
impl TryFrom<String> for EmbedderKind {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "onnx" => Ok(Self::Onnx),
            "openai" => Ok(Self::Openai),
            other => Err(format!(
                "kind = {other:?} is not an embedder kind; expected \"onnx\" or \"openai\""
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedderConfig {
    /// `onnx` (the default: the fields below) or `openai` (the `openai` table; the ONNX
    /// fields are then unused).
    pub kind: EmbedderKind,
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
    /// Padded tokens per inference call (rows × the longest row): a batch of long texts is
    /// split into smaller ones. The model's working memory grows with this (its attention
    /// with rows × longest²), and ONNX Runtime keeps its peak for the life of the process.
    /// On 2 cores 1024 was also the fastest: 600 SciFact abstracts took 311 MiB at 81–89
    /// sentences/s, against 576 MiB at 55/s with no split (8192).
    pub batch_tokens: usize,
    /// The hosted endpoint of `kind = "openai"`: `base_url`, `model`, the key (from the
    /// variable named by `api_key_env`, or `api_key`), `timeout_ms`, `batch_size`. Required
    /// by that kind, rejected with the other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openai: Option<RemoteConfig>,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        let models = models_dir();
        Self {
            kind: EmbedderKind::Onnx,
            model_dir: models.join("all-MiniLM-L6-v2"),
            precision: Precision::Fp32,
            onnxruntime_library: models.join("onnxruntime/libonnxruntime.so.1.31.1"),
            threads: std::thread::available_parallelism().map_or(2, usize::from),
            batch_size: 32,
            max_tokens: 256,
            batch_tokens: 1024,
            openai: None,
        }
    }
}

impl EmbedderConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.threads == 0 || self.batch_size == 0 {
            return Err("threads and batch_size must be at least 1".to_owned());
        }
        if self.batch_tokens < self.max_tokens {
            return Err(format!(
                "batch_tokens = {} must be at least max_tokens = {} (one text per call)",
                self.batch_tokens, self.max_tokens
            ));
        }
        if !(8..=8192).contains(&self.max_tokens) {
            return Err(format!(
                "max_tokens = {} must be between 8 and 8192",
                self.max_tokens
            ));
        }
        match (self.kind, &self.openai) {
            (EmbedderKind::Onnx, None) => Ok(()),
            (EmbedderKind::Onnx, Some(_)) => Err(
                "an `openai` table is set but kind = \"onnx\"; set kind = \"openai\" to use it"
                    .to_owned(),
            ),
            (EmbedderKind::Openai, None) => {
                Err("kind = \"openai\" needs an `openai` table with base_url and model".to_owned())
            }
            (EmbedderKind::Openai, Some(remote)) => {
                if remote.base_url.trim().is_empty() || remote.model.trim().is_empty() {
                    return Err(
                        "kind = \"openai\" needs openai.base_url and openai.model".to_owned()
                    );
                }
                if remote.batch_size == 0 {
                    return Err("openai.batch_size must be at least 1".to_owned());
                }
                Ok(())
            }
        }
    }
}
