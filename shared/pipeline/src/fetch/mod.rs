//! Fetching the content of revisions that events name without carrying it: MediaWiki's
//! `page_change` as EventBus publishes it to Kafka and EventStreams serves it
//! ([`casement_events::Change::Fetch`]). One implementation for every service: the
//! processor asks the [`Fetcher`] after the fence let the event through, so an event
//! older than the indexed revision fetches nothing.
//!
//! The Action API (`action=query&prop=revisions|info&revids=…&rvslots=main`): each API
//! (each wiki, when `api_url` names `{domain}`) has a queue and a task of its own, so a
//! slow or throttled wiki delays only its own revisions. A task gathers its lanes'
//! requests into batches of up to `batch_size` revisions (50, the API's limit for most
//! clients) for `batch_wait_ms`, one request per batch, at most `requests_per_second`,
//! with `maxlag` and a descriptive User-Agent as Wikimedia's API etiquette asks. A 429, a
//! 5xx or a `maxlag` error waits for `Retry-After` (capped) and tries again; what still
//! fails is a transient error, which the pipeline retries with backoff (parked aside, up
//! to `pipeline.fetch_give_up_secs`). A revision the wiki does not have (deleted with its
//! page, never existed), or whose content is hidden or suppressed, is gone for good: the
//! event is dead-lettered with reason `gone`.
//!
//! What leaves for the network is what the operator configured: an event names its wiki
//! (`meta.domain`), which must be a host name on `fetch.domains`
//! ([`FetchConfig::check_domain`]) before it goes into a URL; redirects are followed only
//! on the same host; answers are read up to `max_response_bytes`; and no answer's body
//! reaches the logs or an error message.

mod answer;
mod config;
mod session;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use casement_text::Format;
use prometheus::{Histogram, IntCounterVec};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use answer::parse_revisions;
pub use answer::revision_of;
pub use config::FetchConfig;
pub use session::{Denied, WikiAuth};
use session::{Session, SessionError};

/// A fetched revision: its content and the page as the wiki names it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub content: String,
    pub format: Format,
    /// The page's title now (after a move, the new one), with spaces.
    pub title: String,
    /// The page's URL (`fullurl`), when the wiki gives it.
    pub url: Option<String>,
    /// This revision's permalink (`index.php?oldid=N`, from the page's `editurl`: the
    /// wiki's own `$wgServer` and `$wgScript`), when the wiki gives it.
    pub revision_url: Option<String>,
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
    /// The event names a wiki this service does not fetch from (not on `fetch.domains`),
    /// or something that is not a host name: never fetched.
    #[error("{0}")]
    Refused(String),
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

/// Hands revisions to the task of their API; cheap to clone.
#[derive(Debug, Clone)]
pub struct Fetcher {
    shared: std::sync::Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: FetchConfig,
    client: reqwest::Client,
    /// `[fetch.auth]`'s login, per API.
    session: Session,
    metrics: FetchMetrics,
    /// The queue of each API's task (by API URL), started on first use.
    queues: std::sync::Mutex<HashMap<String, mpsc::UnboundedSender<Request>>>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.revision, self.domain)
    }
}

