//! Logging in to a private wiki (`[fetch.auth]`), for the fetcher and the MediaWiki
//! poller: a bot password (`action=login` with a login token; the session cookies kept
//! per API and sent with every request) or an OAuth 2 owner-only access token
//! (`Authorization: Bearer`). Requests then carry `assert=user`, so a session the wiki
//! dropped is an `assertuserfailed` error: the session is forgotten and the next request
//! logs in again. Credentials are `Secret`s: never logged, never in an error message.

use std::collections::{BTreeMap, HashMap};

use casement_config::Secret;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[fetch.auth]`: how to log in to a wiki that does not let everyone read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WikiAuth {
    /// A bot password's login name, `User@Bot` (Special:BotPasswords; grant it "basic
    /// rights" and, for hidden revisions, nothing more: Casement only reads).
    pub username: String,
    /// The bot password (prefer the environment: `..._FETCH__AUTH__PASSWORD`).
    pub password: Option<Secret>,
    /// An OAuth 2 owner-only access token (Special:OAuthConsumerRegistration), sent as
    /// `Authorization: Bearer`; instead of a bot password.
    pub token: Option<Secret>,
}

impl WikiAuth {
    pub fn configured(&self) -> bool {
        !self.username.is_empty() || self.token.is_some() || self.password.is_some()
    }

    pub fn validate(&self) -> Result<(), String> {
        let password = self.password.as_ref().is_some_and(|p| !p.is_empty());
        let token = self.token.as_ref().is_some_and(|t| !t.is_empty());
        match (self.username.is_empty(), password, token) {
            (true, false, false) if !self.configured() => Ok(()),
            (false, true, false) => Ok(()),
            (true, false, true) => Ok(()),
            (_, _, true) => Err(
                "fetch.auth: set either token (OAuth 2) or username and password (a bot \
                 password), not both"
                    .into(),
            ),
            _ => Err(
                "fetch.auth: a bot password needs both username (User@Bot) and password; \
                 an OAuth 2 access token goes in token"
                    .into(),
            ),
        }
    }
}

/// The wiki said this request may not read: a login that failed, a token it refused, or
/// no login where the wiki requires one. Not worth retrying until the settings change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

/// Sessions by API (cookies of a bot-password login), shared by every request.
#[derive(Debug, Default)]
pub struct Session {
    auth: WikiAuth,
    cookies: tokio::sync::Mutex<HashMap<String, BTreeMap<String, String>>>,
}

impl Session {
    pub fn new(auth: WikiAuth) -> Self {
        Self {
            auth,
            cookies: tokio::sync::Mutex::default(),
        }
    }

    pub fn configured(&self) -> bool {
        self.auth.configured()
    }

    /// `request` to `api` with the credentials: the bearer token, or the session's cookies
    /// (logging in first when there is no session).
    pub async fn authorize(
        &self,
        client: &reqwest::Client,
        api: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, SessionError> {
        if let Some(token) = &self.auth.token {
            return Ok(request.bearer_auth(token.expose()));
        }
        if self.auth.username.is_empty() {
            return Ok(request);
        }
        let mut sessions = self.cookies.lock().await;
        if !sessions.contains_key(api) {
            let cookies = self.login(client, api).await?;
            tracing::info!(%api, user = %self.auth.username, "logged in to the wiki");
            sessions.insert(api.to_owned(), cookies);
        }
        Ok(match sessions.get(api) {
            Some(cookies) if !cookies.is_empty() => {
                request.header(reqwest::header::COOKIE, cookie_header(cookies))
            }
            _ => request,
        })
    }

    /// The wiki dropped the session (`assertuserfailed`): the next request logs in again.
    pub async fn expire(&self, api: &str) {
        if self.cookies.lock().await.remove(api).is_some() {
            tracing::info!(%api, "the wiki session expired; logging in again");
        }
    }

    /// `action=login` with a bot password: a login token (which starts a session), then
    /// the login itself, both under the session's cookies.
    async fn login(
        &self,
        client: &reqwest::Client,
        api: &str,
    ) -> Result<BTreeMap<String, String>, SessionError> {
        let failed = |why: String| SessionError::Unavailable(format!("{api}: logging in: {why}"));
        let mut cookies = BTreeMap::new();
        let url = reqwest::Url::parse_with_params(
            api,
            [
                ("action", "query"),
                ("meta", "tokens"),
                ("type", "login"),
                ("format", "json"),
                ("formatversion", "2"),
            ],
        )
        .map_err(|e| failed(e.to_string()))?;
        let response = client
            .get(url)
            .send()
            .await
            .map_err(|e| failed(super::without_url(&e)))?;
        keep_cookies(&mut cookies, response.headers());
        let json = answer(response).await.map_err(failed)?;
        let token = json
            .pointer("/query/tokens/logintoken")
            .and_then(Value::as_str)
            .ok_or_else(|| failed("the wiki gave no login token".into()))?
            .to_owned();
        let password = self.auth.password.as_ref().map_or("", Secret::expose);
        // The form body as a query string: the same encoding (application/x-www-form-urlencoded).
        let form = reqwest::Url::parse_with_params(
            "http://form/",
            [
                ("action", "login"),
                ("format", "json"),
                ("formatversion", "2"),
                ("lgname", self.auth.username.as_str()),
                ("lgpassword", password),
                ("lgtoken", token.as_str()),
            ],
        )
        .map_err(|e| failed(e.to_string()))?;
        let response = client
            .post(api)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::COOKIE, cookie_header(&cookies))
            .body(form.query().unwrap_or("").to_owned())
            .send()
            .await
            .map_err(|e| failed(super::without_url(&e)))?;
        keep_cookies(&mut cookies, response.headers());
        let json = answer(response).await.map_err(failed)?;
        let result = json.pointer("/login/result").and_then(Value::as_str);
        if result == Some("Success") {
            return Ok(cookies);
        }
        // The wiki's reason says which part is wrong; it never holds the password.
        let reason: String = json
            .pointer("/login/reason")
            .and_then(Value::as_str)
            .or(result)
            .unwrap_or("no answer")
            .chars()
            .take(200)
            .collect();
        Err(SessionError::Denied(Denied(format!(
            "{api}: the wiki refused the login of fetch.auth.username = {:?}: {reason} \
             (a bot password from Special:BotPasswords: username User@Bot and its password)",
            self.auth.username
        ))))
    }
}

/// Why a request could not be made ready.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Denied(#[from] Denied),
    /// The login did not get an answer this time: retried.
    #[error("{0}")]
    Unavailable(String),
}

/// An API error code that says the request may not read, with what to do about it; `None`
/// for the others.
pub fn denied(code: &str, auth: bool) -> Option<String> {
    match code {
        "readapidenied" if !auth => Some(
            "the wiki lets only logged-in users read (readapidenied): set [fetch.auth] \
             (a bot password or an OAuth 2 token)"
                .into(),
        ),
        "readapidenied" | "permissiondenied" => Some(format!(
            "the wiki refused to let fetch.auth's account read ({code}): grant it the \
             right to read"
        )),
        "mwoauth-invalid-authorization" | "mwoauth-invalid-authorization-invalid-user" => Some(
            format!("the wiki refused fetch.auth.token ({code}): a valid OAuth 2 access token"),
        ),
        _ => None,
    }
}

fn cookie_header(cookies: &BTreeMap<String, String>) -> String {
    cookies
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Each `Set-Cookie`'s name and value (attributes are the browser's business: the session
/// is this process's, for this API only).
fn keep_cookies(cookies: &mut BTreeMap<String, String>, headers: &reqwest::header::HeaderMap) {
    for value in headers.get_all(reqwest::header::SET_COOKIE) {
        let Ok(value) = value.to_str() else { continue };
        let pair = value.split(';').next().unwrap_or("");
        if let Some((name, value)) = pair.split_once('=') {
            let (name, value) = (name.trim(), value.trim());
            if value.is_empty() || value == "deleted" {
                cookies.remove(name);
            } else {
                cookies.insert(name.to_owned(), value.to_owned());
            }
        }
    }
}

/// A login step's JSON (small answers; the body never reaches an error message).
async fn answer(response: reqwest::Response) -> Result<Value, String> {
    let status = response.status();
    if !status.is_success() {
        return Err(format!("the wiki answered {status}"));
    }
    let body = super::read_capped(response, 1024 * 1024).await?;
    serde_json::from_slice(&body).map_err(|_| "the answer is not the API's JSON".to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn auth_is_a_bot_password_or_a_token() {
        let secret = |s: &str| Some(Secret::new(s));
        assert!(WikiAuth::default().validate().is_ok());
        let bot = WikiAuth {
            username: "Casement@indexer".into(),
            password: secret("p"),
            token: None,
        };
        assert!(bot.validate().is_ok());
        let token = WikiAuth {
            token: secret("t"),
            ..WikiAuth::default()
        };
        assert!(token.validate().is_ok());
        let both = WikiAuth {
            token: secret("t"),
            ..bot.clone()
        };
        assert!(both.validate().unwrap_err().contains("not both"));
        let half = WikiAuth {
            password: None,
            ..bot
        };
        assert!(half.validate().unwrap_err().contains("both username"));
    }

    #[test]
    fn cookies_are_kept_by_name_and_cleared() {
        let mut headers = reqwest::header::HeaderMap::new();
        for value in [
            "wiki_session=abc; path=/; HttpOnly",
            "wikiUserID=7; expires=Tue, 01 Dec 2026 00:00:00 GMT",
        ] {
            headers.append(reqwest::header::SET_COOKIE, value.parse().unwrap());
        }
        let mut cookies = BTreeMap::new();
        keep_cookies(&mut cookies, &headers);
        assert_eq!(cookie_header(&cookies), "wikiUserID=7; wiki_session=abc");
        let mut cleared = reqwest::header::HeaderMap::new();
        cleared.append(
            reqwest::header::SET_COOKIE,
            "wikiUserID=deleted; expires=Thu, 01 Jan 1970 00:00:00 GMT"
                .parse()
                .unwrap(),
        );
        keep_cookies(&mut cookies, &cleared);
        assert_eq!(cookie_header(&cookies), "wiki_session=abc");
    }
}
