//! The task of one API: its queue of revisions from every lane, batched into Action API
//! requests at most `requests_per_second` apart, waits and retries, and each revision's
//! answer.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;

use super::answer::parse_revisions;
use super::session;
use super::{FetchError, Fetched, Request, Shared, read_capped, without_url};

/// The task of one API: its queue, batches, rate limit and waits.
pub(super) struct ApiTask {
    pub(super) api: String,
    pub(super) shared: std::sync::Arc<Shared>,
    /// When the API was last asked (the rate limit).
    pub(super) last_request: Option<Instant>,
}

/// What one API request said about the revisions asked.
enum Answer {
    Revisions(HashMap<u64, Result<Fetched, FetchError>>),
    /// Throttled: try again after this long.
    Later(Duration, String),
}

impl ApiTask {
    pub(super) async fn run(mut self, mut receiver: mpsc::UnboundedReceiver<Request>) {
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
