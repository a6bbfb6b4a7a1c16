//! A local stand-in for a MediaWiki's Action API, on loopback: it answers the query
//! Casement's fetcher sends (`action=query&prop=revisions|info&revids=…`, formatversion
//! 2) from page histories a test gives it (the 18F Handbook's real revisions, numbered as
//! a wiki numbers them, or real Wikipedia wikitext), and can throttle (429 with
//! `Retry-After`), hide a revision's text, delete a page and move one. Edited through
//! [`WikiStandIn::edit`] and the log actions beside it, it also keeps recent changes and
//! answers the poller and the audit, behind a login when asked ([`super::changes`]). It
//! records every request. It is not MediaWiki and claims no more than the answers' shape,
//! which follows the API's documentation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::WikiRevision;
use super::changes::{self, Login};

/// An answer given instead of the API's: status, headers, body.
type Canned = (StatusCode, Vec<(String, String)>, String);

/// What [`WikiStandIn::answer_instead`] takes: status, headers, body.
pub type Instead<'a> = (u16, &'a [(&'a str, &'a str)], &'a str);

#[derive(Debug, Default)]
pub(super) struct Wiki {
    /// rev_id → (page_id, content)
    pub(super) revisions: HashMap<u64, (u64, String)>,
    /// page_id → current title
    pub(super) titles: HashMap<u64, String>,
    /// page_id → namespace, when not 0.
    pub(super) namespaces: HashMap<u64, i64>,
    pub(super) redirects: HashSet<u64>,
    pub(super) deleted_pages: HashSet<u64>,
    pub(super) hidden: HashSet<u64>,
    /// Recent changes, in order; those below `horizon` (an rcid) are gone.
    pub(super) changes: Vec<Value>,
    pub(super) next_rcid: u64,
    pub(super) horizon: u64,
    /// The log (`list=logevents`), kept whole: the recent changes' horizon does not
    /// reach it.
    pub(super) logs: Vec<Value>,
    /// A frozen clock (seconds since the epoch); `None`: the real one.
    pub(super) clock: Option<i64>,
    pub(super) login: Option<Login>,
    /// Logged-in sessions, and login tokens by the session they were given to.
    pub(super) sessions: HashSet<String>,
    pub(super) pending: HashMap<String, String>,
    pub(super) next_session: u64,
    pub(super) login_attempts: usize,
    /// Requests answered readapidenied or assertuserfailed.
    pub(super) refused: usize,
    throttle: u32,
    /// Every answer is this (status, headers, body) instead of the API's.
    broken: Option<Canned>,
    /// Each answer waits this long first.
    delay: std::time::Duration,
    /// Requests received (answered or not yet).
    arrivals: usize,
    requests: Vec<Vec<u64>>,
    user_agents: HashSet<String>,
}

