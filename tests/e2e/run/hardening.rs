//! The second adversarial round (issue 35) through the binary: the admin routes are off
//! without an operator key and limited with one; routes that change state refuse what a
//! web page can make a browser send; an event cannot make Casement ask a host the
//! operator did not list, nor forge a log line; every route is observed and admin
//! actions name the key; a hostile MediaWiki stream cannot stall or silence the source.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{Casement, Client, OPERATOR_KEY, eventually, write_config};

/// A one-event revision log, so the service starts fast without the bundled sample.
fn tiny_log(dir: &Path) -> String {
    let path = dir.join("tiny.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(
        file,
        "{}",
        json!({"change": "create", "doc_id": "kb:start", "revision": 1, "title": "Start",
               "timestamp": "2026-11-28T04:00:00Z", "format": "markdown",
               "content": "# Start\n\nThe service started with this page.\n"})
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

async fn post(
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
        headers,
    )
}

fn native(doc_id: &str, revision: u64, text: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"type": "upsert", "doc_id": doc_id, "revision": revision,
        "title": "Door codes", "format": "markdown", "content": text}),
    )
    .unwrap()
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keys_admin_routes_are_off_and_browsers_cannot_change_state() {
    let dir = tempfile::tempdir().unwrap();
    // A host the operator did not list: an event must never make Casement ask it.
    let internal = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let internal_address = internal.local_addr().unwrap();
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    let listening = tokio::spawn(async move {
        while let Ok((mut socket, _)) = internal.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = socket
                .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 35\r\n\r\nINTERNAL-ONLY: db_password=hunter2")
                .await;
        }
    });
    let config = write_config(
        dir.path(),
        "[fetch]\napi_url = \"http://{domain}/w/api.php\"\ndomains = [\"wiki.example\"]\n",
    );
    let mut casement = Casement::start(dir.path(), &config, &["--replay", &tiny_log(dir.path())]);
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let base = casement.base.clone();
    let client = Client::new(&base);

    // Admin routes: off, with the reason, whatever is sent.
    let (status, body) = client.get("/v1/admin/migrations").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("admin routes are off"), "{body}");
    let (status, body, _) = post(
        &base,
        "/v1/admin/migrations",
        &[JSON],
        r#"{"set": ["embedder.precision=int8"], "force": true, "keep_hours": 0}"#,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, _, _) = post(
        &base,
        "/v1/admin/migrations/rollback",
        &[("content-type", "text/plain")],
        "",
    )
    .await;
    assert_eq!(status, 403);

    // A browser's "simple request": text/plain is refused, and nothing changes.
    let delete = r#"{"type": "delete", "doc_id": "kb:codes", "revision": 999}"#;
    let (status, body, _) = post(
        &base,
        "/v1/events",
        &[("content-type", "text/plain")],
        delete,
    )
    .await;
    assert_eq!(status, 415, "{body}");
    let (status, body, _) = post(&base, "/v1/events", &[], delete).await;
    assert_eq!(status, 415, "no content type: {body}");
    // A page on another origin, even with JSON.
    let (status, body, _) = post(
        &base,
        "/v1/events",
        &[JSON, ("origin", "http://evil.example")],
        delete,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // The revision-999 delete never happened: revision 2 is applied, not fenced.
    let same_origin = base.clone();
    let (status, body, headers) = post(
        &base,
        "/v1/events",
        &[JSON, ("origin", same_origin.as_str())],
        native(
            "kb:codes",
            2,
            "# Door codes\n\nThe pantry door code is 5521.\n",
        ),
    )
    .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("applied")),
        "{body}"
    );
    assert!(
        headers.contains_key("x-request-id"),
        "the webhook is observed"
    );

    // An id that would forge a log line is refused at decode.
    let forged = "kb:a\n2026-11-28T04:20:00Z ERROR casement: migration failed";
    let (status, body, _) = post(&base, "/v1/events", &[JSON], native(forged, 1, "Text.")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("schema")),
        "{body}"
    );

    // A page_change naming an internal address as its wiki: dead-lettered, never fetched.
    let page_change = json!({
        "$schema": "/mediawiki/page/change/1.2.0",
        "meta": {"domain": format!("{internal_address}/internal/admin?via=webhook&"),
                 "dt": "2026-11-28T04:00:00Z"},
        "wiki_id": "wiki", "page_change_kind": "edit",
        "page": {"page_id": 7, "page_title": "Door", "namespace_id": 0, "is_redirect": false},
        "revision": {"rev_id": 70}
    });
    let (status, body, _) = post(
        &base,
        "/v1/events",
        &[JSON],
        serde_json::to_vec(&page_change).unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("unsupported")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a host name"),
        "{body}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the internal host was asked"
    );

    // Every route is counted, the refused admin requests too.
    let metrics = client.get("/metrics").await.1;
    for series in [
        "casement_query_requests_total{route=\"/v1/admin/migrations\",status=\"403\"}",
        "casement_query_requests_total{route=\"/v1/events\",status=\"415\"}",
    ] {
        assert!(metrics.contains(series), "{series}");
    }
    let stderr = casement.stop();
    assert!(stderr.contains("admin routes: off"), "{stderr}");
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with("2026-11-28T04:20:00Z")),
        "a forged line: {stderr}"
    );
    assert!(!stderr.contains("db_password"), "{stderr}");
    listening.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_admin_routes_take_only_what_a_migration_changes_and_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    const TENANT_KEY: &str = "acme-tenant-key-0123456789";
    let config = write_config(
        dir.path(),
        &format!(
            "{}\n[[auth.keys]]\ntoken = \"{TENANT_KEY}\"\ntenant = \"acme\"\nname = \"acme-bot\"\n",
            crate::support::OPERATOR_KEYS
        ),
    );
    let mut casement = Casement::start(dir.path(), &config, &["--replay", &tiny_log(dir.path())]);
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let base = casement.base.clone();
    let operator = format!("Bearer {OPERATOR_KEY}");
    let lower = format!("bearer {OPERATOR_KEY}");

    // The scheme is case-insensitive.
    let (status, body, _) = post(
        &base,
        "/v1/search",
        &[JSON, ("authorization", lower.as_str())],
        r#"{"query": "started"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // No key: 401, observed like any route.
    let (status, _, headers) = post(&base, "/v1/admin/migrations", &[JSON], r#"{"set": []}"#).await;
    assert_eq!(status, 401);
    assert!(headers.contains_key("x-request-id"));
    // A tenant's key: 403.
    let tenant = format!("Bearer {TENANT_KEY}");
    let (status, _, _) = post(
        &base,
        "/v1/admin/migrations",
        &[JSON, ("authorization", tenant.as_str())],
        r#"{"set": ["embedder.precision=int8"]}"#,
    )
    .await;
    assert_eq!(status, 403);

    // Only what a migration changes; URLs, key variables and endpoints are the file's.
    for set in [
        json!(["enrich.llm.base_url=http://attacker.example/v1"]),
        json!([
            "enrich.mode=llm",
            "enrich.llm.base_url=http://attacker.example/v1"
        ]),
        json!([
            "embedder={kind=\"openai\", openai={base_url=\"http://attacker.example/v1\", model=\"x\", api_key_env=\"HOME\"}}"
        ]),
        json!(["embedder.openai.base_url=http://attacker.example/v1"]),
        json!(["store.collection=other"]),
    ] {
        let (status, body, _) = post(
            &base,
            "/v1/admin/migrations",
            &[JSON, ("authorization", operator.as_str())],
            serde_json::to_vec(&json!({"set": set})).unwrap(),
        )
        .await;
        assert_eq!(status, 422, "{set}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cannot be changed through the API"),
            "{body}"
        );
    }
    // The replaced index cannot be thrown away at once.
    let (status, body, _) = post(
        &base,
        "/v1/admin/migrations",
        &[JSON, ("authorization", operator.as_str())],
        r#"{"set": ["embedder.precision=int8"], "force": true, "keep_hours": 0}"#,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("keep_hours"),
        "{body}"
    );
    // Not from a browser page, even with the key.
    let (status, _, _) = post(
        &base,
        "/v1/admin/migrations/rollback",
        &[
            ("content-type", "text/plain"),
            ("authorization", operator.as_str()),
        ],
        "",
    )
    .await;
    assert_eq!(status, 415);

    let metrics = Client::with_key(&base, OPERATOR_KEY)
        .get("/metrics")
        .await
        .1;
    assert!(
        metrics.contains(
            "casement_query_requests_total{route=\"/v1/admin/migrations\",status=\"401\"}"
        ),
        "{metrics}"
    );
    let stderr = casement.stop();
    let refused: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("admin request refused"))
        .collect();
    assert!(
        refused.iter().any(|l| l.contains("acme-bot")),
        "the refusal names the key: {refused:?}"
    );
    assert!(
        stderr.lines().any(|l| l.contains("casement::access")
            && l.contains("/v1/admin/migrations")
            && l.contains("401")),
        "an access line for the refused admin request:\n{stderr}"
    );
    assert!(
        !stderr.contains(TENANT_KEY) && !stderr.contains(OPERATOR_KEY),
        "a token in the log"
    );
}

