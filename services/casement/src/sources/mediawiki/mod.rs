//! A MediaWiki's changes, followed live: an EventStreams-style Server-Sent Events endpoint
//! of `mediawiki.page_change` events (Wikimedia's public
//! `…/v2/stream/mediawiki.page_change.v1`, or a wiki's own EventStreams in front of its
//! EventBus topics), or, for a wiki with only its Action API, its recent changes polled
//! ([`poll`]: `api_url` and no `stream_url`).
//!
//! - Events that pass the filters (`meta.domain`, namespace, title patterns) go to the
//!   pipeline as bytes, decoded like any `page_change`; content they do not carry is
//!   fetched by the pipeline's fetcher (`[fetch]`) once the fence lets them through.
//! - Resumes after a restart from the last event durably indexed: the pipeline's commits
//!   move the SSE id kept in `<data_dir>/mediawiki.json`, sent back as `Last-Event-ID`
//!   (EventStreams' ids are the Kafka offsets of the stream). Events filtered out after
//!   it are read and filtered again; events delivered twice (a reconnect) are stale.
//! - Reconnects with exponential backoff (and the server's `retry:` as the first delay)
//!   when the stream ends, fails or answers an error.

pub mod listing;
pub mod poll;
mod position;
mod sse;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use casement_pipeline::SourceId;
use prometheus::{Gauge, IntCounter, IntCounterVec, Opts, Registry};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use position::StreamPosition;
use sse::{Parsed, SseEvent, SseParser};

use super::Feeder;
use super::dead_letters::DeadLetterFile;

/// `[sources.mediawiki]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MediawikiConfig {
    /// The SSE endpoint of a `page_change` stream, e.g.
    /// `https://stream.wikimedia.org/v2/stream/mediawiki.page_change.v1`.
    pub stream_url: String,
    /// Instead of a stream: the wiki's Action API (e.g.
    /// `https://wiki.acme.internal/w/api.php`), whose `list=recentchanges` is polled every
    /// `poll_interval_ms`; also the fetcher's API when `fetch.api_url` is empty. Neither
    /// this nor `stream_url`: off.
    pub api_url: String,
    /// How often the API is asked for what changed.
    pub poll_interval_ms: u64,
    /// Wikis to index, by `meta.domain` (e.g. `en.wikipedia.org`); empty: every wiki of
    /// the stream.
    pub domains: Vec<String>,
    /// Namespaces to index (`page.namespace_id`): 0 is the articles.
    pub namespaces: Vec<i64>,
    /// Page titles to index, as patterns where `*` stands for any text (spaces or
    /// underscores alike); empty: every page.
    pub titles: Vec<String>,
    /// First wait before reconnecting; doubles up to `reconnect_max_ms`.
    pub reconnect_initial_ms: u64,
    pub reconnect_max_ms: u64,
    /// A stream silent this long is reconnected (EventStreams sends a comment at least
    /// every few seconds).
    pub idle_timeout_secs: u64,
}

impl Default for MediawikiConfig {
    fn default() -> Self {
        Self {
            stream_url: String::new(),
            api_url: String::new(),
            poll_interval_ms: 2_000,
            domains: Vec::new(),
            namespaces: vec![0],
            titles: Vec::new(),
            reconnect_initial_ms: 1_000,
            reconnect_max_ms: 60_000,
            idle_timeout_secs: 60,
        }
    }
}

impl MediawikiConfig {
    pub fn enabled(&self) -> bool {
        !self.stream_url.is_empty() || !self.api_url.is_empty()
    }

    /// Whether the wiki's recent changes are polled (no stream).
    pub fn polling(&self) -> bool {
        self.stream_url.is_empty() && !self.api_url.is_empty()
    }

    /// What the position in `mediawiki.json` is of: the stream, or the polled API.
    pub fn followed(&self) -> &str {
        if self.polling() {
            &self.api_url
        } else {
            &self.stream_url
        }
    }

