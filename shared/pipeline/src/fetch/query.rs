//! Action API queries besides revisions, with the fetcher's login, limits and User-Agent:
//! what the MediaWiki poller asks (`list=recentchanges`, `logevents`, `siteinfo`,
//! `allpages`) and the start's check that each configured wiki lets this client read.

use std::time::Duration;

use serde_json::Value;

use super::session::{self, Denied, SessionError};
use super::{Fetcher, read_capped, without_url};

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
