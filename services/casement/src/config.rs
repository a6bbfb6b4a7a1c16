//! All-in-one settings (see `deploy/casement.example.toml`, which lists every key with its
//! default). Layered like the services': defaults, then the file, then
//! `CASEMENT__<SECTION>__<KEY>` variables; unknown keys are rejected. The sections the
//! services also have (`[events]`, `[pipeline]`, `[enrich]`, `[text]`, `[embedder]`,
//! `[store]`, `[auth]`, `[limits]`, `[search]`, `[rerank]`, `[eval]`, `[log]`) mean the same
//! here.

use std::net::SocketAddr;
use std::path::PathBuf;

use casement_config::logging::LogConfig;
use casement_events::DecodeConfig;
use casement_inference::EmbedderConfig;
use casement_pipeline::{EnrichConfig, FetchConfig, PipelineConfig};
use casement_query::config::{
    AuthConfig, EvalConfig, Limits, QueryConfig, RerankConfig, SearchConfig,
};
use casement_store::StoreConfig;
use casement_text::TextConfig;
use serde::{Deserialize, Serialize};

/// Environment variables override the file as `CASEMENT__<SECTION>__<KEY>`.
pub const ENV_PREFIX: &str = "CASEMENT";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CasementConfig {
    /// Everything the all-in-one keeps: the index (`index/`, unless `store.edge.path` is
    /// set), the source positions (`sources.json`), the dead-letter file.
    pub data_dir: PathBuf,
    /// The HTTP API: search, documents, the webhook, `/metrics`, `/openapi.json`.
    /// An IP address or a host name, with a port (`localhost:8080`).
    #[serde(deserialize_with = "casement_config::listen::deserialize")]
    pub listen: SocketAddr,
    pub sources: SourcesConfig,
    pub events: DecodeConfig,
    /// Who may read a document whose event does not say (`default`: `public` or `deny`),
    /// and MediaWiki namespaces restricted to groups. A watched folder's front matter and
    /// `.access` files say it for its files.
    pub access: casement_events::AccessConfig,
    pub pipeline: PipelineConfig,
    pub enrich: EnrichConfig,
    pub text: TextConfig,
    /// Where the content of revisions that events only name is fetched (a MediaWiki's
    /// `page_change` events); off while `api_url` is empty.
    pub fetch: FetchConfig,
    /// One embedding model for indexing and queries.
    pub embedder: EmbedderConfig,
    /// `store.edge.path` empty means `<data_dir>/index`.
    pub store: StoreConfig,
    pub auth: AuthConfig,
    pub limits: Limits,
    pub search: SearchConfig,
    pub rerank: RerankConfig,
    /// The golden set run against the index; on the bundled sample its own set by default.
    pub eval: EvalConfig,
    /// `casement audit`: the guard of its `--fix`.
    pub audit: casement_pipeline::audit::AuditConfig,
    pub log: LogConfig,
}

