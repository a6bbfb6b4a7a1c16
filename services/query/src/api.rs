//! The wire format of the HTTP API (described in `openapi.json`, served at
//! `/openapi.json`), and the validation of requests against the configured limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{Limits, SearchConfig};
use crate::error::ApiError;

/// `POST /v1/search`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SearchRequest {
    /// The question or keywords.
    pub query: String,
    /// Windows to return (after merge).
    #[serde(default)]
    pub top_k: Option<usize>,
    /// Only this tenant's documents (forced by a tenant-bound API key).
    #[serde(default)]
    pub tenant: Option<String>,
    /// Only these documents.
    #[serde(default)]
    pub doc_ids: Vec<String>,
    /// Rerank the merged windows (default from config).
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Sentences each side of a hit, at most the indexed radius.
    #[serde(default)]
    pub window_radius: Option<usize>,
    /// Read-your-writes: wait until each document is indexed at least at this revision.
    #[serde(default)]
    pub min_revision: BTreeMap<String, u64>,
    /// Most tokens (estimated) in all windows of the answer, e.g. the room left in a
    /// prompt; a window that does not fit is narrowed around its best match. At most (and
    /// by default) `search.token_budget`.
    #[serde(default)]
    pub token_budget: Option<usize>,
    /// Include per-stage timings in the answer.
    #[serde(default)]
    pub timings: bool,
    /// Only documents whose metadata has, for every key given, the value given (or one of
    /// the values of an array): keys of `store.indexed_metadata`; values strings, integers
    /// or booleans, or a non-empty array of strings or of integers.
    #[serde(default)]
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Leave out windows whose `scores.relevance` is below this (0 to 1; default
    /// `search.min_relevance`). An answer with no window left is the index's "I don't
    /// know".
    #[serde(default)]
    pub min_relevance: Option<f32>,
}

/// A request checked against the limits, with defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSearch {
    pub query: String,
    pub top_k: usize,
    pub tenant: Option<String>,
    pub doc_ids: Vec<String>,
    pub rerank: bool,
    pub window_radius: usize,
    pub min_revision: BTreeMap<String, u64>,
    pub token_budget: usize,
    /// The request set `token_budget` (the room in its prompt): the budget is shared out
    /// over the windows. Otherwise it is `search.token_budget`, a cap.
    pub budget_asked: bool,
    pub timings: bool,
    /// Metadata conditions, checked against `store.indexed_metadata`.
    pub metadata: Vec<casement_store::MetadataCondition>,
    pub min_relevance: f32,
    /// Who is reading: set by the handler from the key and the person's token; public
    /// documents only until it is.
    pub reader: casement_text::Reader,
}

/// Most values in one metadata condition's array.
pub const MAX_METADATA_VALUES: usize = 100;

/// `metadata` of a request as store conditions, each key one of `indexed`.
fn metadata_conditions(
    metadata: BTreeMap<String, serde_json::Value>,
    indexed: &[String],
) -> Result<Vec<casement_store::MetadataCondition>, ApiError> {
    use casement_store::{MetadataCondition, MetadataValues};
    use serde_json::Value;
    let invalid = |message: String| ApiError::Invalid(message);
    let mut conditions = Vec::with_capacity(metadata.len());
    for (key, value) in metadata {
        if !indexed.contains(&key) {
            return Err(invalid(if indexed.is_empty() {
                format!(
                    "metadata.{key}: no metadata key can be filtered on; the operator declares them in store.indexed_metadata"
                )
            } else {
                format!(
                    "metadata.{key}: not a filterable key; these are: {}",
                    indexed.join(", ")
                )
            }));
        }
        let shape = || {
            invalid(format!(
                "metadata.{key}: give a string, an integer, a boolean, or a non-empty array of at most {MAX_METADATA_VALUES} strings or of integers"
            ))
        };
        let values = match value {
            Value::String(s) => MetadataValues::Keywords(vec![s]),
            Value::Bool(b) => MetadataValues::Bool(b),
            Value::Number(n) => MetadataValues::Integers(vec![n.as_i64().ok_or_else(shape)?]),
            Value::Array(items) if !items.is_empty() && items.len() <= MAX_METADATA_VALUES => {
                if items.iter().all(Value::is_string) {
                    MetadataValues::Keywords(
                        items
                            .into_iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect(),
                    )
                } else {
                    MetadataValues::Integers(
                        items
                            .iter()
                            .map(Value::as_i64)
                            .collect::<Option<_>>()
                            .ok_or_else(shape)?,
                    )
                }
            }
            _ => return Err(shape()),
        };
        conditions.push(MetadataCondition { key, values });
    }
    Ok(conditions)
}