/// What the raw stream serves each connection (in order; the last one again after).
type Script = Vec<Vec<u8>>;

/// A scripted Server-Sent Events endpoint: connection `i` gets `scripts[i]`'s parts, one
/// every `gap`, then stays open (without a `close_after`) or closes.
async fn scripted_stream(
    scripts: Vec<(Script, Duration, bool)>,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(Instant, Option<String>)>>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/stream", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((mut socket, _)) = listener.accept().await {
            let (parts, gap, close) = scripts[n.min(scripts.len() - 1)].clone();
            n += 1;
            let log = log.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 8192];
                let read = socket.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..read]).to_string();
                let last_id = request
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("last-event-id: ")
                            .or_else(|| l.strip_prefix("Last-Event-ID: "))
                    })
                    .map(str::to_owned);
                log.lock().unwrap().push((Instant::now(), last_id));
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
                    .await;
                for part in parts {
                    if socket.write_all(&part).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(gap).await;
                }
                if !close {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            });
        }
    });
    (url, seen)
}

fn page_change(page_id: u64, rev_id: u64, text: &str) -> String {
    json!({
        "$schema": "/mediawiki/page/change/1.2.0",
        "meta": {"domain": "wiki.example", "dt": "2026-11-28T04:00:00Z"},
        "wiki_id": "wiki", "page_change_kind": "edit",
        "page": {"page_id": page_id, "page_title": format!("Page_{page_id}"), "namespace_id": 0,
                 "is_redirect": false},
        "revision": {"rev_id": rev_id, "content_slots": {"main": {"content_model": "wikitext",
            "content_body": text}}}
    })
    .to_string()
}