impl Default for CasementConfig {
    fn default() -> Self {
        let mut store = StoreConfig::default();
        store.edge.path = PathBuf::new();
        Self {
            data_dir: PathBuf::from("casement-data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            sources: SourcesConfig::default(),
            events: DecodeConfig::default(),
            access: casement_events::AccessConfig::default(),
            pipeline: PipelineConfig::default(),
            enrich: EnrichConfig::default(),
            fetch: FetchConfig::default(),
            text: TextConfig::default(),
            embedder: EmbedderConfig::default(),
            store,
            auth: AuthConfig::default(),
            limits: Limits::default(),
            search: SearchConfig::default(),
            rerank: RerankConfig::default(),
            eval: EvalConfig::default(),
            audit: Default::default(),
            log: LogConfig {
                // Readable by default: our own progress and decisions, others' warnings.
                filter: "warn,casement=info,casement_query=warn".into(),
                ..LogConfig::default()
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesConfig {
    /// The mass-deletion guard (`casement_pipeline::guard`): the largest share of the
    /// index's live documents one source may delete within `delete_window_secs` before
    /// its further deletes are held for an operator to release.
    pub max_delete_share: f64,
    pub delete_window_secs: u64,
    /// Every delete applied, however many: for one start, then unset.
    pub allow_mass_delete: bool,
    pub replay: ReplayConfig,
    pub watch: WatchConfig,
    pub webhook: WebhookConfig,
    /// A MediaWiki's change stream, followed live (`sources::mediawiki`).
    pub mediawiki: crate::sources::mediawiki::MediawikiConfig,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        let guard = casement_pipeline::DeleteGuardConfig::default();
        Self {
            max_delete_share: guard.max_delete_share,
            delete_window_secs: guard.delete_window_secs,
            allow_mass_delete: guard.allow_mass_delete,
            replay: ReplayConfig::default(),
            watch: WatchConfig::default(),
            webhook: WebhookConfig::default(),
            mediawiki: Default::default(),
        }
    }
}

impl SourcesConfig {
    pub fn guard(&self) -> casement_pipeline::DeleteGuardConfig {
        casement_pipeline::DeleteGuardConfig {
            max_delete_share: self.max_delete_share,
            delete_window_secs: self.delete_window_secs,
            allow_mass_delete: self.allow_mass_delete,
        }
    }
}

/// Revision logs (JSONL, optionally `.gz`, or directories of them) replayed at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayConfig {
    pub paths: Vec<PathBuf>,
    /// Milliseconds between events (0: as fast as the pipeline takes them), to watch
    /// live updates arrive.
    pub pace_ms: u64,
}

/// Folders of Markdown, HTML and text files: saving a file is a new revision of the
/// document `<doc_id_prefix><path relative to the folder, without extension>`; deleting it
/// deletes the document. Only regular files are read (symlinks only to a regular file inside
/// the folder), at most `max_file_bytes` of them; see `sources::watch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WatchConfig {
    pub dirs: Vec<PathBuf>,
    pub doc_id_prefix: String,
    /// Follow file-system notifications (inotify): a saved file is looked at at once.
    /// Off, or where they cannot be had (a network file system, a watch that fails to
    /// start: logged), the folders are scanned every `poll_ms`.
    pub notify: bool,
    /// How often the folders are scanned for changes without notifications.
    pub poll_ms: u64,
    /// A changed file is read once it has not been written for this long (its
    /// modification time that far in the past), or two scans this far apart saw the same
    /// size and time: a file being written gives one revision, not one per write. 0 reads
    /// a change at the first scan that sees it.
    pub settle_ms: u64,
    /// The largest file read, in bytes: `events.max_event_bytes`, filled in by
    /// [`CasementConfig::watch`] (not a key of its own). Unset, the watcher takes the
    /// segmenter's limit (`casement_text::segmenter::MAX_DOCUMENT_BYTES`), the most any
    /// valid `events.max_event_bytes` allows.
    #[serde(skip)]
    pub max_file_bytes: Option<usize>,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            dirs: Vec::new(),
            doc_id_prefix: String::new(),
            notify: true,
            poll_ms: 500,
            settle_ms: 100,
            max_file_bytes: None,
        }
    }
}

impl WatchConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.poll_ms == 0 {
            return Err("sources.watch.poll_ms must be at least 1".into());
        }
        if self.settle_ms > MAX_SETTLE_MS {
            return Err(format!(
                "sources.watch.settle_ms = {} must be at most {MAX_SETTLE_MS} (one hour)",
                self.settle_ms
            ));
        }
        Ok(())
    }
}

/// An hour: a longer wait is a typo, not a setting.
const MAX_SETTLE_MS: u64 = 3_600_000;

/// `POST /v1/events`: one event per request, in any format the Kafka indexer decodes.
/// The dead-letter keys are here for history; the file takes every source's rejects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookConfig {
    pub enabled: bool,
    /// How long a request waits for its event to be written before answering 202
    /// (accepted, still in the pipeline).
    pub wait_ms: u64,
    /// Rejected events, one JSON line each (original bytes, reason); empty means
    /// `<data_dir>/dead-letters.jsonl`.
    pub dead_letter_file: PathBuf,
    /// The dead-letter file's cap: an append that would take it past this first renames it
    /// to `<name>.1` (replacing an older one), so the two take at most twice this.
    pub dead_letter_max_bytes: u64,
    /// A payload (or key) longer than this is kept as its length and XXH3-128 hash only.
    pub dead_letter_max_payload_bytes: usize,
    /// Bytes of 202-accepted events kept in `<data_dir>/accepted/` until they are applied;
    /// when an event does not fit, the request gets 503 with `Retry-After` instead of 202.
    pub journal_max_bytes: u64,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            wait_ms: 10_000,
            dead_letter_file: PathBuf::new(),
            dead_letter_max_bytes: 64 * 1024 * 1024,
            dead_letter_max_payload_bytes: 64 * 1024,
            journal_max_bytes: 256 * 1024 * 1024,
        }
    }
}

impl WebhookConfig {
    /// The dead-letter file's size settings (checked here, once, at start).
    pub fn validate(&self) -> Result<(), String> {
        if self.dead_letter_max_bytes < MIN_DEAD_LETTER_FILE_BYTES {
            return Err(format!(
                "sources.webhook.dead_letter_max_bytes = {} must be at least \
                 {MIN_DEAD_LETTER_FILE_BYTES}: a letter without its payload has to fit",
                self.dead_letter_max_bytes
            ));
        }
        if self.dead_letter_max_payload_bytes as u64 > self.dead_letter_max_bytes {
            return Err(format!(
                "sources.webhook.dead_letter_max_payload_bytes = {} must not exceed \
                 sources.webhook.dead_letter_max_bytes = {}",
                self.dead_letter_max_payload_bytes, self.dead_letter_max_bytes
            ));
        }
        Ok(())
    }
}

