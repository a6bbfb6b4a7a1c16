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

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use casement_text::{Format, Revision};
use prometheus::{Histogram, IntCounterVec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// `[fetch]`: where and how to fetch revisions that events do not carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FetchConfig {
    /// The wiki's Action API, e.g. `https://en.wikipedia.org/w/api.php`; `{domain}` is
    /// replaced by the event's wiki (`meta.domain`), so one setting serves a wiki farm
    /// (`https://{domain}/w/api.php`). Empty: nothing is fetched, and events without
    /// content are dead-lettered (`no_content`).
    pub api_url: String,
    /// Sent with every request. Wikimedia's policy asks for a way to reach the operator:
    /// put a URL or an email address in it.
    pub user_agent: String,
    /// Requests per second to one API, at most.
    pub requests_per_second: f64,
    /// Revisions per request, at most (the API takes 50 from most clients, 500 from bots).
    pub batch_size: usize,
    /// How long a request waits for more revisions to batch with.
    pub batch_wait_ms: u64,
    /// `maxlag` sent with every request: the wiki answers "try later" while its replicas
    /// lag more than this many seconds (0: not sent).
    pub maxlag_secs: u64,
    /// One request's time limit.
    pub timeout_secs: u64,
    /// A longer `Retry-After` is cut to this.
    pub max_retry_after_secs: u64,
    /// Attempts per batch (waiting for `Retry-After` between them) before the events are
    /// handed back to the pipeline's backoff.
    pub attempts: u32,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            api_url: String::new(),
            user_agent: format!(
                "Casement/{} (wiki indexer; set fetch.user_agent to include your contact)",
                env!("CARGO_PKG_VERSION")
            ),
            requests_per_second: 5.0,
            batch_size: 50,
            batch_wait_ms: 20,
            maxlag_secs: 5,
            timeout_secs: 30,
            max_retry_after_secs: 120,
            attempts: 3,
        }
    }
}

