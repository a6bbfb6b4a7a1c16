//! Query service settings (see `deploy/query.example.toml`, which lists every key with its
//! default). Layered like the indexer's: defaults, then the file, then
//! `CASEMENT_QUERY__<SECTION>__<KEY>` variables; unknown keys are rejected.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use casement_inference::{EmbedderConfig, Precision, RerankerConfig};
use casement_store::StoreConfig;
use serde::{Deserialize, Serialize};

/// Environment variables override the file as `CASEMENT_QUERY__<SECTION>__<KEY>`.
pub const ENV_PREFIX: &str = "CASEMENT_QUERY";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryConfig {
    /// Address the HTTP API (and `/metrics`, `/healthz`, `/readyz`) listens on.
    /// An IP address or a host name, with a port (`localhost:8080`).
    #[serde(deserialize_with = "casement_config::listen::deserialize")]
    pub listen: SocketAddr,
    pub auth: AuthConfig,
    pub limits: Limits,
    pub search: SearchConfig,
    pub rerank: RerankConfig,
    /// The query embedder: must be the model (and precision) the indexer embeds with.
    pub embedder: EmbedderConfig,
    pub store: StoreConfig,
    pub eval: EvalConfig,
    pub log: LogConfig,
}

impl Default for QueryConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            auth: AuthConfig::default(),
            limits: Limits::default(),
            search: SearchConfig::default(),
            rerank: RerankConfig::default(),
            embedder: EmbedderConfig::default(),
            store: StoreConfig::default(),
            eval: EvalConfig::default(),
            log: LogConfig::default(),
        }
    }
}

/// Bearer tokens. With no key configured the API is open (a warning is logged at start):
/// fine on localhost, never on a shared network.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub keys: Vec<ApiKey>,
    /// `/metrics` and `/openapi.json` need a key not bound to a tenant (an operator's);
    /// off by default so a Prometheus scrape works without one. No metric is per tenant.
    pub protect_ops: bool,
    /// Verifies the `X-Casement-User` token a bot passes for the signed-in person it
    /// answers: the reader's groups are then its key's groups that the token names too.
    /// Off when absent: a request with the header is then refused (401), never read as
    /// the key alone.
    pub jwt: Option<JwtConfig>,
    /// Serve with no key configured on an address other than loopback. Refused at start
    /// otherwise: without keys every caller is an operator (reads every document, and the
    /// all-in-one's webhook takes any event).
    pub allow_open: bool,
}

/// `[auth.jwt]`: how a person's token is verified. Exactly one of `secret` (HS256) and
/// `jwks_file` (a JSON Web Key Set of RS256/ES256 public keys, chosen by the token's
/// `kid`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// The HS256 shared secret, at least 32 bytes.
    pub secret: casement_config::Secret,
    /// A JSON Web Key Set file (`{"keys": [...]}`), read at start.
    pub jwks_file: Option<PathBuf>,
    /// When set, the token's `iss` must equal it.
    pub issuer: Option<String>,
    /// When set, the token's `aud` must hold it.
    pub audience: Option<String>,
    /// The claim holding the person's groups (an array of strings; a string of groups
    /// separated by spaces or commas is taken too). Missing: no groups (public only).
    pub groups_claim: String,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
}

