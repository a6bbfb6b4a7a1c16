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
use casement_events::revision_log::LogEvent;
use serde_json::{Value, json};

/// One revision of a wiki page, as the stand-in serves it and a `page_change` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiRevision {
    pub page_id: u64,
    pub rev_id: u64,
    pub title: String,
    pub content: String,
    /// The page_change kind that made it: create, edit or delete.
    pub kind: &'static str,
}

/// The revision log as a wiki's history: a page id per document (in order of first
/// appearance), a revision id per event, numbered across the wiki from 1000 in log order
/// (a wiki's revision ids grow over all its pages). Deletes keep the page's last revision.
pub fn wiki_history(events: &[LogEvent]) -> Vec<WikiRevision> {
    let mut pages: HashMap<&str, u64> = HashMap::new();
    let mut last: HashMap<u64, WikiRevision> = HashMap::new();
    let mut history = Vec::with_capacity(events.len());
    for (i, event) in events.iter().enumerate() {
        let next_page = pages.len() as u64 + 1;
        let page_id = *pages.entry(event.doc_id.as_str()).or_insert(next_page);
        let title = event
            .title
            .clone()
            .unwrap_or_else(|| event.doc_id.rsplit('/').next().unwrap_or("Page").to_owned());
        let revision = if event.is_delete() {
            let Some(previous) = last.get(&page_id) else {
                continue;
            };
            WikiRevision {
                kind: "delete",
                ..previous.clone()
            }
        } else {
            WikiRevision {
                page_id,
                rev_id: 1000 + i as u64,
                title,
                content: event.content.clone(),
                kind: if last.contains_key(&page_id) {
                    "edit"
                } else {
                    "create"
                },
            }
        };
        last.insert(page_id, revision.clone());
        history.push(revision);
    }
    history
}

/// A `mediawiki.page_change` event (schema 1.2.0) without content, as EventBus publishes
/// it, for `revision` of the wiki `wiki_id` at `domain`.
pub fn page_change(
    wiki_id: &str,
    domain: &str,
    kind: &str,
    revision: &WikiRevision,
    dt: &str,
) -> Value {
    json!({
        "$schema": "/mediawiki/page/change/1.2.0",
        "meta": {"stream": "mediawiki.page_change.v1", "domain": domain, "dt": dt,
                 "id": format!("{wiki_id}-{}-{kind}", revision.rev_id)},
        "dt": dt,
        "wiki_id": wiki_id,
        "page_change_kind": kind,
        "changelog_kind": if kind == "delete" { "delete" } else { "update" },
        "page": {"page_id": revision.page_id, "page_title": revision.title.replace(' ', "_"),
                 "namespace_id": 0, "is_redirect": false},
        "revision": {"rev_id": revision.rev_id, "rev_dt": dt, "is_content_visible": true,
                     "content_slots": {"main": {"slot_role": "main",
                                                "content_model": "wikitext"}}}
    })
}

