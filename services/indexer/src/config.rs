//! Indexer settings (see `deploy/indexer.example.toml`, which lists every key with its default).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use casement_events::DecodeConfig;
use casement_inference::EmbedderConfig;
use casement_store::StoreConfig;
use casement_text::TextConfig;
use serde::{Deserialize, Serialize};

/// Environment variables override the file as `CASEMENT_INDEXER__<SECTION>__<KEY>`.
pub const ENV_PREFIX: &str = "CASEMENT_INDEXER";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct IndexerConfig {
    pub kafka: KafkaConfig,
    /// Event formats and the size limit (bigger events are dead-lettered).
    pub events: DecodeConfig,
    pub pipeline: PipelineConfig,
    pub enrich: EnrichConfig,
    pub embedder: EmbedderConfig,
    pub store: StoreConfig,
    pub admin: AdminConfig,
    pub log: LogConfig,
    pub text: TextConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    pub bootstrap_servers: String,
    pub topic: String,
    pub group_id: String,
    /// Dead-letter topic; empty means `<topic>.dlq`.
    pub dead_letter_topic: String,
    /// Passed to librdkafka as they are (consumer and producer), e.g.
    /// `"session.timeout.ms" = "6000"` or the `security.protocol` / `sasl.*` settings.
    pub properties: BTreeMap<String, toml::Value>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            bootstrap_servers: "localhost:9092".into(),
            topic: "casement.changes".into(),
            group_id: "casement-indexer".into(),
            dead_letter_topic: String::new(),
            properties: BTreeMap::new(),
        }
    }
}

impl KafkaConfig {
    pub fn dead_letter_topic(&self) -> String {
        if self.dead_letter_topic.is_empty() {
            format!("{}.dlq", self.topic)
        } else {
            self.dead_letter_topic.clone()
        }
    }

    /// The pass-through properties as librdkafka strings.
    pub fn property_strings(&self) -> Vec<(String, String)> {
        self.properties
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (key.clone(), value)
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Documents processed concurrently (events of one document always run in order).
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
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            lanes: 4,
            channel_capacity: 64,
            commit_interval_ms: 200,
            retry_initial_ms: 100,
            retry_max_ms: 10_000,
            embedding_cache_entries: 100_000,
            embed_concurrency: 1,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnrichMode {
    /// Title and heading path: free and deterministic.
    Structural,
    /// One call per changed section to an OpenAI-compatible chat endpoint.
    Llm,
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
    pub api_key: String,
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
            api_key: String::new(),
            prompt_version: "v1".into(),
            timeout_secs: 30,
            max_section_chars: 6000,
            max_tokens: 100,
            cache_entries: 50_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// `/healthz`, `/readyz` and `/metrics`.
    pub listen: SocketAddr,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
        }
    }
}

pub use casement_config::logging::{LogConfig, LogFormat};

impl casement_config::Config for IndexerConfig {
    fn validate(&self) -> Result<(), String> {
        let max = casement_text::segmenter::MAX_DOCUMENT_BYTES;
        if self.events.max_event_bytes == 0 || self.events.max_event_bytes > max {
            return Err(format!(
                "events.max_event_bytes = {} must be between 1 and {max}",
                self.events.max_event_bytes
            ));
        }
        let kafka = &self.kafka;
        for (key, value) in [
            ("kafka.bootstrap_servers", &kafka.bootstrap_servers),
            ("kafka.topic", &kafka.topic),
            ("kafka.group_id", &kafka.group_id),
        ] {
            if value.trim().is_empty() {
                return Err(format!("{key} must not be empty"));
            }
        }
        if kafka.dead_letter_topic() == kafka.topic {
            return Err("kafka.dead_letter_topic must differ from kafka.topic".into());
        }
        for (key, value) in &kafka.properties {
            if matches!(value, toml::Value::Array(_) | toml::Value::Table(_)) {
                return Err(format!("kafka.properties.{key} must be a string or number"));
            }
        }
        let p = &self.pipeline;
        if p.lanes == 0 || p.channel_capacity == 0 || p.embed_concurrency == 0 {
            return Err(
                "pipeline.lanes, channel_capacity and embed_concurrency must be ≥ 1".into(),
            );
        }
        if p.retry_initial_ms == 0 || p.retry_max_ms < p.retry_initial_ms {
            return Err("pipeline.retry_initial_ms must be ≥ 1 and ≤ retry_max_ms".into());
        }
        if self.enrich.mode == EnrichMode::Llm {
            let llm = &self.enrich.llm;
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
        self.embedder.validate()?;
        self.store.validate()?;
        self.text.validate()
    }
}