impl FetchConfig {
    pub fn enabled(&self) -> bool {
        !self.api_url.is_empty()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.enabled()
            && !(self.api_url.starts_with("http://") || self.api_url.starts_with("https://"))
        {
            return Err(format!(
                "fetch.api_url = {:?} must start with http:// or https://",
                self.api_url
            ));
        }
        if self.enabled() && reqwest::Url::parse(&self.api_url.replace("{domain}", "x")).is_err() {
            return Err(format!("fetch.api_url = {:?} is not a URL", self.api_url));
        }
        if self.user_agent.trim().is_empty() {
            return Err(
                "fetch.user_agent must not be empty (the wiki's API policy asks for one)".into(),
            );
        }
        if !(self.requests_per_second > 0.0 && self.requests_per_second.is_finite()) {
            return Err(format!(
                "fetch.requests_per_second = {} must be above 0",
                self.requests_per_second
            ));
        }
        if !(1..=500).contains(&self.batch_size) {
            return Err(format!(
                "fetch.batch_size = {} must be between 1 and 500",
                self.batch_size
            ));
        }
        if self.timeout_secs == 0 || self.attempts == 0 {
            return Err("fetch.timeout_secs and fetch.attempts must be at least 1".into());
        }
        Ok(())
    }
}

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
        let mut attempts = 0;
        // Until every revision has an answer: a long answer may stop short (the API's
        // result size limit), and what it left out is asked again.
        while !wanted.is_empty() {
            attempts += 1;
            let answer = self.request(domain, &wanted).await;
            match answer {
                Ok(Answer::Revisions(answered)) if !answered.is_empty() => {
                    wanted.retain(|revision| !answered.contains_key(revision));
                    results.extend(answered);
                    attempts = 0;
                    continue;
                }
                Ok(Answer::Revisions(_)) => {
                    let error = "the API answered none of the revisions asked".to_owned();
                    self.fail(&wanted, &mut results, error);
                    break;
                }
                Ok(Answer::Later(wait, why)) => {
                    if attempts >= self.config.attempts {
                        self.fail(&wanted, &mut results, why);
                        break;
                    }
                    tracing::info!(domain, wait_ms = wait.as_millis() as u64, %why, "wiki API asks to wait");
                    tokio::time::sleep(wait).await;
                }
                Err(error) => {
                    if attempts >= self.config.attempts {
                        self.fail(&wanted, &mut results, error);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(attempts))).await;
                }
            }
        }
        for request in requests {
            let result = results.get(&request.revision).cloned().unwrap_or_else(|| {
                Err(FetchError::Unavailable(format!(
                    "revision {} was not fetched",
                    request.revision
                )))
            });
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

    fn fail(
        &self,
        wanted: &[u64],
        results: &mut HashMap<u64, Result<Fetched, FetchError>>,
        error: String,
    ) {
        for revision in wanted {
            results.insert(*revision, Err(FetchError::Unavailable(error.clone())));
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

/// The revisions an Action API answer (`formatversion=2`) accounts for: fetched, or gone
/// with why. Revisions it does not mention are left out (asked again).
fn parse_revisions(json: &Value) -> HashMap<u64, Result<Fetched, FetchError>> {
    let mut answered = HashMap::new();
    let query = json.get("query").unwrap_or(&Value::Null);
    if let Some(bad) = query.get("badrevids").and_then(Value::as_object) {
        for (id, _) in bad {
            if let Ok(revision) = id.parse::<u64>() {
                answered.insert(
                    revision,
                    Err(FetchError::Gone(format!(
                        "the wiki has no revision {revision} (deleted with its page, or never existed)"
                    ))),
                );
            }
        }
    }
    let pages = query
        .get("pages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for page in pages {
        let title = page.get("title").and_then(Value::as_str).unwrap_or("");
        let url = page
            .get("fullurl")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let revisions = page
            .get("revisions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for revision in revisions {
            let Some(id) = revision.get("revid").and_then(Value::as_u64) else {
                continue;
            };
            answered.insert(id, revision_content(revision, id, title, url.clone()));
        }
    }
    answered
}

fn revision_content(
    revision: &Value,
    id: u64,
    title: &str,
    url: Option<String>,
) -> Result<Fetched, FetchError> {
    let main = revision
        .get("slots")
        .and_then(|slots| slots.get("main"))
        .unwrap_or(&Value::Null);
    let hidden = |key: &str| {
        revision.get(key).and_then(Value::as_bool) == Some(true)
            || main.get(key).and_then(Value::as_bool) == Some(true)
    };
    if hidden("suppressed") {
        return Err(FetchError::Gone(format!(
            "the content of revision {id} of {title:?} is suppressed"
        )));
    }
    if hidden("texthidden") {
        return Err(FetchError::Gone(format!(
            "the content of revision {id} of {title:?} is hidden (revision deleted)"
        )));
    }
    if hidden("textmissing") {
        return Err(FetchError::Gone(format!(
            "the content of revision {id} of {title:?} is missing on the wiki"
        )));
    }
    let Some(content) = main.get("content").and_then(Value::as_str) else {
        return Err(FetchError::Gone(format!(
            "the wiki gave no content for revision {id} of {title:?}"
        )));
    };
    let format = match main.get("contentmodel").and_then(Value::as_str) {
        None | Some("wikitext") => Format::Wikitext,
        Some("text") => Format::Text,
        Some(other) => {
            return Err(FetchError::Unsupported(format!(
                "revision {id} of {title:?} is {other} (wikitext and text are indexed)"
            )));
        }
    };
    Ok(Fetched {
        content: content.to_owned(),
        format,
        title: title.to_owned(),
        url,
    })
}

/// The revision a fetch gives: the event's document at its revision, named as the wiki
/// names the page now.
pub fn revision_of(reference: &casement_events::RevisionRef, fetched: Fetched) -> Revision {
    Revision {
        metadata: Default::default(),
        doc_id: reference.doc_id.clone(),
        revision: reference.revision,
        title: Some(fetched.title)
            .filter(|t| !t.is_empty())
            .or_else(|| reference.title.as_ref().map(|t| t.replace('_', " "))),
        url: fetched.url.or_else(|| reference.url.clone()),
        tenant: reference.tenant.clone(),
        format: fetched.format,
        content: fetched.content,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The shapes of the Action API's answer (formatversion 2): content, a hidden and a
    /// suppressed revision, a missing one, another content model.
    #[test]
    fn an_answer_gives_content_or_says_why_not() {
        let answer = json!({
            "batchcomplete": true,
            "query": {
                "badrevids": {"99": {"revid": 99, "missing": true}},
                "pages": [
                    {"pageid": 7, "ns": 0, "title": "Travel policy",
                     "fullurl": "https://wiki.example/wiki/Travel_policy",
                     "revisions": [
                        {"revid": 11, "parentid": 10, "slots": {"main": {
                            "contentmodel": "wikitext", "contentformat": "text/x-wiki",
                            "content": "Trips need approval."}}},
                        {"revid": 10, "parentid": 9, "slots": {"main": {
                            "texthidden": true}}},
                        {"revid": 9, "parentid": 0, "suppressed": true, "slots": {"main": {
                            "texthidden": true}}}
                     ]},
                    {"pageid": 8, "ns": 8, "title": "MediaWiki:Common.js",
                     "revisions": [{"revid": 12, "slots": {"main": {
                        "contentmodel": "javascript", "content": "x()"}}}]}
                ]
            }
        });
        let answered = parse_revisions(&answer);
        assert_eq!(
            answered[&11],
            Ok(Fetched {
                content: "Trips need approval.".into(),
                format: Format::Wikitext,
                title: "Travel policy".into(),
                url: Some("https://wiki.example/wiki/Travel_policy".into()),
            })
        );
        assert!(matches!(&answered[&10], Err(FetchError::Gone(why)) if why.contains("hidden")));
        assert!(matches!(&answered[&9], Err(FetchError::Gone(why)) if why.contains("suppressed")));
        assert!(
            matches!(&answered[&99], Err(FetchError::Gone(why)) if why.contains("no revision 99"))
        );
        assert!(
            matches!(&answered[&12], Err(FetchError::Unsupported(why)) if why.contains("javascript"))
        );
        assert_eq!(answered.len(), 5);
    }

    #[test]
    fn bad_settings_are_refused() {
        let good = FetchConfig {
            api_url: "https://{domain}/w/api.php".into(),
            ..FetchConfig::default()
        };
        assert_eq!(good.validate(), Ok(()));
        for bad in [
            FetchConfig {
                api_url: "ftp://wiki/api.php".into(),
                ..good.clone()
            },
            FetchConfig {
                batch_size: 0,
                ..good.clone()
            },
            FetchConfig {
                requests_per_second: 0.0,
                ..good.clone()
            },
            FetchConfig {
                user_agent: " ".into(),
                ..good.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