/// The smallest dead-letter file cap: room for a few letters kept as hashes.
const MIN_DEAD_LETTER_FILE_BYTES: u64 = 4096;

/// The dead-letter file's settings, resolved ([`CasementConfig::dead_letter_file`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterFileConfig {
    pub path: PathBuf,
    pub max_bytes: u64,
    pub max_payload_bytes: usize,
}

impl CasementConfig {
    /// The store settings with the index path resolved: the index `serving.json` names
    /// (`casement migrate`; [`crate::serving`]), `<data_dir>/index` when there is none.
    /// A malformed pointer is reported by [`crate::engine::Engine::start`], which reads it
    /// first; here it falls back to the first index.
    pub fn store(&self) -> StoreConfig {
        let mut store = self.store.clone();
        if store.edge.path.as_os_str().is_empty() {
            let serving = crate::serving::Serving::load(&self.data_dir).unwrap_or_default();
            store.edge.path = self.data_dir.join(serving.index);
        }
        store
    }

    /// The dead-letter file: its path (`<data_dir>/dead-letters.jsonl` unless set) and caps.
    pub fn dead_letter_file(&self) -> DeadLetterFileConfig {
        let webhook = &self.sources.webhook;
        let path = if webhook.dead_letter_file.as_os_str().is_empty() {
            self.data_dir.join("dead-letters.jsonl")
        } else {
            webhook.dead_letter_file.clone()
        };
        DeadLetterFileConfig {
            path,
            max_bytes: webhook.dead_letter_max_bytes,
            max_payload_bytes: webhook.dead_letter_max_payload_bytes,
        }
    }

    /// The watch settings with the largest file to read set to `events.max_event_bytes`.
    pub fn watch(&self) -> WatchConfig {
        WatchConfig {
            max_file_bytes: Some(self.events.max_event_bytes),
            ..self.sources.watch.clone()
        }
    }

    /// The decoder's settings: `[events]` with `[access]`.
    pub fn decode(&self) -> DecodeConfig {
        self.events.clone().with_access(self.access.clone())
    }

    /// The query service's view.
    pub fn query(&self) -> QueryConfig {
        QueryConfig {
            listen: self.listen,
            auth: self.auth.clone(),
            limits: self.limits.clone(),
            search: self.search.clone(),
            rerank: self.rerank.clone(),
            embedder: self.embedder.clone(),
            store: self.store(),
            eval: self.eval.clone(),
            log: self.log.clone(),
        }
    }
}

impl casement_config::Config for CasementConfig {
    /// The wikis the fetcher may fetch from are `fetch.domains`, or when that is empty the
    /// stream's `sources.mediawiki.domains`.
    /// A polled wiki (`sources.mediawiki.api_url`) is fetched from through the same API,
    /// unless `fetch.api_url` says otherwise, and is the one wiki of its events.
    fn resolve_defaults(&mut self) {
        let polled = &self.sources.mediawiki;
        if polled.polling() {
            if self.fetch.api_url.is_empty() {
                self.fetch.api_url = polled.api_url.clone();
            }
            if self.sources.mediawiki.domains.is_empty()
                && let Some(domain) = self.sources.mediawiki.polled_domain()
            {
                self.sources.mediawiki.domains = vec![domain];
            }
        }
        if self.fetch.domains.is_empty() {
            self.fetch.domains = self.sources.mediawiki.domains.clone();
        }
    }

    fn validate(&self) -> Result<(), String> {
        if self.data_dir.as_os_str().is_empty() {
            return Err("data_dir must not be empty".into());
        }
        self.sources.guard().validate("sources")?;
        self.sources.watch.validate()?;
        self.sources.webhook.validate()?;
        if self.sources.webhook.journal_max_bytes < self.events.max_event_bytes as u64 {
            return Err(format!(
                "sources.webhook.journal_max_bytes = {} must be at least events.max_event_bytes \
                 = {}: one accepted event has to fit",
                self.sources.webhook.journal_max_bytes, self.events.max_event_bytes
            ));
        }
        if self.search.indexed_window_radius != self.text.window_radius {
            return Err(format!(
                "search.indexed_window_radius ({}) must equal text.window_radius ({}): \
                 the windows are indexed with the latter",
                self.search.indexed_window_radius, self.text.window_radius
            ));
        }
        self.decode().validate()?;
        self.pipeline.validate()?;
        self.enrich.validate()?;
        self.fetch.validate()?;
        self.sources.mediawiki.validate()?;
        if self.sources.mediawiki.enabled() && !self.fetch.enabled() {
            return Err(
                "sources.mediawiki needs fetch.api_url: page_change events carry no content, \
                 so each revision is fetched from the wiki's API (e.g. \
                 \"https://{domain}/w/api.php\")"
                    .into(),
            );
        }
        self.text.validate()?;
        self.audit.validate()?;
        self.store().validate()?;
        casement_config::Config::validate(&self.query())
    }
}
