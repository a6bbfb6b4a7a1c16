//! Hosted models behind the same interfaces as the local ones:
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `/v1/embeddings` endpoint, through
//!   `async-openai` (base URL, model and key from config);
//! - [`RemoteReranker`]: the Cohere `/v1/rerank` request/response shape, also served by Jina,
//!   Hugging Face TEI and vLLM.
//!
//! Both are synchronous like the local models (each owns a small Tokio runtime for its HTTP
//! client): call them from a blocking thread, as [`crate::pool::BlockingPool`] does.

use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::types::embeddings::{CreateEmbeddingRequest, EmbeddingInput};
use serde::{Deserialize, Serialize};

use crate::embedder::Embed;
use crate::error::{Error, Result};
use crate::rerank::{Candidate, Rerank};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemoteConfig {
    /// e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    pub model: String,
    /// The key is read from this environment variable, so it stays out of config files.
    pub api_key_env: String,
    /// A key given directly; used instead of `api_key_env` when set.
    pub api_key: Option<casement_config::Secret>,
    pub timeout_ms: u64,
    /// Texts per request.
    pub batch_size: usize,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".to_owned(),
            model: "text-embedding-3-small".to_owned(),
            api_key_env: "OPENAI_API_KEY".to_owned(),
            api_key: None,
            timeout_ms: 30_000,
            batch_size: 64,
        }
    }
}

impl RemoteConfig {
    fn api_key(&self) -> String {
        self.api_key
            .as_ref()
            .map(|key| key.expose().to_owned())
            .unwrap_or_else(|| std::env::var(&self.api_key_env).unwrap_or_default())
    }

    fn runtime(&self) -> Result<HttpRuntime> {
        if self.batch_size == 0 || self.model.is_empty() || self.base_url.is_empty() {
            return Err(Error::Config {
                reason: "remote model needs base_url, model and batch_size ≥ 1".to_owned(),
            });
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|runtime| HttpRuntime(Some(runtime)))
            .map_err(|e| Error::Config {
                reason: format!("cannot start the HTTP runtime: {e}"),
            })
    }

    fn http(&self) -> Result<reqwest::Client> {
        reqwest::Client::builder()
            .timeout(Duration::from_millis(self.timeout_ms))
            .build()
            .map_err(|e| Error::Config {
                reason: format!("cannot build the HTTP client: {e}"),
            })
    }
}

/// The small runtime a remote client drives its HTTP calls with. Dropped without waiting,
/// so a client can be dropped anywhere, async tasks included.
struct HttpRuntime(Option<tokio::runtime::Runtime>);

impl HttpRuntime {
    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        match &self.0 {
            Some(runtime) => runtime.block_on(future),
            None => unreachable!("the runtime is only taken on drop"),
        }
    }
}

impl Drop for HttpRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

pub struct OpenAiEmbedder {
    client: async_openai::Client<OpenAIConfig>,
    runtime: HttpRuntime,
    config: RemoteConfig,
    dimension: usize,
    model_id: String,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("base_url", &self.config.base_url)
            .field("model", &self.config.model)
            .finish()
    }
}

impl OpenAiEmbedder {
    /// Connects and embeds one probe text, so a wrong URL, key or model fails at start.
    pub fn connect(config: &RemoteConfig) -> Result<Self> {
        let runtime = config.runtime()?;
        let openai = OpenAIConfig::new()
            .with_api_base(config.base_url.trim_end_matches('/'))
            .with_api_key(config.api_key());
        let client = async_openai::Client::build(config.http()?, openai);
        let mut embedder = Self {
            client,
            runtime,
            config: config.clone(),
            dimension: 0,
            model_id: format!("openai:{}", config.model),
        };
        embedder.dimension = embedder.embed(&["probe"])?[0].len();
        Ok(embedder)
    }
}

