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
mod query;
mod session;
mod task;

use std::collections::HashMap;
use std::time::Duration;

use casement_text::Format;
use prometheus::{Histogram, IntCounterVec};
use tokio::sync::{mpsc, oneshot};

pub use answer::revision_of;
pub use config::FetchConfig;
pub use query::QueryError;
use session::Session;
pub use session::{Denied, WikiAuth};
use task::ApiTask;

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