impl SearchRequest {
    pub fn validate(
        self,
        limits: &Limits,
        search: &SearchConfig,
        rerank_by_default: bool,
        indexed_metadata: &[String],
    ) -> Result<ValidSearch, ApiError> {
        let invalid = |message: String| Err(ApiError::Invalid(message));
        let query = self.query.trim().to_owned();
        if query.is_empty() {
            return invalid("query must not be empty".into());
        }
        let chars = query.chars().count();
        if chars > limits.max_query_chars {
            return invalid(format!(
                "query has {chars} characters; the limit is {}",
                limits.max_query_chars
            ));
        }
        let top_k = self.top_k.unwrap_or(search.default_top_k);
        if top_k == 0 || top_k > limits.max_top_k {
            return invalid(format!(
                "top_k = {top_k} must be between 1 and {}",
                limits.max_top_k
            ));
        }
        let radius = self.window_radius.unwrap_or(search.indexed_window_radius);
        if radius > search.indexed_window_radius {
            return invalid(format!(
                "window_radius = {radius} is larger than the indexed radius {}",
                search.indexed_window_radius
            ));
        }
        for (name, count) in [
            ("doc_ids", self.doc_ids.len()),
            ("min_revision", self.min_revision.len()),
        ] {
            if count > limits.max_doc_ids {
                return invalid(format!(
                    "{name} has {count} entries; the limit is {}",
                    limits.max_doc_ids
                ));
            }
        }
        if self
            .doc_ids
            .iter()
            .chain(self.min_revision.keys())
            .any(String::is_empty)
        {
            return invalid("document ids must not be empty".into());
        }
        let token_budget = self.token_budget.unwrap_or(search.token_budget);
        if token_budget == 0 || token_budget > search.token_budget {
            return invalid(format!(
                "token_budget = {token_budget} must be between 1 and {}",
                search.token_budget
            ));
        }
        if self.tenant.as_deref() == Some("") {
            return invalid("tenant must not be empty (leave it out for every tenant)".into());
        }
        let metadata = metadata_conditions(self.metadata, indexed_metadata)?;
        let min_relevance = self.min_relevance.unwrap_or(search.min_relevance);
        if !(0.0..=1.0).contains(&min_relevance) {
            return invalid(format!(
                "min_relevance = {min_relevance} must be between 0 and 1"
            ));
        }
        Ok(ValidSearch {
            reader: casement_text::Reader::public(),
            min_relevance,
            query,
            top_k,
            tenant: self.tenant,
            doc_ids: self.doc_ids,
            rerank: self.rerank.unwrap_or(rerank_by_default),
            window_radius: radius,
            min_revision: self.min_revision,
            token_budget,
            budget_asked: self.token_budget.is_some(),
            timings: self.timings,
            metadata,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SearchResponse {
    /// Windows in final order (reranked when `reranker` is set).
    pub windows: Vec<WindowAnswer>,
    /// The reranker that ordered the windows, if any.
    pub reranker: Option<String>,
    /// Why fewer than `top_k` windows came back, when they did: `no_more_matches` (the
    /// index holds no more windows that match the request's filters), `token_budget` (the
    /// rest did not fit the token budget), `min_relevance` (the rest scored below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<String>,
    /// Milliseconds per stage, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings_ms: Option<Timings>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct WindowAnswer {
    pub doc_id: String,
    pub title: String,
    /// The document's address (a wiki page, a file).
    pub url: Option<String>,
    /// The address of the revision these sentences were read from (a wiki's
    /// `index.php?oldid=N`), when the source gives one: it reads as quoted after later
    /// edits.
    pub revision_url: Option<String>,
    pub tenant: Option<String>,
    /// The document's metadata, as its change event gave it (`{}` when none).
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub section_path: Vec<String>,
    /// The document revision these sentences were indexed from.
    pub revision: u64,
    pub text: String,
    /// Character range (Unicode scalar values) of `text` in the document.
    pub char_start: usize,
    pub char_end: usize,
    /// Characters (Unicode scalar values, as `char_start`) of the content as it was
    /// submitted that produced this window: slicing the submitted text with them gives the
    /// span the window was extracted from (its markup included). `null` for documents
    /// indexed before these offsets were kept.
    pub source_start: Option<usize>,
    pub source_end: Option<usize>,
    /// Links inside `text`: their text, where they point (resolved against the document's
    /// `url` when relative) and their characters in `text`.
    pub links: Vec<LinkAnswer>,
    /// The sentences that matched, for highlighting.
    pub matches: Vec<MatchAnswer>,
    pub scores: Scores,
    /// Estimated tokens of `text`.
    pub tokens: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MatchAnswer {
    pub sentence: String,
    pub char_start: usize,
    pub char_end: usize,
    /// Characters of the submitted content that produced the sentence (see
    /// `WindowAnswer.source_start`).
    pub source_start: Option<usize>,
    pub source_end: Option<usize>,
    /// The sentence hit's fused (reciprocal rank fusion) score.
    pub score: f32,
}

/// A link inside a window's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LinkAnswer {
    pub text: String,
    pub url: String,
    /// Characters (Unicode scalar values) of the link's text in the window's `text`.
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Scores {
    /// Best fused score among the window's matched sentences.
    pub fused: f32,
    /// The reranker's score, when the window was reranked.
    pub rerank: Option<f32>,
    /// Cosine similarity of the question's vector and the window's closest matched
    /// sentence's (as the index stores it); 0 when the vectors could not be read.
    pub similarity: f32,
    /// The calibrated probability (0 to 1) that the window answers the question, from its
    /// similarity and how much of the question's words it holds (fitted by `make
    /// train-ranker`; see docs/query-api.md, "I don't know"). Comparable across questions, unlike
    /// `fused`.
    pub relevance: f32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Timings {
    pub wait: f64,
    pub embed: f64,
    pub search: f64,
    pub expand: f64,
    pub merge: f64,
    pub rerank: f64,
    pub select: f64,
    pub total: f64,
}

/// `GET /v1/documents/{doc_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DocumentAnswer {
    pub doc_id: String,
    pub revision: u64,
    pub deleted: bool,
    pub title: String,
    pub url: Option<String>,
    /// The indexed revision's own address, when its source gives one.
    pub revision_url: Option<String>,
    pub tenant: Option<String>,
    pub sentence_count: usize,
    pub sections: Vec<SectionAnswer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SectionAnswer {
    pub section_id: String,
    pub path: Vec<String>,
    pub sentences: usize,
}

/// `GET /v1/documents/{doc_id}/text`: the citation text of the indexed revision, which
/// every `char_start`/`char_end` of a search answer points into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DocumentText {
    pub doc_id: String,
    pub revision: u64,
    pub tenant: Option<String>,
    /// Text no sentence window holds (a heading of an empty section, skipped code) reads
    /// as spaces of its length, so every offset still points where it did.
    pub text: String,
}

/// Every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ErrorDetail {
    /// A stable machine-readable code, e.g. `invalid_request`.
    pub code: String,
    pub message: String,
    /// With `revision_not_indexed`: the document and the revision the index holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed_revision: Option<u64>,
}
