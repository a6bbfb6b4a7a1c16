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
    /// The wikis revisions may be fetched from, by the host name events give
    /// (`meta.domain`, e.g. `en.wikipedia.org`; with `:port` where the wiki has one). An
    /// event naming another wiki, or anything that is not a host name, is dead-lettered
    /// (`unsupported`) without a request. Empty: the stream's
    /// `sources.mediawiki.domains` (the all-in-one); required when `api_url` names
    /// `{domain}`, or any event could make Casement ask any host.
    pub domains: Vec<String>,
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
    /// A longer answer is a failed request, read no further (the API caps its own answers
    /// at a few MiB: `$wgAPIMaxResultSize`).
    pub max_response_bytes: usize,
    /// `[fetch.auth]`: the login of a private wiki (a bot password or an OAuth 2 token).
    pub auth: super::WikiAuth,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            api_url: String::new(),
            domains: Vec::new(),
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
            max_response_bytes: 32 * 1024 * 1024,
            auth: super::WikiAuth::default(),
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
        self.auth.validate()?;
        if self.max_response_bytes < 1024 {
            return Err("fetch.max_response_bytes must be at least 1024".into());
        }
        for domain in &self.domains {
            if !is_host(domain) {
                return Err(format!(
                    "fetch.domains: {domain:?} is not a host name (letters, digits, dots and \
                     hyphens, optionally :port)"
                ));
            }
        }
        if self.enabled() && self.api_url.contains("{domain}") && self.domains.is_empty() {
            return Err(format!(
                "fetch.domains must list the wikis to fetch from: fetch.api_url = {:?} puts \
                 each event's domain into the URL, so without a list any event could make \
                 Casement ask any host",
                self.api_url
            ));
        }
        Ok(())
    }

    /// The API to ask for a revision of the wiki at `domain`.
    pub fn api_for(&self, domain: &str) -> String {
        self.api_url
            .replace("{domain}", &domain.to_ascii_lowercase())
    }

    /// Whether revisions of the wiki `domain` (an event's `meta.domain`) may be fetched: a
    /// host name (with a port only as listed), on `domains` when that is set. The reason
    /// when not.
    pub fn check_domain(&self, domain: &str) -> Result<(), String> {
        let shown: String = domain.chars().take(100).collect();
        if !is_host(domain) {
            return Err(format!(
                "the event's wiki {shown:?} is not a host name: nothing is fetched"
            ));
        }
        let listed = self.domains.iter().any(|d| d.eq_ignore_ascii_case(domain));
        if (self.api_url.contains("{domain}") || !self.domains.is_empty()) && !listed {
            return Err(format!(
                "the event's wiki {shown:?} is not on fetch.domains: nothing is fetched"
            ));
        }
        Ok(())
    }
}

