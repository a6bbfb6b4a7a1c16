//! Real-time wiki sync (issue 20) through the real binary: `casement run` follows a
//! stand-in EventStreams endpoint of `page_change` events without content and fetches
//! each revision from a stand-in Action API (`casement_testkit::wiki`), both on loopback
//! and fed with the 18F Handbook's real page histories numbered as a wiki's revisions.
//! Through edits, a disconnect mid-stream with events sent again after the resume, a
//! restart, a move, a delete, a throttled period and a revision deleted before it was
//! fetched, the index ends equal to a rebuild of the pages' current revisions.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use casement_inference::Embed;
use casement_store::Store;
use casement_testkit::wiki::{StreamStandIn, WikiRevision, WikiStandIn, page_change, wiki_history};
use casement_testkit::{open_store, read_log};
use casement_text::{Format, Revision, TextConfig, plan_upsert};
use serde_json::Value;

use crate::support::{Casement, Client, eventually, write_config};

const WIKI: &str = "handbookwiki";
const DOMAIN: &str = "handbook.wiki.example";

fn doc_id(page_id: u64) -> String {
    format!("{WIKI}:{page_id}")
}

/// Every page's current state on the wiki: its last revision (or none: deleted) and
/// title.
#[derive(Default)]
struct Pages(BTreeMap<u64, Option<WikiRevision>>);

impl Pages {
    fn record(&mut self, revision: &WikiRevision) {
        let current = (revision.kind != "delete").then(|| revision.clone());
        self.0.insert(revision.page_id, current);
    }
}

/// Stops nothing: opens the index of a stopped service and compares every page with a
/// fresh plan of its current revision (ids, payloads, windows, title, url and revision url).
async fn assert_equals_rebuild(data: &Path, pages: &Pages) {
    let store = open_store(data, casement_testkit::model().dimension());
    for (page_id, current) in &pages.0 {
        let mut stored = store.records(doc_id(*page_id).as_str()).await.unwrap();
        stored.sort_by_key(|r| r.id);
        let Some(revision) = current else {
            assert!(stored.is_empty(), "page {page_id} deleted");
            continue;
        };
        let rebuilt = Revision {
            access: None,
            metadata: Default::default(),
            doc_id: doc_id(*page_id),
            revision: revision.rev_id,
            title: Some(revision.title.clone()),
            url: Some(format!(
                "https://wiki.example/wiki/{}",
                revision.title.replace(' ', "_")
            )),
            tenant: None,
            format: Format::Wikitext,
            content: revision.content.clone(),
            revision_url: Some(format!(
                "https://wiki.example/w/index.php?oldid={}",
                revision.rev_id
            )),
        };
        let (plan, _) = plan_upsert(&[], &rebuilt, &TextConfig::default()).unwrap();
        let mut expected = plan.embed;
        expected.sort_by_key(|r| r.id);
        assert_eq!(stored, expected, "page {page_id}");
    }
}

/// Waits until the service holds every page at its current revision (or deleted).
async fn wait_indexed(client: &Client, pages: &Pages, what: &str) {
    eventually(Duration::from_secs(300), what, || async {
        for (page_id, current) in &pages.0 {
            let (status, body) = client
                .get(&format!("/v1/documents/{}", doc_id(*page_id)))
                .await;
            let answer: Value = serde_json::from_str(&body).unwrap_or_default();
            let ok = match current {
                Some(revision) => {
                    status == 200
                        && answer["revision"] == revision.rev_id
                        && answer["deleted"] == false
                }
                None => status == 404 || answer["deleted"] == true,
            };
            if !ok {
                return false;
            }
        }
        true
    })
    .await;
}

