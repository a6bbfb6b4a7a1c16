//! `[fetch]`: the fetcher's settings.

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

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