/// `host` or `host:port`: DNS labels (letters, digits, hyphens, not at a label's ends)
/// joined by dots, or a dotted-quad IPv4 address; nothing that could change a URL's
/// meaning (`/`, `?`, `#`, `@`, `\`, spaces, percent escapes), nor a name a URL parser
/// would read as another address (`1.2.3` is 1.2.0.3 to it, `0x7f.1` is 127.0.0.1).
pub fn is_host(domain: &str) -> bool {
    let (host, port) = match domain.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    if let Some(port) = port
        && (port.is_empty()
            || port.len() > 5
            || !port.bytes().all(|b| b.is_ascii_digit())
            || (port.len() > 1 && port.starts_with('0'))
            || port.parse::<u16>().is_err())
    {
        return false;
    }
    let labels: Vec<&str> = host.split('.').collect();
    let dns = !host.is_empty()
        && host.len() <= 253
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    let last = labels.last().copied().unwrap_or("");
    let numeric = |label: &str| {
        label.bytes().all(|b| b.is_ascii_digit())
            || label
                .strip_prefix("0x")
                .or_else(|| label.strip_prefix("0X"))
                .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if dns && numeric(last) {
        // A URL parser reads it as IPv4: only the canonical form means what it says.
        return labels.len() == 4
            && labels.iter().all(|label| {
                label.bytes().all(|b| b.is_ascii_digit())
                    && (label.len() == 1 || !label.starts_with('0'))
                    && label.parse::<u8>().is_ok()
            });
    }
    dns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused() {
        let good = FetchConfig {
            api_url: "https://{domain}/w/api.php".into(),
            domains: vec!["en.wikipedia.org".into()],
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
            // {domain} in the URL without a list: any event could pick the host.
            FetchConfig {
                domains: Vec::new(),
                ..good.clone()
            },
            FetchConfig {
                domains: vec!["en.wikipedia.org/x".into()],
                ..good.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    /// An event's domain goes into a URL only when it is a host name on the list.
    #[test]
    fn only_listed_host_names_are_fetched_from() {
        let config = FetchConfig {
            api_url: "http://{domain}/w/api.php".into(),
            domains: vec!["en.wikipedia.org".into(), "127.0.0.1:8123".into()],
            ..FetchConfig::default()
        };
        assert_eq!(config.check_domain("en.wikipedia.org"), Ok(()));
        assert_eq!(config.check_domain("EN.Wikipedia.org"), Ok(()));
        assert_eq!(config.check_domain("127.0.0.1:8123"), Ok(()));
        for hostile in [
            "127.0.0.1:18193/internal/admin?via=webhook&",
            "de.wikipedia.org",
            "127.0.0.1:8124",
            "127.0.0.1",
            "en.wikipedia.org@attacker.example",
            "en.wikipedia.org#",
            "attacker.example/en.wikipedia.org",
            "en.wikipedia.org:",
            "en.wikipedia.org:99999",
            "en wikipedia.org",
            "en.wikipedia.org%2f",
            "[::1]:80",
            "",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "127.0.0.01",
            "en.wikipedia.org:0443",
        ] {
            assert!(config.check_domain(hostile).is_err(), "{hostile:?}");
        }
        // A fixed API: the domain does not go into the URL, but must still be a host name.
        let fixed = FetchConfig {
            api_url: "https://wiki.example/w/api.php".into(),
            ..FetchConfig::default()
        };
        assert_eq!(fixed.check_domain("anything.example"), Ok(()));
        assert!(fixed.check_domain("a/b?c").is_err());
        assert_eq!(
            config.api_for("EN.wikipedia.org"),
            "http://en.wikipedia.org/w/api.php"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Whatever an event names as its wiki, a domain the check lets through puts
        /// exactly that host (and port) into the URL, with the API's own path and no
        /// query, fragment or user of its own: the listed hosts are the only ones asked.
        #[test]
        fn an_accepted_domain_is_the_url_host_and_nothing_else(
            domain in "[a-zA-Z0-9.:/?#@%\\\\\\[\\] _&=-]{0,40}",
        ) {
            let config = FetchConfig {
                api_url: "https://{domain}/w/api.php".into(),
                domains: vec![domain.clone(), "wiki.example".into()],
                ..FetchConfig::default()
            };
            if config.check_domain(&domain).is_ok() {
                let url = reqwest::Url::parse(&config.api_for(&domain)).expect("a URL");
                let authority = match url.port() {
                    Some(port) => format!("{}:{port}", url.host_str().unwrap_or("")),
                    None => url.host_str().unwrap_or("").to_owned(),
                };
                let expected = domain.to_ascii_lowercase();
                let default_port = expected.strip_suffix(":443").unwrap_or(&expected);
                proptest::prop_assert_eq!(authority, default_port);
                proptest::prop_assert_eq!(url.path(), "/w/api.php");
                proptest::prop_assert!(url.query().is_none() && url.fragment().is_none());
                proptest::prop_assert!(url.username().is_empty() && url.password().is_none());
            }
            // Off the list, never.
            let strict = FetchConfig {
                domains: vec!["wiki.example".into()],
                ..config
            };
            if !domain.eq_ignore_ascii_case("wiki.example") {
                proptest::prop_assert!(strict.check_domain(&domain).is_err());
            }
        }
    }
}