impl Default for JwtConfig {
    fn default() -> Self {
        Self {
            secret: casement_config::Secret::default(),
            jwks_file: None,
            issuer: None,
            audience: None,
            groups_claim: "groups".into(),
            leeway_secs: 30,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiKey {
    /// The bearer token (`Authorization: Bearer <token>`); at least 16 characters.
    pub token: casement_config::Secret,
    /// When set, the key reads and writes only this tenant's documents: searches are
    /// filtered to it, `GET /v1/documents` and `min_revision` look in it, and events
    /// posted to the all-in-one's webhook must be for it; asking for another tenant is
    /// refused (403). A key without a tenant reads and writes every tenant, and is an
    /// operator's key: the admin routes (`/v1/admin/...`) need one.
    pub tenant: Option<String>,
    /// Who holds the key, for the logs: admin actions and refused requests name it (as
    /// `key = "…"`), never the token. Default: `keys[<index>]`.
    pub name: Option<String>,
    /// The groups whose documents the key reads (besides public ones): `[]` reads public
    /// documents only. Absent: every document (of its tenant, when it has one). A key with
    /// neither `tenant` nor `groups` is an operator's.
    pub groups: Option<Vec<String>>,
}

impl AuthConfig {
    /// Refuses to serve with no key on an address beyond this machine unless
    /// `allow_open`: without keys every caller reads every document. Checked with the
    /// config and again with the address a command line gives.
    pub fn check_open(&self, listen: SocketAddr) -> Result<(), String> {
        if self.keys.is_empty() && !self.allow_open && !listen.ip().is_loopback() {
            return Err(format!(
                "listen = {listen} is not a loopback address and no [[auth.keys]] is \
                 configured: every caller would read every document; configure keys, or set \
                 auth.allow_open = true to serve open on purpose"
            ));
        }
        Ok(())
    }
}

impl ApiKey {
    /// An operator's key: bound to no tenant and to no groups.
    pub fn is_operator(&self) -> bool {
        self.tenant.is_none() && self.groups.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Characters in a query.
    pub max_query_chars: usize,
    /// Windows one request may ask for.
    pub max_top_k: usize,
    /// Request body size.
    pub max_body_bytes: usize,
    /// Document ids in a filter, and entries in `min_revision`.
    pub max_doc_ids: usize,
    /// Whole-request deadline; past it the answer is 504.
    pub request_timeout_ms: u64,
    /// Longest `min_revision` wait before answering 409 (within the request deadline).
    pub max_wait_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_query_chars: 2_000,
            max_top_k: 50,
            max_body_bytes: 64 * 1024,
            max_doc_ids: 100,
            request_timeout_ms: 10_000,
            max_wait_ms: 5_000,
        }
    }
}

impl Limits {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// Windows returned when the request does not say.
    pub default_top_k: usize,
    /// Sentence hits fetched per requested window (several hits often merge into one).
    pub hits_per_window: usize,
    /// Candidates each channel (dense, BM25) contributes to the fusion.
    pub candidates: usize,
    /// The ranked lists fused: `hybrid` (dense and BM25 by reciprocal rank fusion, whose
    /// `k` is `store.rrf_k`), or `dense` or `bm25` alone.
    pub channels: casement_store::Channels,
    /// Query embeddings kept for repeated questions (support bots repeat them): entries of
    /// an LRU-like cache keyed by the exact query text; 0 turns it off. The vectors are the
    /// model's own, so a hit returns what a miss would compute.
    pub embedding_cache: u64,
    /// The window radius the indexer wrote (its `text.window_radius`); a request may ask
    /// for a smaller one.
    pub indexed_window_radius: usize,
    /// How merged windows are ranked: `best` (their best sentence's fused score) or `sum`
    /// (the sum over their matched sentences).
    pub window_score: crate::search::merge::WindowScore,
    /// A window whose tokens are at least this share contained in a higher-scoring window
    /// is dropped.
    pub containment: f32,
    /// When merging leaves fewer than `top_k` windows, merged windows longer than this
    /// (estimated tokens) are cut between their matches, so many hits in one long section
    /// still make `top_k` windows. An answer with `top_k` windows is never cut.
    pub merge_max_tokens: usize,
    /// Windows whose calibrated `scores.relevance` is below this are left out (0: none),
    /// unless a request says otherwise.
    pub min_relevance: f32,
    /// Most tokens returned in all windows of one answer (estimated tokens).
    pub token_budget: usize,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            default_top_k: 5,
            hits_per_window: 3,
            candidates: 100,
            channels: casement_store::Channels::Hybrid,
            embedding_cache: 10_000,
            indexed_window_radius: casement_text::TextConfig::default().window_radius,
            window_score: crate::search::merge::WindowScore::Best,
            containment: 0.6,
            merge_max_tokens: 600,
            min_relevance: 0.0,
            token_budget: 4_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RerankConfig {
    /// Which reranker runs when a request asks for reranking: `learned` (the default, the
    /// linear ranker `make train-ranker` fits on the tune half of SQuAD; see
    /// docs/benchmarks.md, "Retrieval quality"), `rescoring`, `cross-encoder`, `remote`, or
    /// `none`.
    pub reranker: RerankerConfig,
    /// Whether a request that does not say is reranked. On: the learned ranker adds 3.5
    /// points of MRR@10 on held-out SQuAD, and its SciFact nDCG@10 difference from
    /// retrieval order is within noise (the paired bootstrap interval of issue 37 holds 0;
    /// docs/benchmarks.md, "Retrieval quality").
    pub by_default: bool,
    /// Most merged windows scored per request (the best by retrieval); the search fetches
    /// enough hits for this many windows even when `top_k` is smaller.
    pub candidates: usize,
    /// The model rescoring embeds windows with (`kind = "rescoring"`): int8, each window
    /// cut to `max_tokens` (about `3/4 · max_tokens` words centred on its best match), 64 by
    /// default so that 10 windows score within the latency target (docs/benchmarks.md). Also sets
    /// how much of a window model rerankers (cross-encoder, remote) read.
    pub embedder: EmbedderConfig,
}

impl Default for RerankConfig {
    fn default() -> Self {
        Self {
            reranker: RerankerConfig::Learned(casement_inference::learned::LearnedConfig::default()),
            by_default: true,
            candidates: 20,
            embedder: EmbedderConfig {
                precision: Precision::Int8,
                max_tokens: 64,
                batch_size: 16,
                ..EmbedderConfig::default()
            },
        }
    }
}

/// The golden set evaluated against the live index (`crate::eval`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// The golden set (JSONL: `query`, `doc_id`, optional `text`, `tenant`, `id`), read at
    /// start (a missing or malformed file fails there) and again at every run, so cases can
    /// be added without a restart. Empty: no evaluation, and no `casement_eval_*` metrics.
    pub golden: PathBuf,
    /// Seconds between two runs.
    pub interval_secs: u64,
    /// A case passes when a window of its document (holding its text, if given) is among
    /// the first `k` returned.
    pub k: usize,
    /// The reader the golden set runs as: public documents and those of these groups
    /// (`[]`: public only). Absent: every document, as an operator reads. Only the scores
    /// leave the evaluation (as metrics), never a document.
    pub groups: Option<Vec<String>>,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            golden: PathBuf::new(),
            interval_secs: 300,
            k: 5,
            groups: None,
        }
    }
}

