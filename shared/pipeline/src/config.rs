//! Settings of the pipeline's own stages: lanes and channels, retries, the embedding
//! cache, and enrichment. Each service embeds them in its config as `[pipeline]` and
//! `[enrich]` (see `deploy/*.example.toml`, which list every key with its default).

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Documents processed concurrently (events of one document always run in order). The
    /// more lanes, the more sentences wait for the model at once, so batches are full and of
    /// similar lengths; each lane holds one event.
    pub lanes: usize,
    /// Capacity of each channel between stages; a full pipeline pauses the consumer.
    pub channel_capacity: usize,
    /// Offsets are committed at most this often (and on revoke and shutdown).
    pub commit_interval_ms: u64,
    /// First retry delay after a store or model failure; doubles up to `retry_max_ms`.
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// Embedding cache entries (one vector each, ~1.6 KB at 384 dimensions).
    pub embedding_cache_entries: u64,
    /// Models run by this many threads at once.
    pub embed_concurrency: usize,
    /// Sentences per model call. The batcher gathers them across events (a backlog of small
    /// edits makes full batches) and gives every waiting event a turn, so a large document
    /// delays a small edit by a batch or two.
    pub embed_batch: usize,
    /// A batch that is not full waits at most this long for more sentences, and only while
    /// other events are on their way to the model: a lone live edit never waits.
    pub embed_linger_ms: u64,
    /// Writes of many events are made durable by one flush of the store (group commit):
    /// what finished while the previous flush ran, at most this many events. An event is
    /// acknowledged only after the flush that covers it.
    pub group_commit_events: usize,
    /// A revision with more sentences than this is dead-lettered (`too_large`) instead of
    /// being embedded: a page of text without punctuation or a runaway generated file
    /// would otherwise hold the model for minutes and its vectors in memory.
    pub max_document_sentences: usize,
    /// On shutdown, events in hand get this long to finish before the service stops
    /// (what is not finished is not committed, so it is delivered again at the next start).
    pub shutdown_grace_ms: u64,
    /// An event whose revision cannot be fetched from its wiki (down, slow, answering
    /// nonsense) is retried, parked aside while the lane goes on with other documents,
    /// for this long; then it is dead-lettered (`fetch_failed`, replayable) and its
    /// document's next events go on.
    pub fetch_give_up_secs: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            lanes: 16,
            channel_capacity: 64,
            commit_interval_ms: 200,
            retry_initial_ms: 100,
            retry_max_ms: 10_000,
            embedding_cache_entries: 100_000,
            embed_concurrency: 1,
            embed_batch: 32,
            embed_linger_ms: 5,
            group_commit_events: 512,
            max_document_sentences: 5_000,
            shutdown_grace_ms: 30_000,
            fetch_give_up_secs: 600,
        }
    }
}

impl PipelineConfig {
    pub fn retry_initial(&self) -> Duration {
        Duration::from_millis(self.retry_initial_ms)
    }
    pub fn retry_max(&self) -> Duration {
        Duration::from_millis(self.retry_max_ms)
    }
    pub fn embed_linger(&self) -> Duration {
        Duration::from_millis(self.embed_linger_ms)
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
    pub fn fetch_give_up(&self) -> Duration {
        Duration::from_secs(self.fetch_give_up_secs)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnrichMode {
    /// Title and heading path: free and deterministic.
    Structural,
    /// One call per changed section to an OpenAI-compatible chat endpoint.
    Llm,
    /// No context: each sentence is embedded and indexed alone.
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnrichConfig {
    pub mode: EnrichMode,
    pub llm: LlmConfig,
}

impl Default for EnrichConfig {
    fn default() -> Self {
        Self {
            mode: EnrichMode::Structural,
            llm: LlmConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// OpenAI-compatible API root, e.g. `https://api.openai.com/v1` or a local server.
    pub base_url: String,
    pub model: String,
    /// Sent as a bearer token; empty for servers that need none. Prefer the environment:
    /// `CASEMENT_INDEXER__ENRICH__LLM__API_KEY`.
    pub api_key: casement_config::Secret,
    /// Part of the cache key and of `context_source`: bump it when the prompt changes.
    pub prompt_version: String,
    pub timeout_secs: u64,
    /// Section text sent to the model is cut to this many characters.
    pub max_section_chars: usize,
    pub max_tokens: u32,
    pub cache_entries: u64,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: "http://localhost:8000/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key: casement_config::Secret::default(),
            prompt_version: "v1".into(),
            timeout_secs: 30,
            max_section_chars: 6000,
            max_tokens: 100,
            cache_entries: 50_000,
        }
    }
}

impl PipelineConfig {
    /// The checks every service runs at start.
    pub fn validate(&self) -> Result<(), String> {
        if self.lanes == 0
            || self.channel_capacity == 0
            || self.embed_concurrency == 0
            || self.embed_batch == 0
            || self.group_commit_events == 0
            || self.max_document_sentences == 0
        {
            return Err(
                "pipeline.lanes, channel_capacity, embed_concurrency, embed_batch, \
                 group_commit_events and max_document_sentences must be ≥ 1"
                    .into(),
            );
        }
        if self.retry_initial_ms == 0 || self.retry_max_ms < self.retry_initial_ms {
            return Err("pipeline.retry_initial_ms must be ≥ 1 and ≤ retry_max_ms".into());
        }
        Ok(())
    }
}

impl EnrichConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.mode == EnrichMode::Llm {
            let llm = &self.llm;
            if !(llm.base_url.starts_with("http://") || llm.base_url.starts_with("https://")) {
                return Err(format!(
                    "enrich.llm.base_url {:?} is not an http(s) URL",
                    llm.base_url
                ));
            }
            if llm.model.trim().is_empty() || llm.prompt_version.trim().is_empty() {
                return Err("enrich.llm.model and prompt_version must not be empty".into());
            }
        }
        Ok(())
    }
}
