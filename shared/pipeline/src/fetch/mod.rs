//! Fetching the content of revisions that events name without carrying it: MediaWiki's
//! `page_change` as EventBus publishes it to Kafka and EventStreams serves it
//! ([`casement_events::Change::Fetch`]). One implementation for every service: the
//! processor asks the [`Fetcher`] after the fence let the event through, so an event
//! older than the indexed revision fetches nothing.
//!
//! The Action API (`action=query&prop=revisions|info&revids=…&rvslots=main`): the lanes'
//! requests are gathered into batches of up to `batch_size` revisions (50, the API's limit
//! for most clients) for `batch_wait_ms`, one request per batch and wiki, at most
//! `requests_per_second`, with `maxlag` and a descriptive User-Agent as Wikimedia's API
//! etiquette asks. A 429, a 5xx or a `maxlag` error waits for `Retry-After` (capped) and
//! tries again; what still fails is a transient error, which the pipeline retries with
//! backoff. A revision the wiki does not have (deleted with its page, never existed), or
//! whose content is hidden or suppressed, is gone for good: the event is dead-lettered
//! with reason `gone`.

mod answer;
mod config;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use casement_text::Format;
use prometheus::{Histogram, IntCounterVec};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use answer::parse_revisions;
pub use answer::revision_of;
pub use config::FetchConfig;

/// A fetched revision: its content and the page as the wiki names it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub content: String,
    pub format: Format,
    /// The page's title now (after a move, the new one), with spaces.
    pub title: String,
    /// The page's URL (`fullurl`), when the wiki gives it.
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The wiki no longer has the revision's content, and never will: the revision or its
    /// page was deleted, its text hidden or suppressed.
    #[error("{0}")]
    Gone(String),
    /// The content is of a model Casement does not index (a script, JSON, ...).
    #[error("{0}")]
    Unsupported(String),
    /// The wiki did not answer as it should, this time (throttled past every retry, a
    /// server error, the network): retried.
    #[error("{0}")]
    Unavailable(String),
    /// No `[fetch] api_url` is configured.
    #[error("the event carries no content and no fetch.api_url is configured to fetch it")]
    NotConfigured,
}

/// Fetch metrics, registered with the pipeline's (see `docs/metrics.md`).
#[derive(Debug, Clone)]
pub struct FetchMetrics {
    /// Revisions by outcome: fetched, gone, unsupported, failed.
    pub revisions: IntCounterVec,
    /// API requests by outcome: ok, throttled (429, 503 or `maxlag`), failed.
    pub requests: IntCounterVec,
    pub duration: Histogram,
    pub batch: Histogram,
}

struct Request {
    domain: String,
    revision: u64,
    reply: oneshot::Sender<Result<Fetched, FetchError>>,
}

/// Hands revisions to the batching task; cheap to clone.
#[derive(Debug, Clone)]
pub struct Fetcher {
    requests: mpsc::Sender<Request>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.revision, self.domain)
    }
}

impl Fetcher {
    /// Starts the batching task (on the current runtime); `None` when `config` has no API.
    pub fn start(config: &FetchConfig, metrics: FetchMetrics) -> anyhow::Result<Option<Self>> {
        if !config.enabled() {
            return Ok(None);
        }
        config.validate().map_err(anyhow::Error::msg)?;
        let client = reqwest::Client::builder()
            .user_agent(config.user_agent.clone())
            .timeout(Duration::from_secs(config.timeout_secs))
            .build()?;
        let (requests, receiver) = mpsc::channel(config.batch_size * 4);
        let task = Batcher {
            config: config.clone(),
            client,
            metrics,
            last_request: HashMap::new(),
        };
        tokio::spawn(task.run(receiver));
        Ok(Some(Self { requests }))
    }

    /// The content of `revision` of the wiki at `domain`.
    pub async fn fetch(&self, domain: &str, revision: u64) -> Result<Fetched, FetchError> {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            domain: domain.to_owned(),
            revision,
            reply,
        };
        let stopped = || FetchError::Unavailable("the fetcher has stopped".into());
        self.requests.send(request).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

struct Batcher {
    config: FetchConfig,
    client: reqwest::Client,
    metrics: FetchMetrics,
    /// When each API was last asked (the rate limit).
    last_request: HashMap<String, Instant>,
}

/// What one API request said about the revisions asked.
enum Answer {
    Revisions(HashMap<u64, Result<Fetched, FetchError>>),
    /// Throttled: try again after this long.
    Later(Duration, String),
}

impl Batcher {
    async fn run(mut self, mut receiver: mpsc::Receiver<Request>) {
        while let Some(first) = receiver.recv().await {
            let mut batch = vec![first];
            let deadline =
                tokio::time::Instant::now() + Duration::from_millis(self.config.batch_wait_ms);
            while batch.len() < self.config.batch_size {
                match tokio::time::timeout_at(deadline, receiver.recv()).await {
                    Ok(Some(request)) => batch.push(request),
                    Ok(None) | Err(_) => break,
                }
            }
            let mut by_domain: BTreeMap<String, Vec<Request>> = BTreeMap::new();
            for request in batch {
                by_domain
                    .entry(request.domain.clone())
                    .or_default()
                    .push(request);
            }
            for (domain, requests) in by_domain {
                self.fetch_batch(&domain, requests).await;
            }
        }
    }