    /// The polled wiki's host, `host[:port]` (the events' `meta.domain`).
    pub fn polled_domain(&self) -> Option<String> {
        let url = reqwest::Url::parse(&self.api_url).ok()?;
        let host = url.host_str()?.to_ascii_lowercase();
        Some(match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        })
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.stream_url.is_empty() && reqwest::Url::parse(&self.stream_url).is_err() {
            return Err(format!(
                "sources.mediawiki.stream_url = {:?} is not a URL",
                self.stream_url
            ));
        }
        if !self.stream_url.is_empty() && !self.api_url.is_empty() {
            return Err(
                "sources.mediawiki: set stream_url (follow an event stream) or api_url (poll \
                 the wiki's recent changes), not both; the stream's content is fetched \
                 through fetch.api_url"
                    .into(),
            );
        }
        if !self.api_url.is_empty()
            && (!(self.api_url.starts_with("http://") || self.api_url.starts_with("https://"))
                || self.polled_domain().is_none()
                || self.api_url.contains("{domain}"))
        {
            return Err(format!(
                "sources.mediawiki.api_url = {:?} must be one wiki's Action API URL, e.g. \
                 https://wiki.acme.internal/w/api.php",
                self.api_url
            ));
        }
        if self.poll_interval_ms < 100 {
            return Err("sources.mediawiki.poll_interval_ms must be at least 100".into());
        }
        if self.reconnect_initial_ms == 0 || self.reconnect_max_ms < self.reconnect_initial_ms {
            return Err(
                "sources.mediawiki.reconnect_initial_ms must be above 0 and at most reconnect_max_ms"
                    .into(),
            );
        }
        if self.idle_timeout_secs == 0 {
            return Err("sources.mediawiki.idle_timeout_secs must be above 0".into());
        }
        Ok(())
    }

    /// Whether an event of the stream is one to index.
    pub fn wants(&self, event: &Value) -> bool {
        let text = |path: &[&str]| path.iter().try_fold(event, |v, k| v.get(k))?.as_str();
        if !self.domains.is_empty() {
            let Some(domain) = text(&["meta", "domain"]) else {
                return false;
            };
            if !self.domains.iter().any(|d| d == domain) {
                return false;
            }
        }
        let namespace = event
            .get("page")
            .and_then(|p| p.get("namespace_id"))
            .and_then(Value::as_i64);
        if !self.namespaces.is_empty() && !namespace.is_some_and(|n| self.namespaces.contains(&n)) {
            return false;
        }
        if !self.titles.is_empty() {
            let title = text(&["page", "page_title"])
                .unwrap_or("")
                .replace('_', " ");
            return self
                .titles
                .iter()
                .any(|pattern| glob(&pattern.replace('_', " "), &title));
        }
        true
    }
}

/// `*` matches any text; everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The stream's metrics (in `docs/metrics.md`).
#[derive(Debug, Clone)]
pub struct StreamMetrics {
    pub events: IntCounterVec,
    pub filtered: IntCounter,
    pub reconnects: IntCounter,
    pub lag: StreamLag,
    /// Polls that found recentchanges no longer holding changes after the position.
    pub poll_gaps: IntCounter,
}

/// `casement_mediawiki_stream_lag_seconds`: now minus the time of the last event read,
/// computed when scraped, so a stream that stalls shows a lag that grows.
#[derive(Debug, Clone)]
pub struct StreamLag {
    gauge: Gauge,
    /// The last event's `meta.dt`, ms since the epoch (0: none yet).
    last_event_ms: Arc<AtomicI64>,
}

impl StreamLag {
    pub fn observe(&self, event_ms: i64) {
        self.last_event_ms.store(event_ms, Ordering::Relaxed);
    }

    /// The lag now (none before the first event).
    pub fn seconds(&self) -> Option<f64> {
        let last = self.last_event_ms.load(Ordering::Relaxed);
        (last > 0).then(|| ((casement_pipeline::now_ms() - last) as f64 / 1e3).max(0.0))
    }
}

impl prometheus::core::Collector for StreamLag {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        if let Some(seconds) = self.seconds() {
            self.gauge.set(seconds);
        }
        self.gauge.collect()
    }
}

/// The `page_change_kind` values counted (others count as `other`).
const KINDS: [&str; 7] = [
    "create",
    "edit",
    "move",
    "delete",
    "undelete",
    "visibility_change",
    "other",
];

