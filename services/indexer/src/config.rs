//! Indexer settings (see `deploy/indexer.example.toml`, which lists every key with its default).

use casement_events::DecodeConfig;
use casement_inference::EmbedderConfig;
pub use casement_pipeline::config::{EnrichConfig, EnrichMode, LlmConfig, PipelineConfig};
pub use casement_pipeline::fetch::FetchConfig;
use casement_store::StoreConfig;
use casement_text::TextConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Environment variables override the file as `CASEMENT_INDEXER__<SECTION>__<KEY>`.
pub const ENV_PREFIX: &str = "CASEMENT_INDEXER";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct IndexerConfig {
    pub kafka: KafkaConfig,
    /// Event formats and the size limit (bigger events are dead-lettered).
    pub events: DecodeConfig,
    /// Who may read a document whose event does not say (`default`: `public` or `deny`),
    /// and MediaWiki namespaces restricted to groups.
    pub access: casement_events::AccessConfig,
    pub pipeline: PipelineConfig,
    pub enrich: EnrichConfig,
    pub embedder: EmbedderConfig,
    pub store: StoreConfig,
    pub admin: AdminConfig,
    pub log: LogConfig,
    pub text: TextConfig,
    /// Where the content of revisions that events only name is fetched (MediaWiki's
    /// EventBus `page_change` topics); off while `api_url` is empty.
    pub fetch: FetchConfig,
    /// The mass-deletion guard: a burst of deletes over `max_delete_share` of the live
    /// documents within `delete_window_secs` is held (not committed past) until the
    /// indexer starts with `allow_mass_delete = true`.
    pub sources: casement_pipeline::DeleteGuardConfig,
}

#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    pub bootstrap_servers: String,
    pub topic: String,
    pub group_id: String,
    /// Dead-letter topic; empty means `<topic>.dlq`.
    pub dead_letter_topic: String,
    /// Passed to librdkafka as they are (consumer and producer), e.g.
    /// `"session.timeout.ms" = "6000"` or the `security.protocol` / `sasl.*` settings.
    /// Credentials among them (`sasl.password`, `*.password`, `*secret*`, PEM keys,
    /// `sasl.oauthbearer.config`) are shown as `<redacted>` by `check-config` and logs.
    #[serde(serialize_with = "serialize_redacted")]
    pub properties: BTreeMap<String, toml::Value>,
}

/// Whether a librdkafka property holds a credential.
pub fn is_secret_property(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.contains("password")
        || key.contains("secret")
        || key.ends_with(".pem")
        || key == "sasl.oauthbearer.config"
}

fn redacted(properties: &BTreeMap<String, toml::Value>) -> BTreeMap<&str, toml::Value> {
    properties
        .iter()
        .map(|(key, value)| {
            let shown = if is_secret_property(key) {
                toml::Value::String(casement_config::REDACTED.to_owned())
            } else {
                value.clone()
            };
            (key.as_str(), shown)
        })
        .collect()
}

fn serialize_redacted<S: serde::Serializer>(
    properties: &BTreeMap<String, toml::Value>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&redacted(properties), serializer)
}

impl std::fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("topic", &self.topic)
            .field("group_id", &self.group_id)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field("properties", &redacted(&self.properties))
            .finish()
    }
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
pub struct AdminConfig {
    /// `/healthz`, `/readyz` and `/metrics`.
    /// An IP address or a host name, with a port (`localhost:8080`).
    #[serde(deserialize_with = "casement_config::listen::deserialize")]
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

impl IndexerConfig {
    /// The decoder's settings: `[events]` with `[access]`.
    pub fn decode(&self) -> DecodeConfig {
        self.events.clone().with_access(self.access.clone())
    }
}

impl casement_config::Config for IndexerConfig {
    fn validate(&self) -> Result<(), String> {
        self.decode().validate()?;
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
            if value.as_str() == Some(casement_config::REDACTED) {
                return Err(format!(
                    "kafka.properties.{key} is {}, what check-config prints in place of a secret; set the real value",
                    casement_config::REDACTED
                ));
            }
        }
        self.pipeline.validate()?;
        self.enrich.validate()?;
        self.fetch.validate()?;
        self.sources.validate("sources")?;
        self.embedder.validate()?;
        self.store.validate()?;
        self.text.validate()
    }
}