#[derive(Debug, Default)]
struct Wiki {
    /// rev_id → (page_id, content)
    revisions: HashMap<u64, (u64, String)>,
    /// page_id → current title
    titles: HashMap<u64, String>,
    deleted_pages: HashSet<u64>,
    hidden: HashSet<u64>,
    throttle: u32,
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
    let mut wiki = wiki.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(agent) = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        wiki.user_agents.insert(agent.to_owned());
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

#[derive(Debug, Default)]
struct Stream {
    /// (SSE id, data) in stream order.
    events: Vec<(String, String)>,
    /// The open connections close after sending this many more events (once).
    disconnect_after: Option<usize>,
    /// A reconnect with `Last-Event-ID` gets this many events before it again.
    duplicate_on_resume: usize,
    /// The `Last-Event-ID` of every connection, in order.
    connections: Vec<Option<String>>,
}

/// A local stand-in for an EventStreams endpoint (`/v2/stream/mediawiki.page_change.v1`),
/// on loopback: Server-Sent Events over plain HTTP/1.1, each with an id in EventStreams'
/// shape (the Kafka topic, partition and offset), resumed after `Last-Event-ID`. It can
/// cut its connections after a number of events and send events again after a resume.
/// A connection without `Last-Event-ID` gets the stream from its start (EventStreams
/// would start from now: a test wants every event it pushed).
#[derive(Debug)]
pub struct StreamStandIn {
    /// The stream's URL.
    pub url: String,
    stream: Arc<Mutex<Stream>>,
    pushed: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StreamStandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const TOPIC: &str = "eqiad.mediawiki.page_change.v1";

impl StreamStandIn {
    pub async fn start() -> Self {
        let stream = Arc::new(Mutex::new(Stream::default()));
        let pushed = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in stream");
        let address = listener.local_addr().expect("address");
        let (shared, notify) = (stream.clone(), pushed.clone());
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve_stream(socket, shared.clone(), notify.clone()));
            }
        });
        Self {
            url: format!("http://{address}/v2/stream/mediawiki.page_change.v1"),
            stream,
            pushed,
            task,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Stream) -> T) -> T {
        f(&mut self.stream.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Appends an event; returns its SSE id.
    pub fn push(&self, event: &Value) -> String {
        let id = self.with(|stream| {
            let id = json!([{"topic": TOPIC, "partition": 0, "offset": stream.events.len()}])
                .to_string();
            stream.events.push((id.clone(), event.to_string()));
            id
        });
        self.pushed.notify_waiters();
        id
    }

    /// The open connections close after sending `events` more events.
    pub fn disconnect_after(&self, events: usize) {
        self.with(|stream| stream.disconnect_after = Some(events));
        self.pushed.notify_waiters();
    }

    /// Each later resume gets `events` events before its `Last-Event-ID` again.
    pub fn duplicate_on_resume(&self, events: usize) {
        self.with(|stream| stream.duplicate_on_resume = events);
    }

    /// The `Last-Event-ID` of every connection so far.
    pub fn connections(&self) -> Vec<Option<String>> {
        self.with(|stream| stream.connections.clone())
    }
}

async fn serve_stream(
    mut socket: tokio::net::TcpStream,
    stream: Arc<Mutex<Stream>>,
    pushed: Arc<tokio::sync::Notify>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let last_id = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("last-event-id")
            .then(|| value.trim().to_owned())
    });
    let lock = || stream.lock().unwrap_or_else(|p| p.into_inner());
    let mut next = {
        let mut stream = lock();
        stream.connections.push(last_id.clone());
        match &last_id {
            Some(id) => stream
                .events
                .iter()
                .position(|(event_id, _)| event_id == id)
                .map_or(0, |at| (at + 1).saturating_sub(stream.duplicate_on_resume)),
            None => 0,
        }
    };
    let response = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    if socket.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    loop {
        let waiting = pushed.notified();
        let (batch, cut) = {
            let mut stream = lock();
            let available: Vec<(String, String)> =
                stream.events[next.min(stream.events.len())..].to_vec();
            match stream.disconnect_after {
                Some(left) if left <= available.len() => {
                    stream.disconnect_after = None;
                    (available[..left].to_vec(), true)
                }
                Some(left) => {
                    stream.disconnect_after = Some(left - available.len());
                    (available, false)
                }
                None => (available, false),
            }
        };
        for (id, data) in &batch {
            let frame = format!("event: message\nid: {id}\ndata: {data}\n\n");
            if socket.write_all(frame.as_bytes()).await.is_err() {
                return;
            }
        }
        next += batch.len();
        if cut {
            let _ = socket.shutdown().await;
            return;
        }
        // A comment now and then, as EventStreams sends, so an idle stream stays open.
        if tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .is_err()
            && socket.write_all(b":\n\n").await.is_err()
        {
            return;
        }
    }
}