impl StreamMetrics {
    #[allow(clippy::expect_used)] // Names are constants: a failure is a programming error.
    pub fn new(registry: &Registry) -> Self {
        let events = IntCounterVec::new(
            Opts::new(
                "casement_mediawiki_events_total",
                "Events of the MediaWiki stream handed to the pipeline, by page_change_kind.",
            ),
            &["kind"],
        )
        .expect("metric");
        for kind in KINDS {
            events.with_label_values(&[kind]);
        }
        let filtered = IntCounter::new(
            "casement_mediawiki_filtered_events_total",
            "Events of the MediaWiki stream left out by the domain, namespace and title filters.",
        )
        .expect("metric");
        let reconnects = IntCounter::new(
            "casement_mediawiki_stream_reconnects_total",
            "Reconnections to the MediaWiki stream.",
        )
        .expect("metric");
        let poll_gaps = IntCounter::new(
            "casement_mediawiki_poll_gaps_total",
            "Times the polled wiki's recentchanges no longer held the changes after the last one indexed (older than $wgRCMaxAge): repair with casement audit --fix --wiki.",
        )
        .expect("metric");
        let lag = StreamLag {
            gauge: Gauge::new(
                "casement_mediawiki_stream_lag_seconds",
                "Now (when scraped) minus the event time (meta.dt) of the last event read from the MediaWiki stream.",
            )
            .expect("metric"),
            last_event_ms: Arc::new(AtomicI64::new(0)),
        };
        for metric in [
            Box::new(events.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(filtered.clone()),
            Box::new(reconnects.clone()),
            Box::new(lag.clone()),
            Box::new(poll_gaps.clone()),
        ] {
            registry.register(metric).expect("unique metric names");
        }
        Self {
            events,
            filtered,
            reconnects,
            lag,
            poll_gaps,
        }
    }
}

/// What the stream source needs besides its settings.
#[derive(Debug, Clone)]
pub struct StreamSource {
    pub config: MediawikiConfig,
    pub user_agent: String,
    pub feeder: Feeder,
    pub position: Arc<StreamPosition>,
    pub metrics: StreamMetrics,
    /// Where an event over `max_event_bytes` is recorded (without its bytes).
    pub dead_letters: Arc<DeadLetterFile>,
    pub pipeline_metrics: casement_pipeline::Metrics,
    pub max_event_bytes: usize,
}

/// Follows the stream until the task is aborted.
pub async fn run(source: StreamSource) -> anyhow::Result<()> {
    let config = &source.config;
    let client = reqwest::Client::builder()
        .user_agent(source.user_agent.clone())
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let idle = Duration::from_secs(config.idle_timeout_secs);
    let mut last_id = source.position.resume_after();
    let mut backoff = Duration::from_millis(config.reconnect_initial_ms);
    let max = Duration::from_millis(config.reconnect_max_ms);
    loop {
        let mut request = client
            .get(&config.stream_url)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = &last_id {
            request = request.header("Last-Event-ID", id);
        }
        let mut parser = SseParser::new(source.max_event_bytes);
        match request.send().await {
            Ok(response) if response.status().is_success() => {
                tracing::info!(url = %config.stream_url, resume_after = ?last_id, "following the MediaWiki stream");
                let mut response = response;
                let mut read = 0;
                // Idle: no complete event for `idle` (bytes that never make one, a line
                // dripped a byte at a time, are no sign of life).
                let mut idle_at = tokio::time::Instant::now() + idle;
                loop {
                    let chunk = match tokio::time::timeout_at(idle_at, response.chunk()).await {
                        Ok(Ok(Some(chunk))) => chunk,
                        Ok(Ok(None)) => {
                            tracing::info!("the MediaWiki stream ended; reconnecting");
                            break;
                        }
                        Ok(Err(error)) => {
                            tracing::warn!(%error, "the MediaWiki stream failed; reconnecting");
                            break;
                        }
                        Err(_) => {
                            tracing::warn!(
                                idle_secs = idle.as_secs(),
                                "no complete event from the MediaWiki stream; reconnecting"
                            );
                            break;
                        }
                    };
                    for parsed in parser.push(&chunk) {
                        idle_at = tokio::time::Instant::now() + idle;
                        read += 1;
                        match parsed {
                            Parsed::Event(event) => {
                                if let Some(id) = &event.id {
                                    last_id = Some(id.clone());
                                }
                                handle(&source, event).await?;
                            }
                            Parsed::TooLarge { bytes } => too_large(&source, bytes).await,
                        }
                    }
                }
                if read > 0 {
                    backoff = Duration::from_millis(config.reconnect_initial_ms);
                }
            }
            Ok(response) => {
                tracing::warn!(status = %response.status(), url = %config.stream_url, "the MediaWiki stream answered an error; reconnecting");
            }
            Err(error) => {
                tracing::warn!(%error, url = %config.stream_url, "cannot reach the MediaWiki stream; reconnecting");
            }
        }
        source.metrics.reconnects.inc();
        // The server's `retry:` is a floor under the backoff, never past reconnect_max_ms.
        let wait = parser
            .retry_ms
            .map_or(backoff, |ms| Duration::from_millis(ms).max(backoff))
            .min(max);
        tokio::time::sleep(wait).await;
        backoff = (backoff * 2).min(max);
    }
}

/// An event over `max_event_bytes`: recorded as a dead letter (its length, not its bytes),
/// counted, and the stream goes on.
async fn too_large(source: &StreamSource, bytes: usize) {
    tracing::warn!(
        bytes,
        max_event_bytes = source.max_event_bytes,
        "an event of the MediaWiki stream is over events.max_event_bytes; dead-lettered without its bytes"
    );
    crate::sources::dead_letters::record_too_large(
        &source.dead_letters,
        &source.pipeline_metrics,
        SourceId::Mediawiki,
        bytes,
        source.max_event_bytes,
    )
    .await;
}

async fn handle(source: &StreamSource, event: SseEvent) -> anyhow::Result<()> {
    let (config, metrics) = (&source.config, &source.metrics);
    if event.event.as_deref().is_some_and(|e| e != "message") {
        return Ok(());
    }
    let json: Option<Value> = serde_json::from_str(&event.data).ok();
    let changed = json.as_ref().and_then(crate::sources::event_time_ms);
    if let Some(json) = &json {
        if let Some(dt) = changed {
            metrics.lag.observe(dt);
        }
        if !config.wants(json) {
            metrics.filtered.inc();
            return Ok(());
        }
        let kind = json
            .get("page_change_kind")
            .and_then(Value::as_str)
            .filter(|kind| KINDS.contains(kind))
            .unwrap_or("other");
        metrics.events.with_label_values(&[kind]).inc();
    }
    // What is not JSON goes to the pipeline all the same: the decoder dead-letters it with
    // the reason, and the stream goes on.
    let offset = source
        .feeder
        .send_bytes(SourceId::Mediawiki, event.data.into_bytes(), changed)
        .await?;
    if let Some(id) = event.id {
        source.position.sent(offset, id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn filters_by_domain_namespace_and_title() {
        let config = MediawikiConfig {
            stream_url: "http://localhost/stream".into(),
            domains: vec!["en.wikipedia.org".into()],
            titles: vec!["Travel*".into(), "*_policy".into()],
            ..MediawikiConfig::default()
        };
        let event = |domain: &str, namespace: i64, title: &str| {
            json!({"meta": {"domain": domain},
                   "page": {"namespace_id": namespace, "page_title": title}})
        };
        assert!(config.wants(&event("en.wikipedia.org", 0, "Travel_card")));
        assert!(config.wants(&event("en.wikipedia.org", 0, "Leave_policy")));
        assert!(!config.wants(&event("en.wikipedia.org", 0, "Leave_policy_draft")));
        assert!(!config.wants(&event("de.wikipedia.org", 0, "Travel_card")));
        assert!(!config.wants(&event("en.wikipedia.org", 1, "Travel_card")));
        assert!(glob("a*b*c", "aXbYc") && !glob("a*b*c", "aXcYb") && glob("*", ""));
    }
}
