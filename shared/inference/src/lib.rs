//! Local inference for Casement: dense sentence embeddings with an ONNX model run by ONNX
//! Runtime (loaded at run time from the library `make models` provisions) and a Hugging
//! Face `tokenizer.json`, and window rerankers (cross-encoder, embedding rescoring, the learned ranker).
//!
//! Kept out of the text core so that pure logic compiles without ONNX Runtime. Inference
//! is synchronous and CPU-bound: callers run it on a blocking pool, never on an async task.

pub mod config;
pub mod embedder;
pub mod error;
pub mod learned;
mod onnx;
pub mod pool;
pub mod relevance;
pub mod remote;
pub mod rerank;
mod runtime;

pub use config::{EmbedderConfig, EmbedderKind, Precision, models_dir};
pub use embedder::{Embed, OnnxEmbedder, cosine, load_embedder};
pub use error::{Error, Result};
pub use pool::BlockingPool;
pub use remote::{OpenAiEmbedder, RemoteConfig, RemoteReranker};
pub use rerank::{
    Candidate, CrossEncoder, CrossEncoderConfig, Rerank, RerankerConfig, Rescoring, WindowParts,
    order_by_score,
};