/// The running stand-in; stops when dropped.
#[derive(Debug)]
pub struct WikiStandIn {
    /// The Action API endpoint (`http://127.0.0.1:PORT/w/api.php`).
    pub api_url: String,
    wiki: Arc<Mutex<Wiki>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WikiStandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WikiStandIn {
    pub async fn start() -> Self {
        let wiki = Arc::new(Mutex::new(Wiki::default()));
        let app = axum::Router::new()
            .route("/w/api.php", axum::routing::get(api).post(login))
            .with_state(wiki.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in wiki");
        let address = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("stand-in wiki");
        });
        Self {
            api_url: format!("http://{address}/w/api.php"),
            wiki,
            task,
        }
    }

    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Wiki) -> T) -> T {
        f(&mut self.wiki.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Publishes a revision (its page takes the revision's title).
    pub fn publish(&self, revision: &WikiRevision) {
        self.with(|wiki| {
            wiki.revisions.insert(
                revision.rev_id,
                (revision.page_id, revision.content.clone()),
            );
            wiki.titles.insert(revision.page_id, revision.title.clone());
            wiki.deleted_pages.remove(&revision.page_id);
        });
    }

    /// Renames a page (its revisions are now served under the new title).
    pub fn move_page(&self, page_id: u64, title: &str) {
        self.with(|wiki| wiki.titles.insert(page_id, title.to_owned()));
    }

    /// Deletes a page: its revisions are answered as bad revision ids.
    pub fn delete_page(&self, page_id: u64) {
        self.with(|wiki| wiki.deleted_pages.insert(page_id));
    }

    /// Brings a deleted page back with its revisions.
    pub fn undelete_page(&self, page_id: u64) {
        self.with(|wiki| wiki.deleted_pages.remove(&page_id));
    }

    /// Hides a revision's text (revision deletion).
    pub fn hide(&self, rev_id: u64) {
        self.with(|wiki| wiki.hidden.insert(rev_id));
    }

    /// Only users logged in with this bot password may read.
    pub fn require_bot_password(&self, user: &str, password: &str) {
        self.with(|wiki| {
            wiki.login = Some(Login::BotPassword {
                user: user.to_owned(),
                password: password.to_owned(),
            });
        });
    }

    /// Only requests with this OAuth 2 bearer token may read.
    pub fn require_token(&self, token: &str) {
        self.with(|wiki| wiki.login = Some(Login::Bearer(token.to_owned())));
    }

    /// Lets anyone read again (no login required).
    pub fn allow_anyone(&self) {
        self.with(|wiki| wiki.login = None);
    }

    /// Drops every session (they expired): the next request of each is refused.
    pub fn expire_sessions(&self) {
        self.with(|wiki| wiki.sessions.clear());
    }

    /// `action=login` requests received.
    pub fn login_attempts(&self) -> usize {
        self.with(|wiki| wiki.login_attempts)
    }

    /// Requests refused for want of a login (readapidenied, assertuserfailed).
    pub fn refused(&self) -> usize {
        self.with(|wiki| wiki.refused)
    }

    /// Answers the next `requests` requests with 429 and `Retry-After: 1`.
    pub fn throttle(&self, requests: u32) {
        self.with(|wiki| wiki.throttle = requests);
    }

    /// Answers every request with `body` and `status` (and `headers`) instead of the API's
    /// answer (`None`: the API again): a wiki behind a broken proxy, an error page, a
    /// redirect elsewhere.
    pub fn answer_instead(&self, answer: Option<Instead<'_>>) {
        self.with(|wiki| {
            wiki.broken = answer.map(|(status, headers, body)| {
                (
                    StatusCode::from_u16(status).expect("status"),
                    headers
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                    body.to_owned(),
                )
            });
        });
    }

    /// Makes every answer wait `delay` first (a slow wiki).
    pub fn slow_down(&self, delay: std::time::Duration) {
        self.with(|wiki| wiki.delay = delay);
    }

    /// Requests received so far, answered or still waiting (a slow wiki).
    pub fn arrivals(&self) -> usize {
        self.with(|wiki| wiki.arrivals)
    }

    /// The revision ids of every request answered with content (not throttled), in order.
    pub fn requests(&self) -> Vec<Vec<u64>> {
        self.with(|wiki| wiki.requests.clone())
    }

    /// The User-Agent headers seen.
    pub fn user_agents(&self) -> HashSet<String> {
        self.with(|wiki| wiki.user_agents.clone())
    }
}

/// `action=login`, the one POST (a form body).
async fn login(State(wiki): State<Arc<Mutex<Wiki>>>, headers: HeaderMap, body: String) -> Response {
    let form = changes::form(&body);
    let mut wiki = wiki.lock().unwrap_or_else(|p| p.into_inner());
    if form.get("action").map(String::as_str) != Some("login") {
        return axum::Json(json!({"error": {"code": "badvalue",
            "info": "the stand-in takes POST for action=login only"}}))
        .into_response();
    }
    let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    let (answer, session) = wiki.log_in(&form, cookie);
    let mut response = axum::Json(answer).into_response();
    if let Some(session) = session
        && let Ok(value) = format!("standinwiki_session={session}; path=/; HttpOnly").parse()
    {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn api(
    State(wiki): State<Arc<Mutex<Wiki>>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let delay = {
        let mut wiki = wiki.lock().unwrap_or_else(|p| p.into_inner());
        wiki.arrivals += 1;
        wiki.delay
    };
    tokio::time::sleep(delay).await;
    let mut wiki = wiki.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(agent) = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        wiki.user_agents.insert(agent.to_owned());
    }
    if let Some((status, headers, body)) = &wiki.broken {
        let mut response = (*status, body.clone()).into_response();
        for (name, value) in headers {
            if let (Ok(name), Ok(value)) = (
                axum::http::HeaderName::from_bytes(name.as_bytes()),
                axum::http::HeaderValue::from_str(value),
            ) {
                response.headers_mut().insert(name, value);
            }
        }
        return response;
    }
    if wiki.throttle > 0 {
        wiki.throttle -= 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "Too many requests",
        )
            .into_response();
    }
    let param = |key: &str| params.get(key).map_or("", String::as_str);
    if param("meta") == "tokens" && param("type") == "login" {
        let (answer, session) = wiki.login_token();
        let mut response = axum::Json(answer).into_response();
        if let Ok(value) = format!("standinwiki_session={session}; path=/; HttpOnly").parse() {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return response;
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    if let Some(error) = wiki.refuse(&params, bearer, cookie) {
        wiki.refused += 1;
        return axum::Json(error).into_response();
    }
    if param("list") == "recentchanges" {
        return axum::Json(wiki.recent_changes(&params)).into_response();
    }
    if param("list") == "logevents" {
        return axum::Json(wiki.log_events(&params)).into_response();
    }
    if param("meta") == "siteinfo" {
        return axum::Json(wiki.siteinfo(&params)).into_response();
    }
    if param("generator") == "allpages" {
        return axum::Json(wiki.all_pages(&params)).into_response();
    }
    if let Some(ids) = params.get("pageids") {
        return axum::Json(wiki.pages_by_id(ids)).into_response();
    }
    let query_ok = params.get("action").map(String::as_str) == Some("query")
        && params.get("formatversion").map(String::as_str) == Some("2")
        && params.get("rvslots").map(String::as_str) == Some("main");
    let Some(revids) = params.get("revids").filter(|_| query_ok) else {
        return axum::Json(json!({"error": {"code": "badvalue",
            "info": "the stand-in answers action=query&prop=revisions&revids=…&rvslots=main&formatversion=2"}}))
        .into_response();
    };
    let ids: Vec<u64> = revids.split('|').filter_map(|id| id.parse().ok()).collect();
    wiki.requests.push(ids.clone());
    let mut pages: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    let mut bad = serde_json::Map::new();
    for id in ids {
        match wiki.revisions.get(&id) {
            Some((page_id, _)) if wiki.deleted_pages.contains(page_id) => {
                bad.insert(id.to_string(), json!({"revid": id, "missing": true}));
            }
            None => {
                bad.insert(id.to_string(), json!({"revid": id, "missing": true}));
            }
            Some((page_id, _)) if wiki.hidden.contains(&id) => {
                pages.entry(*page_id).or_default().push(json!({
                    "revid": id, "slots": {"main": {"texthidden": true}}
                }));
            }
            Some((page_id, content)) => {
                pages.entry(*page_id).or_default().push(json!({
                    "revid": id,
                    "slots": {"main": {"contentmodel": "wikitext",
                                       "contentformat": "text/x-wiki",
                                       "content": content}}
                }));
            }
        }
    }
    let pages: Vec<Value> = pages
        .into_iter()
        .map(|(page_id, revisions)| {
            let title = wiki.titles.get(&page_id).cloned().unwrap_or_default();
            let namespace = wiki.namespaces.get(&page_id).copied().unwrap_or(0);
            json!({
                "pageid": page_id, "ns": namespace, "title": title,
                "fullurl": format!("https://wiki.example/wiki/{}", title.replace(' ', "_")),
                "editurl": format!(
                    "https://wiki.example/w/index.php?title={}&action=edit",
                    title.replace(' ', "_")
                ),
                "revisions": revisions
            })
        })
        .collect();
    let mut query = json!({"pages": pages});
    if !bad.is_empty() {
        query["badrevids"] = Value::Object(bad);
    }
    axum::Json(json!({"batchcomplete": true, "query": query})).into_response()
}