fn config(dir: &Path, wiki: &WikiStandIn, stream: &StreamStandIn) -> std::path::PathBuf {
    write_config(
        dir,
        &format!(
            r#"[sources.mediawiki]
stream_url = "{}"
domains = ["{DOMAIN}"]
reconnect_initial_ms = 200
idle_timeout_secs = 10
[fetch]
api_url = "{}"
user_agent = "CasementE2E/1.0 (https://casement.example; ops@casement.example)"
requests_per_second = 100
"#,
            stream.url, wiki.api_url
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_wiki_through_edits_moves_deletes_throttling_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let wiki = WikiStandIn::start().await;
    let stream = StreamStandIn::start().await;
    let config = config(dir.path(), &wiki, &stream);
    let history: Vec<WikiRevision> = wiki_history(&read_log(&casement_testkit::data(
        "revisions/18f-handbook/sample.jsonl",
    )))
    .into_iter()
    .take(150)
    .collect();
    let mut pages = Pages::default();
    // Announces a revision on the stream, as EventBus would (no content).
    let announce = |kind: &str, revision: &WikiRevision| {
        stream.push(&page_change(
            WIKI,
            DOMAIN,
            kind,
            revision,
            "2026-11-25T06:00:00Z",
        ));
    };

    // 0. A wiki that lets only logged-in users read, and no [fetch.auth]: the start stops
    // with the reason, not a stream of failed fetches later.
    wiki.require_token("a-token-casement-was-not-given");
    let refused = tokio::task::spawn_blocking({
        let config = config.clone();
        move || {
            std::process::Command::new(crate::support::casement_bin())
                .arg("--config")
                .arg(&config)
                .arg("run")
                .arg("--listen")
                .arg(format!("127.0.0.1:{}", crate::support::free_port()))
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("fetch.api_url")
            && stderr.contains("the wiki lets only logged-in users read (readapidenied)"),
        "{stderr}"
    );
    wiki.allow_anyone();

    // 1. Edits, published on the wiki and announced without content; the stream is cut
    // after 60 of them and sends 5 again after the resume. An event of another wiki on the
    // same stream is left out.
    let mut run = Casement::start(dir.path(), &config, &[]);
    run.wait_for_line("following the MediaWiki stream", Duration::from_secs(300));
    let client = Client::new(&run.base);
    stream.disconnect_after(60);
    stream.duplicate_on_resume(5);
    let mut other_wiki = page_change(
        "otherwiki",
        "other.wiki.example",
        "create",
        &history[0],
        "2026-11-25T06:00:00Z",
    );
    other_wiki["page"]["page_id"] = Value::from(999_999);
    stream.push(&other_wiki);
    for revision in &history {
        if revision.kind == "delete" {
            wiki.delete_page(revision.page_id);
        } else {
            wiki.publish(revision);
        }
        announce(revision.kind, revision);
        pages.record(revision);
    }
    wait_indexed(&client, &pages, "the first 150 revisions indexed").await;
    let connections = stream.connections();
    assert!(
        connections.len() >= 2,
        "reconnected after the cut: {connections:?}"
    );
    assert!(
        connections[1].is_some(),
        "resumed with Last-Event-ID: {connections:?}"
    );
    assert_eq!(
        client
            .metric("casement_mediawiki_filtered_events_total")
            .await,
        1.0,
        "the other wiki's event"
    );
    assert!(
        client
            .metric("casement_mediawiki_stream_reconnects_total")
            .await
            >= 1.0
    );
    let stale = client
        .metric("casement_indexer_events_total{outcome=\"stale\"}")
        .await;
    assert!(
        stale >= 5.0,
        "the events sent again finished stale: {stale}"
    );
    run.stop();
    assert_equals_rebuild(&data, &pages).await;
    let fetches = wiki.requests().len();

    // 2. A restart resumes where the index is: nothing fetched or embedded again (the
    // resume sends 5 events again; they are stale before any fetch).
    let mut run = Casement::start(dir.path(), &config, &[]);
    run.wait_for_line("following the MediaWiki stream", Duration::from_secs(300));
    let client = Client::new(&run.base);
    eventually(
        Duration::from_secs(60),
        "the resume's events finished",
        || async {
            client
                .metric("casement_indexer_events_total{outcome=\"stale\"}")
                .await
                >= 5.0
        },
    )
    .await;
    assert_eq!(
        wiki.requests().len(),
        fetches,
        "fetched again after a restart"
    );
    assert_eq!(
        client
            .metric("casement_indexer_sentences_total{decision=\"embedded\"}")
            .await,
        0.0
    );

    // 3. A move, a delete, a throttled edit and a revision deleted before it was fetched.
    let live: Vec<WikiRevision> = pages.0.values().flatten().cloned().collect();
    let (first, second, third) = (&live[0], &live[1], &live[2]);
    let moved = WikiRevision {
        rev_id: 900_001,
        title: format!("{} (archived)", first.title),
        ..first.clone()
    };
    wiki.publish(&moved);
    wiki.move_page(moved.page_id, &moved.title);
    announce("move", &moved);
    pages.record(&moved);
    let deleted = WikiRevision {
        kind: "delete",
        ..second.clone()
    };
    wiki.delete_page(deleted.page_id);
    announce("delete", &deleted);
    pages.record(&deleted);
    let throttled = WikiRevision {
        rev_id: 900_002,
        content: format!(
            "{}\n\nAdded while the wiki throttled its API.",
            third.content
        ),
        kind: "edit",
        ..third.clone()
    };
    wiki.throttle(2);
    wiki.publish(&throttled);
    announce("edit", &throttled);
    pages.record(&throttled);
    let hidden = WikiRevision {
        rev_id: 900_003,
        content: "Text removed by revision deletion.".into(),
        ..throttled.clone()
    };
    wiki.publish(&hidden);
    wiki.hide(hidden.rev_id);
    announce("edit", &hidden);
    wait_indexed(
        &client,
        &pages,
        "the move, the delete and the throttled edit",
    )
    .await;
    eventually(
        Duration::from_secs(60),
        "the hidden revision dead-lettered",
        || async {
            client
                .metric("casement_indexer_dead_letters_total{reason=\"gone\"}")
                .await
                == 1.0
        },
    )
    .await;
    assert!(
        client
            .metric("casement_indexer_fetch_requests_total{outcome=\"throttled\"}")
            .await
            >= 2.0
    );
    run.stop();
    let letters = std::fs::read_to_string(data.join("dead-letters.jsonl")).unwrap();
    let letter: Value = serde_json::from_str(letters.lines().last().unwrap()).unwrap();
    assert_eq!(letter["reason"], "gone", "{letter}");
    assert!(
        letter["detail"].as_str().unwrap_or("").contains("hidden"),
        "{letter}"
    );
    assert_equals_rebuild(&data, &pages).await;
    assert_eq!(
        wiki.user_agents().into_iter().collect::<Vec<_>>(),
        vec!["CasementE2E/1.0 (https://casement.example; ops@casement.example)".to_owned()]
    );
}
