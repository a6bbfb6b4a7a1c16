//! A local stand-in for a MediaWiki's Action API, on loopback: it answers the one query
//! Casement's fetcher sends (`action=query&prop=revisions|info&revids=…`, formatversion
//! 2) from page histories a test gives it (the 18F Handbook's real revisions, numbered as
//! a wiki numbers them), and can throttle (429 with `Retry-After`), hide a revision's
//! text, delete a page and move one. It records every request. It is not MediaWiki and
//! claims no more than the answers' shape, which follows the API's documentation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::WikiRevision;

/// An answer given instead of the API's: status, headers, body.
type Canned = (StatusCode, Vec<(String, String)>, String);

/// What [`WikiStandIn::answer_instead`] takes: status, headers, body.
pub type Instead<'a> = (u16, &'a [(&'a str, &'a str)], &'a str);

#[derive(Debug, Default)]
struct Wiki {
    /// rev_id → (page_id, content)
    revisions: HashMap<u64, (u64, String)>,
    /// page_id → current title
    titles: HashMap<u64, String>,
    deleted_pages: HashSet<u64>,
    hidden: HashSet<u64>,
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
            .route("/w/api.php", axum::routing::get(api))
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

    fn with<T>(&self, f: impl FnOnce(&mut Wiki) -> T) -> T {
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
            json!({
                "pageid": page_id, "ns": 0, "title": title,
                "fullurl": format!("https://wiki.example/wiki/{}", title.replace(' ', "_")),
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