impl Embed for OpenAiEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.config.batch_size) {
            let request = CreateEmbeddingRequest {
                model: self.config.model.clone(),
                // The API rejects empty strings; a space embeds as "nothing".
                input: EmbeddingInput::StringArray(
                    chunk
                        .iter()
                        .map(|t| {
                            if t.is_empty() {
                                " ".to_owned()
                            } else {
                                (*t).to_owned()
                            }
                        })
                        .collect(),
                ),
                ..CreateEmbeddingRequest::default()
            };
            let response = self
                .runtime
                .block_on(self.client.embeddings().create(request))
                .map_err(|e| Error::Remote {
                    url: self.config.base_url.clone(),
                    reason: e.to_string(),
                })?;
            let mut data = response.data;
            data.sort_by_key(|d| d.index);
            if data.len() != chunk.len()
                || data.iter().enumerate().any(|(i, d)| d.index as usize != i)
            {
                return Err(Error::Remote {
                    url: self.config.base_url.clone(),
                    reason: format!(
                        "asked for {} embeddings, got {} (indices must be 0..{})",
                        chunk.len(),
                        data.len(),
                        chunk.len()
                    ),
                });
            }
            for item in data {
                let mut vector = item.embedding;
                if self.dimension != 0 && vector.len() != self.dimension {
                    return Err(Error::Remote {
                        url: self.config.base_url.clone(),
                        reason: format!(
                            "embedding of dimension {} where the model gave {} before",
                            vector.len(),
                            self.dimension
                        ),
                    });
                }
                let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                vector.iter_mut().for_each(|v| *v /= norm);
                vectors.push(vector);
            }
        }
        Ok(vectors)
    }
}

#[derive(Serialize)]
struct RerankRequest<'a> {
    model: &'a str,
    query: &'a str,
    documents: Vec<&'a str>,
    top_n: usize,
}

#[derive(Deserialize)]
struct RerankResponse {
    results: Vec<RerankResult>,
}

#[derive(Deserialize)]
struct RerankResult {
    index: usize,
    relevance_score: f32,
}

/// A rerank API in the Cohere shape: `POST {base_url}/rerank`.
pub struct RemoteReranker {
    http: reqwest::Client,
    runtime: HttpRuntime,
    config: RemoteConfig,
    name: String,
}

impl std::fmt::Debug for RemoteReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteReranker")
            .field("base_url", &self.config.base_url)
            .field("model", &self.config.model)
            .finish()
    }
}

impl RemoteReranker {
    pub fn new(config: &RemoteConfig) -> Result<Self> {
        Ok(Self {
            http: config.http()?,
            runtime: config.runtime()?,
            config: config.clone(),
            name: format!("remote:{}", config.model),
        })
    }
}

impl Rerank for RemoteReranker {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<f32>> {
        let url = format!("{}/rerank", self.config.base_url.trim_end_matches('/'));
        let remote = |reason: String| Error::Remote {
            url: url.clone(),
            reason,
        };
        let mut scores = vec![f32::NEG_INFINITY; candidates.len()];
        for (chunk_index, chunk) in candidates.chunks(self.config.batch_size).enumerate() {
            let request = RerankRequest {
                model: &self.config.model,
                query,
                documents: chunk.iter().map(|c| c.text).collect(),
                top_n: chunk.len(),
            };
            let response: RerankResponse = self.runtime.block_on(async {
                let reply = self
                    .http
                    .post(&url)
                    .bearer_auth(self.config.api_key())
                    .json(&request)
                    .send()
                    .await
                    .map_err(|e| remote(e.to_string()))?;
                let status = reply.status();
                if !status.is_success() {
                    let body = reply.text().await.unwrap_or_default();
                    return Err(remote(format!(
                        "HTTP {status}: {}",
                        body.chars().take(300).collect::<String>()
                    )));
                }
                reply
                    .json::<RerankResponse>()
                    .await
                    .map_err(|e| remote(format!("unexpected response: {e}")))
            })?;
            let offset = chunk_index * self.config.batch_size;
            for result in response.results {
                let slot = scores
                    .get_mut(offset + result.index)
                    .filter(|_| result.index < chunk.len())
                    .ok_or_else(|| {
                        remote(format!(
                            "result index {} out of range for {} documents",
                            result.index,
                            chunk.len()
                        ))
                    })?;
                *slot = result.relevance_score;
            }
        }
        if let Some(missing) = scores.iter().position(|s| *s == f32::NEG_INFINITY) {
            return Err(remote(format!("no score for document {missing}")));
        }
        Ok(scores)
    }
}