/// A stream that asks for an hour's pause, drips a line a byte at a time, sends an event
/// over the size limit, an id no header can carry and lines ending in a lone CR: the
/// source reconnects within `reconnect_max_ms` and after `idle_timeout_secs`, dead-letters
/// the oversize event with its length, applies every good event, never sends a bad id
/// back, and its lag gauge grows while nothing arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_stream_cannot_stall_or_silence_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let first = format!(
        "retry: 3600000\nid: one\ndata: {}\n\n",
        page_change(1, 10, "The first page says hello.")
    );
    let drip: Script = "data: never ends".bytes().map(|b| vec![b]).collect();
    let huge = format!("id: huge\ndata: {}\n\n", "x".repeat(300_000));
    let third = format!(
        "id: bad\u{1}id\ndata: {}\r\rid: three\rdata: {}\r\r",
        page_change(2, 20, "The second page arrived with a lone CR."),
        page_change(3, 30, "The third page too.")
    );
    let (url, connections) = scripted_stream(vec![
        (vec![first.into_bytes()], Duration::ZERO, true),
        (drip, Duration::from_millis(400), false),
        (
            vec![huge.into_bytes(), third.into_bytes()],
            Duration::ZERO,
            false,
        ),
    ])
    .await;
    let config = write_config(
        dir.path(),
        &format!(
            "[events]\nmax_event_bytes = 65536\n[sources.webhook]\njournal_max_bytes = 1048576\n\
             [sources.mediawiki]\nstream_url = \"{url}\"\ndomains = [\"wiki.example\"]\n\
             reconnect_initial_ms = 100\nreconnect_max_ms = 500\nidle_timeout_secs = 2\n\
             [fetch]\napi_url = \"http://wiki.example/w/api.php\"\n"
        ),
    );
    let mut casement = Casement::start(dir.path(), &config, &[]);
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = Client::new(&casement.base);
    eventually(
        Duration::from_secs(30),
        "the three good pages are indexed",
        || async {
            let mut all = true;
            for page in [1, 2, 3] {
                all &= client.get(&format!("/v1/documents/wiki:{page}")).await.0 == 200;
            }
            all
        },
    )
    .await;
    let seen = connections.lock().unwrap().clone();
    assert!(seen.len() >= 3, "{} connections", seen.len());
    // retry: 3600000 was clamped to reconnect_max_ms.
    let pause = seen[1].0 - seen[0].0;
    assert!(
        pause < Duration::from_secs(5),
        "reconnected after {pause:?}"
    );
    // The dripped line never made an event: idle after 2 s, not never.
    let idle = seen[2].0 - seen[1].0;
    assert!(
        idle >= Duration::from_secs(2) && idle < Duration::from_secs(10),
        "{idle:?}"
    );
    assert!(
        seen.iter()
            .all(|(_, id)| id.as_deref().is_none_or(|id| !id.contains('\u{1}'))),
        "{seen:?}"
    );
    // The oversize event is a dead letter with its length, without its bytes.
    let letters =
        std::fs::read_to_string(dir.path().join("data/dead-letters.jsonl")).unwrap_or_default();
    assert!(
        letters
            .lines()
            .any(|l| l.contains("too_large") && l.contains("\"size_bytes\":300016")),
        "{letters}"
    );
    // Nothing arrives now: the lag grows between two scrapes.
    let lag = |metrics: String| -> f64 {
        metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix("casement_mediawiki_stream_lag_seconds ")?
                    .parse()
                    .ok()
            })
            .unwrap()
    };
    let before = lag(client.get("/metrics").await.1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = lag(client.get("/metrics").await.1);
    assert!(after >= before + 1.0, "lag {before} then {after}");
    casement.stop();
}
