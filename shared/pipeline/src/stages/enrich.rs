//! Enrich stage: the situating context embedded with each sentence (DESIGN.md, "Enrichment").
//!
//! - Structural (default): title and heading path. Free and deterministic.
//! - None: the sentence alone (for users whose sentences stand on their own, and the
//!   evaluation's ablation).
//! - LLM: one chat-completion call per changed section to any OpenAI-compatible endpoint.
//!   A context is reused, without a call, from the moka cache or from the index (the
//!   records of an unchanged section carry it in their payload, so a restart does not pay
//!   again). The key is the section's content hash + title and heading path + prompt
//!   version + model. When the call fails the section gets the structural context and the
//!   failure is counted; the next revision that changes the section tries again.

use std::collections::HashMap;
use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequestArgs,
};
use casement_text::{
    STRUCTURAL_CONTEXT_SOURCE, Section, SegmentedRevision, SentenceRecord, hash_hex,
    structural_context,
};

use crate::config::{EnrichConfig, EnrichMode, LlmConfig};
use crate::metrics::Metrics;

/// The context source of records embedded without context (`enrich.mode = "none"`).
pub const NO_CONTEXT_SOURCE: &str = "none";

/// Section id → (context, context source).
pub type Contexts = HashMap<String, (String, String)>;

/// The prompt template. Cached and indexed contexts are keyed by `enrich.llm.prompt_version`:
/// bump it when you change the prompt.
const SYSTEM_PROMPT: &str = "You situate one section of a document within the whole \
document, to improve search retrieval of the section's sentences. Answer with one or two \
short sentences of context and nothing else.";

#[derive(Debug, Clone)]
pub enum Enricher {
    Structural,
    /// No context: the sentence alone is embedded (and indexed for BM25).
    None,
    Llm(Box<LlmEnricher>),
}

#[derive(Debug, Clone)]
pub struct LlmEnricher {
    client: async_openai::Client<OpenAIConfig>,
    config: LlmConfig,
    source: String,
    cache: moka::sync::Cache<String, String>,
    metrics: Metrics,
}

impl Enricher {
    pub fn new(config: &EnrichConfig, metrics: &Metrics) -> anyhow::Result<Self> {
        Ok(match config.mode {
            EnrichMode::Structural => Self::Structural,
            EnrichMode::None => Self::None,
            EnrichMode::Llm => Self::Llm(Box::new(LlmEnricher::new(&config.llm, metrics)?)),
        })
    }

    /// The context of every section of `segmented`; `current` is what the index holds.
    pub async fn contexts(
        &self,
        segmented: &SegmentedRevision,
        current: &[SentenceRecord],
    ) -> Contexts {
        let mut contexts = Contexts::new();
        for section in &segmented.sections {
            let structural = structural_context(&segmented.title, &section.heading_path);
            let context = match self {
                Self::Llm(llm) if !section.sentences.is_empty() => {
                    llm.context(segmented, section, current, structural).await
                }
                Self::None => (String::new(), NO_CONTEXT_SOURCE.to_owned()),
                _ => (structural, STRUCTURAL_CONTEXT_SOURCE.to_owned()),
            };
            contexts.insert(section.id.clone(), context);
        }
        contexts
    }
}

impl LlmEnricher {
    pub fn new(config: &LlmConfig, metrics: &Metrics) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs))
            .build()?;
        let openai = OpenAIConfig::new()
            .with_api_base(config.base_url.trim_end_matches('/'))
            .with_api_key(config.api_key.expose());
        Ok(Self {
            client: async_openai::Client::build(http, openai),
            source: format!("llm:{}:{}", config.model, config.prompt_version),
            cache: moka::sync::Cache::new(config.cache_entries),
            config: config.clone(),
            metrics: metrics.clone(),
        })
    }

    async fn context(
        &self,
        segmented: &SegmentedRevision,
        section: &Section,
        current: &[SentenceRecord],
        structural: String,
    ) -> (String, String) {
        let key = hash_hex(
            [
                section.content_hash.as_str(),
                &segmented.title,
                &section.heading_path.join("\u{1f}"),
                &self.config.prompt_version,
                &self.config.model,
            ]
            .join("\0")
            .as_bytes(),
        );
        let hits = &self.metrics.enrichment_cache;
        if let Some(context) = self.cache.get(&key) {
            hits.with_label_values(&["hit"]).inc();
            return (context, self.source.clone());
        }
        let indexed = current.iter().find(|r| {
            r.section_hash == section.content_hash
                && r.context_source == self.source
                && r.title == segmented.title
                && r.section_path == section.heading_path
        });
        if let Some(record) = indexed {
            hits.with_label_values(&["hit"]).inc();
            self.cache.insert(key, record.context.clone());
            return (record.context.clone(), self.source.clone());
        }
        hits.with_label_values(&["miss"]).inc();
        match self.call(segmented, section).await {
            Ok(context) => {
                self.cache.insert(key, context.clone());
                (context, self.source.clone())
            }
            Err(error) => {
                self.metrics.llm_failures.inc();
                tracing::warn!(doc_id = %segmented.doc_id, section = %section.id, %error,
                    "LLM enrichment failed; using the structural context");
                (structural, STRUCTURAL_CONTEXT_SOURCE.to_owned())
            }
        }
    }

    async fn call(
        &self,
        segmented: &SegmentedRevision,
        section: &Section,
    ) -> anyhow::Result<String> {
        let text: String = segmented.text[section.range.clone()]
            .chars()
            .take(self.config.max_section_chars)
            .collect();
        let request = CreateChatCompletionRequestArgs::default()
            .model(self.config.model.clone())
            .max_completion_tokens(self.config.max_tokens)
            .messages([
                ChatCompletionRequestSystemMessage::from(SYSTEM_PROMPT).into(),
                ChatCompletionRequestUserMessage::from(user_prompt(
                    &segmented.title,
                    &section.heading_path,
                    &text,
                ))
                .into(),
            ])
            .build()?;
        let response = self.client.chat().create(request).await?;
        let context = response
            .choices
            .into_iter()
            .find_map(|choice| choice.message.content)
            .map(|content| content.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        anyhow::ensure!(!context.is_empty(), "the model answered with no text");
        Ok(context)
    }
}

fn user_prompt(title: &str, heading_path: &[String], section: &str) -> String {
    format!(
        "<document_title>{title}</document_title>\n<section_path>{}</section_path>\n\
         <section>\n{section}\n</section>\nGive a short, succinct context that situates this \
         section within the document, for search retrieval.",
        heading_path.join(" > ")
    )
}