    async fn fetch_batch(&mut self, domain: &str, requests: Vec<Request>) {
        let mut wanted: Vec<u64> = requests.iter().map(|r| r.revision).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut results: HashMap<u64, Result<Fetched, FetchError>> = HashMap::new();
        // Why the revisions left without an answer have none (they are retried).
        let mut failure = String::new();
        let mut attempts = 0;
        // Until every revision has an answer: a long answer may stop short (the API's
        // result size limit), and what it left out is asked again.
        while !wanted.is_empty() {
            attempts += 1;
            match self.request(domain, &wanted).await {
                Ok(Answer::Revisions(answered)) if !answered.is_empty() => {
                    wanted.retain(|revision| !answered.contains_key(revision));
                    results.extend(answered);
                    attempts = 0;
                }
                Ok(Answer::Revisions(_)) => {
                    failure = "the API answered none of the revisions asked".to_owned();
                    break;
                }
                Ok(Answer::Later(_, why)) | Err(why) if attempts >= self.config.attempts => {
                    failure = why;
                    break;
                }
                Ok(Answer::Later(wait, why)) => {
                    tracing::info!(domain, wait_ms = wait.as_millis() as u64, %why, "wiki API asks to wait");
                    tokio::time::sleep(wait).await;
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(attempts))).await;
                }
            }
        }
        for request in requests {
            let result = results
                .get(&request.revision)
                .cloned()
                .unwrap_or_else(|| Err(FetchError::Unavailable(failure.clone())));
            let outcome = match &result {
                Ok(_) => "fetched",
                Err(FetchError::Gone(_)) => "gone",
                Err(FetchError::Unsupported(_)) => "unsupported",
                Err(_) => "failed",
            };
            self.metrics.revisions.with_label_values(&[outcome]).inc();
            // The lane may have given up waiting (shutdown): nothing to tell it.
            let _ = request.reply.send(result);
        }
    }

    /// One request for `revisions` (at most `batch_size`) of the wiki at `domain`.
    async fn request(&mut self, domain: &str, revisions: &[u64]) -> Result<Answer, String> {
        let api = self.config.api_url.replace("{domain}", domain);
        let spacing = Duration::from_secs_f64(1.0 / self.config.requests_per_second);
        if let Some(last) = self.last_request.get(&api) {
            tokio::time::sleep_until((*last + spacing).into()).await;
        }
        self.last_request.insert(api.clone(), Instant::now());
        let ids = revisions
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("|");
        let mut params = vec![
            ("action", "query".to_owned()),
            ("format", "json".to_owned()),
            ("formatversion", "2".to_owned()),
            ("prop", "revisions|info".to_owned()),
            ("inprop", "url".to_owned()),
            ("rvprop", "ids|content".to_owned()),
            ("rvslots", "main".to_owned()),
            ("revids", ids),
        ];
        if self.config.maxlag_secs > 0 {
            params.push(("maxlag", self.config.maxlag_secs.to_string()));
        }
        let url = reqwest::Url::parse_with_params(&api, &params)
            .map_err(|e| format!("fetch.api_url {api:?}: {e}"))?;
        self.metrics.batch.observe(revisions.len() as f64);
        let started = Instant::now();
        let response = self.client.get(url).send().await;
        self.metrics
            .duration
            .observe(started.elapsed().as_secs_f64());
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                self.count_request("failed");
                return Err(format!("{api}: {error}"));
            }
        };
        let status = response.status();
        let retry_after = self.retry_after(response.headers());
        if status.as_u16() == 429 || status.is_server_error() {
            self.count_request(if status.as_u16() == 429 || status.as_u16() == 503 {
                "throttled"
            } else {
                "failed"
            });
            return Ok(Answer::Later(
                retry_after.unwrap_or(Duration::from_secs(1)),
                format!("{api} answered {status}"),
            ));
        }
        let body = response.bytes().await.map_err(|e| {
            self.count_request("failed");
            format!("{api}: {e}")
        })?;
        if !status.is_success() {
            self.count_request("failed");
            return Err(format!(
                "{api} answered {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ));
        }
        let json: Value = serde_json::from_slice(&body).map_err(|e| {
            self.count_request("failed");
            format!("{api} answered something that is not JSON: {e}")
        })?;
        if let Some(error) = json.get("error") {
            let code = error.get("code").and_then(Value::as_str).unwrap_or("");
            let info = error.get("info").and_then(Value::as_str).unwrap_or("");
            if code == "maxlag" || code == "ratelimited" {
                self.count_request("throttled");
                return Ok(Answer::Later(
                    retry_after.unwrap_or(Duration::from_secs(5)),
                    format!("{api}: {code}: {info}"),
                ));
            }
            self.count_request("failed");
            return Err(format!("{api}: {code}: {info}"));
        }
        self.count_request("ok");
        Ok(Answer::Revisions(parse_revisions(&json)))
    }

    fn count_request(&self, outcome: &str) {
        self.metrics.requests.with_label_values(&[outcome]).inc();
    }

    fn retry_after(&self, headers: &reqwest::header::HeaderMap) -> Option<Duration> {
        let seconds: u64 = headers
            .get(reqwest::header::RETRY_AFTER)?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(Duration::from_secs(
            seconds.min(self.config.max_retry_after_secs),
        ))
    }
}