/// Redirects are followed on the same host (and scheme and port) only, five at most: a
/// wiki moved to `https` is followed, a wiki that sends the fetcher to another host is not
/// (the answer is then a failure).
fn same_host_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first();
        let same = first.is_some_and(|from| {
            from.host_str() == attempt.url().host_str()
                && from.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if attempt.previous().len() > 5 || !same {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

impl Fetcher {
    /// Ready to fetch (tasks start on the current runtime as APIs are used); `None` when
    /// `config` has no API.
    pub fn start(config: &FetchConfig, metrics: FetchMetrics) -> anyhow::Result<Option<Self>> {
        if !config.enabled() {
            return Ok(None);
        }
        config.validate().map_err(anyhow::Error::msg)?;
        let client = reqwest::Client::builder()
            .user_agent(config.user_agent.clone())
            .timeout(Duration::from_secs(config.timeout_secs))
            .redirect(same_host_redirects())
            .build()?;
        Ok(Some(Self {
            shared: std::sync::Arc::new(Shared {
                config: config.clone(),
                client,
                session: Session::new(config.auth.clone()),
                metrics,
                queues: std::sync::Mutex::new(HashMap::new()),
            }),
        }))
    }

    /// The content of `revision` of the wiki at `domain`.
    pub async fn fetch(&self, domain: &str, revision: u64) -> Result<Fetched, FetchError> {
        let config = &self.shared.config;
        config.check_domain(domain).map_err(FetchError::Refused)?;
        let api = config.api_for(domain);
        let (reply, answer) = oneshot::channel();
        let request = Request {
            domain: domain.to_owned(),
            revision,
            reply,
        };
        let stopped = || FetchError::Unavailable("the fetcher has stopped".into());
        {
            let mut queues = self.shared.queues.lock().unwrap_or_else(|p| p.into_inner());
            let queue = queues.entry(api.clone()).or_insert_with(|| {
                let (queue, receiver) = mpsc::unbounded_channel();
                let task = ApiTask {
                    api: api.clone(),
                    shared: self.shared.clone(),
                    last_request: None,
                };
                tokio::spawn(task.run(receiver));
                queue
            });
            queue.send(request).map_err(|_| stopped())?;
        }
        answer.await.map_err(|_| stopped())?
    }
}

/// Why [`Fetcher::query`] has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The wiki refuses to let this client read (no login where one is needed, a login or
    /// token it refused): fix the settings.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// Throttled: ask again after this long.
    #[error("{1}")]
    Later(Duration, String),
    /// No answer this time (the network, a server error, an API error).
    #[error("{0}")]
    Failed(String),
}

impl Fetcher {
    /// One Action API query (`action=query&format=json&formatversion=2` and `params`) to
    /// the wiki at `domain`, with `[fetch.auth]`'s credentials, `maxlag`, the User-Agent
    /// and the answer size limit of revisions: what the MediaWiki poller asks
    /// (`list=recentchanges`, `siteinfo`, `allpages`) and the start's check that the wiki
    /// lets this client read. An expired session is logged in again once.
    pub async fn query(
        &self,
        domain: &str,
        params: &[(&str, String)],
    ) -> Result<Value, QueryError> {
        let config = &self.shared.config;
        config.check_domain(domain).map_err(QueryError::Failed)?;
        let api = config.api_for(domain);
        let mut relogged = false;
        loop {
            let mut all = vec![
                ("action", "query".to_owned()),
                ("format", "json".to_owned()),
                ("formatversion", "2".to_owned()),
            ];
            all.extend(params.iter().cloned());
            if config.maxlag_secs > 0 {
                all.push(("maxlag", config.maxlag_secs.to_string()));
            }
            if self.shared.session.configured() {
                all.push(("assert", "user".to_owned()));
            }
            let url = reqwest::Url::parse_with_params(&api, &all)
                .map_err(|e| QueryError::Failed(format!("fetch.api_url {api:?}: {e}")))?;
            let request = self
                .shared
                .session
                .authorize(&self.shared.client, &api, self.shared.client.get(url))
                .await
                .map_err(|e| match e {
                    SessionError::Denied(denied) => QueryError::Denied(denied),
                    SessionError::Unavailable(why) => QueryError::Failed(why),
                })?;
            let response = request
                .send()
                .await
                .map_err(|e| QueryError::Failed(format!("{api}: {}", without_url(&e))))?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
                .map(|s| Duration::from_secs(s.min(config.max_retry_after_secs)));
            if status.as_u16() == 429 || status.as_u16() == 503 {
                return Err(QueryError::Later(
                    retry_after.unwrap_or(Duration::from_secs(1)),
                    format!("{api} answered {status}"),
                ));
            }
            if matches!(status.as_u16(), 401 | 403) {
                return Err(QueryError::Denied(Denied(format!(
                    "{api} answered {status}: the wiki refuses this client; check [fetch.auth] \
                     (or set it: a bot password or an OAuth 2 token)"
                ))));
            }
            if !status.is_success() {
                return Err(QueryError::Failed(format!("{api} answered {status}")));
            }
            let body = read_capped(response, config.max_response_bytes)
                .await
                .map_err(|why| QueryError::Failed(format!("{api}: {why}")))?;
            let json: Value = serde_json::from_slice(&body).map_err(|_| {
                QueryError::Failed(format!(
                    "{api} answered something that is not the API's JSON ({} bytes)",
                    body.len()
                ))
            })?;
            let Some(error) = json.get("error") else {
                return Ok(json);
            };
            let text = |key: &str| -> String {
                let value = error.get(key).and_then(Value::as_str).unwrap_or("");
                value.chars().take(200).collect()
            };
            let code = text("code");
            if (code == "assertuserfailed" || code == "assertnameduserfailed") && !relogged {
                self.shared.session.expire(&api).await;
                relogged = true;
                continue;
            }
            if let Some(why) = session::denied(&code, self.shared.session.configured()) {
                return Err(QueryError::Denied(Denied(format!("{api}: {why}"))));
            }
            if code == "maxlag" || code == "ratelimited" {
                return Err(QueryError::Later(
                    retry_after.unwrap_or(Duration::from_secs(5)),
                    format!("{api}: {code}: {}", text("info")),
                ));
            }
            return Err(QueryError::Failed(format!(
                "{api}: {code}: {}",
                text("info")
            )));
        }
    }

    /// Asks each configured wiki once (`siteinfo`, with `[fetch.auth]`'s login) whether
    /// it lets this client read, so that a wiki that refuses (401/403, `readapidenied`, a
    /// refused login or token) stops the start with the reason instead of failing every
    /// revision later. The wikis are `fetch.domains` (the first five), or `api_url`'s own
    /// host when it names no `{domain}`. A wiki that does not answer now is only reported
    /// (`tracing::warn`): it may come back, and its revisions are retried.
    pub async fn check_access(&self) -> Result<(), Denied> {
        const MOST: usize = 5;
        const WAIT: Duration = Duration::from_secs(10);
        let config = &self.shared.config;
        let domains: Vec<String> = if config.domains.is_empty() {
            reqwest::Url::parse(&config.api_url)
                .ok()
                .filter(|_| !config.api_url.contains("{domain}"))
                .and_then(|url| {
                    let host = url.host_str()?.to_owned();
                    Some(match url.port() {
                        Some(port) => format!("{host}:{port}"),
                        None => host,
                    })
                })
                .into_iter()
                .collect()
        } else {
            config.domains.iter().take(MOST).cloned().collect()
        };
        let params = [
            ("meta", "siteinfo".to_owned()),
            ("siprop", "general".to_owned()),
        ];
        for domain in domains {
            match tokio::time::timeout(WAIT, self.query(&domain, &params)).await {
                Ok(Ok(_)) => {}
                Ok(Err(QueryError::Denied(denied))) => return Err(denied),
                Ok(Err(QueryError::Later(_, why) | QueryError::Failed(why))) => {
                    tracing::warn!(%domain, %why, "cannot ask the wiki yet; its revisions are fetched when it answers");
                }
                Err(_) => {
                    tracing::warn!(%domain, wait_secs = WAIT.as_secs(), "the wiki did not answer at start; its revisions are fetched when it answers");
                }
            }
        }
        Ok(())
    }
}

/// The task of one API: its queue, batches, rate limit and waits.
struct ApiTask {
    api: String,
    shared: std::sync::Arc<Shared>,
    /// When the API was last asked (the rate limit).
    last_request: Option<Instant>,
}

/// What one API request said about the revisions asked.
enum Answer {
    Revisions(HashMap<u64, Result<Fetched, FetchError>>),
    /// Throttled: try again after this long.
    Later(Duration, String),
}

impl ApiTask {
    async fn run(mut self, mut receiver: mpsc::UnboundedReceiver<Request>) {
        let config = self.shared.config.clone();
        while let Some(first) = receiver.recv().await {
            let mut batch = vec![first];
            let deadline =
                tokio::time::Instant::now() + Duration::from_millis(config.batch_wait_ms);
            while batch.len() < config.batch_size {
                match tokio::time::timeout_at(deadline, receiver.recv()).await {
                    Ok(Some(request)) => batch.push(request),
                    Ok(None) | Err(_) => break,
                }
            }
            // Lanes that gave up waiting (shutdown) need nothing.
            batch.retain(|request| !request.reply.is_closed());
            if !batch.is_empty() {
                self.fetch_batch(batch).await;
            }
        }
    }

    async fn fetch_batch(&mut self, requests: Vec<Request>) {
        let config = self.shared.config.clone();
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
            match self.request(&wanted).await {
                Ok(Answer::Revisions(answered)) if !answered.is_empty() => {
                    wanted.retain(|revision| !answered.contains_key(revision));
                    results.extend(answered);
                    attempts = 0;
                }
                Ok(Answer::Revisions(_)) => {
                    failure = "the API answered none of the revisions asked".to_owned();
                    break;
                }
                Ok(Answer::Later(_, why)) | Err(why) if attempts >= config.attempts => {
                    failure = why;
                    break;
                }
                Ok(Answer::Later(wait, why)) => {
                    tracing::info!(api = %self.api, wait_ms = wait.as_millis() as u64, %why, "wiki API asks to wait");
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
                Err(FetchError::Unsupported(_) | FetchError::Refused(_)) => "unsupported",
                Err(_) => "failed",
            };
            self.shared
                .metrics
                .revisions
                .with_label_values(&[outcome])
                .inc();
            // The lane may have given up waiting (shutdown): nothing to tell it.
            let _ = request.reply.send(result);
        }
    }

    /// One request for `revisions` (at most `batch_size`).
    async fn request(&mut self, revisions: &[u64]) -> Result<Answer, String> {
        let config = &self.shared.config;
        let api = self.api.clone();
        let spacing = Duration::from_secs_f64(1.0 / config.requests_per_second);
        if let Some(last) = self.last_request {
            tokio::time::sleep_until((last + spacing).into()).await;
        }
        self.last_request = Some(Instant::now());
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
        if config.maxlag_secs > 0 {
            params.push(("maxlag", config.maxlag_secs.to_string()));
        }
        if self.shared.session.configured() {
            params.push(("assert", "user".to_owned()));
        }
        let url = reqwest::Url::parse_with_params(&api, &params)
            .map_err(|e| format!("fetch.api_url {api:?}: {e}"))?;
        self.shared.metrics.batch.observe(revisions.len() as f64);
        let request = self
            .shared
            .session
            .authorize(&self.shared.client, &api, self.shared.client.get(url))
            .await
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        let response = request.send().await;
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                self.observe(started, "failed");
                return Err(format!("{api}: {}", without_url(&error)));
            }
        };
        let status = response.status();
        let retry_after = self.retry_after(response.headers());
        if status.as_u16() == 429 || status.is_server_error() {
            let throttled = status.as_u16() == 429 || status.as_u16() == 503;
            self.observe(started, if throttled { "throttled" } else { "failed" });
            return Ok(Answer::Later(
                retry_after.unwrap_or(Duration::from_secs(1)),
                format!("{api} answered {status}"),
            ));
        }
        if !status.is_success() {
            self.observe(started, "failed");
            // The body is not read, and never logged: it is the wiki's, or whatever a
            // host behind a redirect said.
            let hint = if status.is_redirection() {
                " (a redirect to another host, not followed: point fetch.api_url at the wiki's own API)"
            } else if matches!(status.as_u16(), 401 | 403) {
                " (the wiki refuses this client: check [fetch.auth], or set it for a private wiki)"
            } else {
                ""
            };
            return Err(format!("{api} answered {status}{hint}"));
        }
        let body = match read_capped(response, config.max_response_bytes).await {
            Ok(body) => body,
            Err(why) => {
                self.observe(started, "failed");
                return Err(format!("{api}: {why}"));
            }
        };
        let json: Value = match serde_json::from_slice(&body) {
            Ok(json) => json,
            Err(e) => {
                self.observe(started, "failed");
                // serde's message may quote the body: only where it broke is said.
                return Err(format!(
                    "{api} answered something that is not the API's JSON ({} bytes; {:?} \
                     error at line {} column {})",
                    body.len(),
                    e.classify(),
                    e.line(),
                    e.column()
                ));
            }
        };
        if let Some(error) = json.get("error") {
            let text = |key: &str| {
                error
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect::<String>()
            };
            let (code, info) = (text("code"), text("info"));
            if code == "assertuserfailed" || code == "assertnameduserfailed" {
                // The wiki dropped the session: log in again and ask again.
                self.shared.session.expire(&api).await;
                self.observe(started, "failed");
                return Ok(Answer::Later(
                    Duration::ZERO,
                    format!("{api}: {code}: the session expired"),
                ));
            }
            if let Some(why) = session::denied(&code, self.shared.session.configured()) {
                self.observe(started, "failed");
                return Err(format!("{api}: {why}"));
            }
            if code == "maxlag" || code == "ratelimited" {
                self.observe(started, "throttled");
                return Ok(Answer::Later(
                    retry_after.unwrap_or(Duration::from_secs(5)),
                    format!("{api}: {code}: {info}"),
                ));
            }
            self.observe(started, "failed");
            return Err(format!("{api}: {code}: {info}"));
        }
        self.observe(started, "ok");
        Ok(Answer::Revisions(parse_revisions(&json)))
    }

    fn observe(&self, started: Instant, outcome: &str) {
        let metrics = &self.shared.metrics;
        metrics.duration.observe(started.elapsed().as_secs_f64());
        metrics.requests.with_label_values(&[outcome]).inc();
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
            seconds.min(self.shared.config.max_retry_after_secs),
        ))
    }
}

/// A client error without the URL (the query names every revision asked).
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else if error.is_redirect() {
        "too many redirects"
    } else {
        "request failed"
    };
    let mut source = std::error::Error::source(error);
    let mut detail = String::new();
    while let Some(inner) = source {
        detail = inner.to_string();
        source = inner.source();
    }
    if detail.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {detail}")
    }
}

/// The answer's body, at most `max` bytes: a longer one is a failure, read no further.
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    if response
        .content_length()
        .is_some_and(|length| length > max as u64)
    {
        return Err(format!(
            "the answer is over fetch.max_response_bytes = {max} bytes"
        ));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| without_url(&e))? {
        if body.len() + chunk.len() > max {
            return Err(format!(
                "the answer is over fetch.max_response_bytes = {max} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
