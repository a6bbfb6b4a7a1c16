use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what} not found at {path} (run `make models`, or set CASEMENT_MODELS_DIR)")]
    MissingFile { what: &'static str, path: PathBuf },
    #[error("cannot load ONNX Runtime from {path}: {reason}")]
    Runtime { path: PathBuf, reason: String },
    #[error("cannot load model {path}: {reason}")]
    Model { path: PathBuf, reason: String },
    #[error("cannot load tokenizer {path}: {reason}")]
    Tokenizer { path: PathBuf, reason: String },
    #[error("model {path} has no input or output named `{name}`")]
    Signature { path: PathBuf, name: String },
    #[error("inference failed: {reason}")]
    Inference { reason: String },
    #[error("remote model at {url} failed: {reason}")]
    Remote { url: String, reason: String },
    #[error("invalid embedder configuration: {reason}")]
    Config { reason: String },
}

pub type Result<T> = std::result::Result<T, Error>;