impl EvalConfig {
    /// The golden set's path, when evaluation is on.
    pub fn golden(&self) -> Option<&std::path::Path> {
        (!self.golden.as_os_str().is_empty()).then_some(self.golden.as_path())
    }

    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.interval_secs)
    }
}

pub use casement_config::logging::{LogConfig, LogFormat};

fn between(name: &str, value: usize, low: usize, high: usize) -> Result<(), String> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(format!("{name} = {value} must be between {low} and {high}"))
    }
}

impl casement_config::Config for QueryConfig {
    fn validate(&self) -> Result<(), String> {
        let l = &self.limits;
        between("limits.max_top_k", l.max_top_k, 1, 1000)?;
        between("limits.max_query_chars", l.max_query_chars, 1, 100_000)?;
        between("limits.max_body_bytes", l.max_body_bytes, 256, 16 << 20)?;
        between("limits.max_doc_ids", l.max_doc_ids, 1, 10_000)?;
        if l.request_timeout_ms == 0 {
            return Err("limits.request_timeout_ms must be at least 1".into());
        }
        let s = &self.search;
        between("search.default_top_k", s.default_top_k, 1, l.max_top_k)?;
        between("search.hits_per_window", s.hits_per_window, 1, 100)?;
        between("search.candidates", s.candidates, 1, 10_000)?;
        between("search.token_budget", s.token_budget, 1, 1_000_000)?;
        between("search.merge_max_tokens", s.merge_max_tokens, 64, 100_000)?;
        if !(0.0..=1.0).contains(&s.min_relevance) {
            return Err(format!(
                "search.min_relevance = {} must be between 0 and 1",
                s.min_relevance
            ));
        }
        if !(s.containment > 0.0 && s.containment <= 1.0) {
            return Err(format!(
                "search.containment = {} must be in (0, 1]",
                s.containment
            ));
        }
        between("rerank.candidates", self.rerank.candidates, 1, 1000)?;
        between("eval.k", self.eval.k, 1, l.max_top_k)?;
        if self.eval.interval_secs == 0 {
            return Err("eval.interval_secs must be at least 1".into());
        }
        for (i, key) in self.auth.keys.iter().enumerate() {
            if key.token.expose().chars().count() < 16 {
                return Err(format!(
                    "auth.keys[{i}].token must be at least 16 characters"
                ));
            }
            if self.auth.keys[..i].iter().any(|k| k.token == key.token) {
                return Err(format!("auth.keys[{i}].token is listed twice"));
            }
            if let Some(name) = &key.name {
                if name.is_empty()
                    || name.len() > 64
                    || !name.chars().all(|c| c.is_ascii_graphic() || c == ' ')
                {
                    return Err(format!(
                        "auth.keys[{i}].name must be 1 to 64 printable ASCII characters"
                    ));
                }
                if self.auth.keys[..i]
                    .iter()
                    .any(|k| k.name.as_deref() == Some(name))
                {
                    return Err(format!("auth.keys[{i}].name {name:?} is used twice"));
                }
            }
        }
        for (i, key) in self.auth.keys.iter().enumerate() {
            for group in key.groups.iter().flatten() {
                casement_text::access::check_group(group)
                    .map_err(|e| format!("auth.keys[{i}].groups: {e}"))?;
            }
        }
        if let Some(jwt) = &self.auth.jwt {
            match (jwt.secret.is_empty(), &jwt.jwks_file) {
                (true, None) | (false, Some(_)) => {
                    return Err(
                        "auth.jwt needs exactly one of secret (HS256) and jwks_file (RS256/ES256)"
                            .into(),
                    );
                }
                (false, None) if jwt.secret.expose().len() < 32 => {
                    return Err("auth.jwt.secret must be at least 32 bytes".into());
                }
                _ => {}
            }
            if jwt.groups_claim.trim().is_empty() {
                return Err("auth.jwt.groups_claim must not be empty".into());
            }
            crate::auth::UserTokens::load(jwt).map_err(|e| format!("{e:#}"))?;
        }
        self.auth.check_open(self.listen)?;
        self.embedder.validate()?;
        Ok(())
    }
}
