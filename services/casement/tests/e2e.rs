//! The all-in-one binary end to end, as a user runs it: `casement run` on a temporary
//! directory replays the 18F sample stream (2,025 real revisions), watches a folder and
//! takes webhook events; answers over HTTP must follow every new revision (and drop the
//! old text), deletes must leave the answers, bad webhook input must get a 4xx with a
//! message and land in the dead-letter file, and a restart must keep the index without
//! embedding anything again. Real models, real Qdrant Edge.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Casement, Client, contains, data, eventually, squash};

/// A prose line of Markdown (no markup that the citation text would change).
fn prose(line: &str) -> bool {
    let line = line.trim();
    line.split_whitespace().count() >= 10
        && !line.starts_with('-')
        && !line.chars().any(|c| "[]*`#|<>_:/{}\\\"".contains(c))
}

/// A document still live at the end of the stream whose first revision has a prose line
/// the final one lacks, and whose final revision has one the first lacks:
/// (doc_id, final revision, old line, new line).
fn changed_document(log: &Path) -> (String, u64, String, String) {
    let mut docs: BTreeMap<String, (Value, Value)> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap().lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        let id = event["doc_id"].as_str().unwrap().to_owned();
        if event["change"] == "delete" {
            docs.remove(&id);
        } else if event["content"].is_string() {
            docs.entry(id)
                .and_modify(|(_, last)| *last = event.clone())
                .or_insert_with(|| (event.clone(), event));
        }
    }
    for (id, (first, last)) in docs {
        let (old, new) = (
            first["content"].as_str().unwrap(),
            last["content"].as_str().unwrap(),
        );
        let only_in = |a: &str, b: &str| {
            a.lines()
                .filter(|l| prose(l))
                .find(|l| !squash(b).contains(&squash(l)))
                .map(str::to_owned)
        };
        if let (Some(gone), Some(added)) = (only_in(old, new), only_in(new, old)) {
            return (id, last["revision"].as_u64().unwrap(), gone, added);
        }
    }
    panic!("no document of the stream changes a prose line");
}

fn native(doc_id: &str, revision: u64, content: &str) -> Value {
    json!({"type": "upsert", "doc_id": doc_id, "revision": revision, "title": "VPN",
           "format": "markdown", "content": content})
}

/// A real event payload from `../shared/data/events`.
fn shared_event(path: &str) -> String {
    std::fs::read_to_string(data(&format!("events/{path}"))).unwrap()
}

/// Posts an event body to the webhook, asserts it was applied, returns its document id.
async fn post_applied(client: &Client, body: Vec<u8>, what: &str) -> String {
    let (status, answer) = client.post_raw("/v1/events", body).await;
    assert_eq!(
        (status, answer["status"].as_str()),
        (200, Some("applied")),
        "{what}: {answer}"
    );
    answer["doc_id"].as_str().unwrap().to_owned()
}

async fn metric(client: &Client, series: &str) -> f64 {
    let (_, text) = client.get("/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_watch_webhook_delete_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(docs.join("office")).unwrap();
    let pantry = docs.join("office/pantry.md");
    std::fs::write(
        &pantry,
        "# Office pantry\n\nThe pantry door code is 4417 this month.\n\nAsk the office manager when it changes.\n",
    )
    .unwrap();
    let parking = docs.join("office/parking.md");
    std::fs::write(
        &parking,
        "# Parking\n\nVisitor parking permits are issued by the front desk on level two.\n",
    )
    .unwrap();
    let config = dir.path().join("casement.toml");
    std::fs::write(
        &config,
        format!(
            r#"data_dir = "{}"
[events]
max_event_bytes = 65536
[events.debezium]
doc_id_prefix = "products/"
title = "name"
content = "description"
format = "text"
[sources.watch]
poll_ms = 200
doc_id_prefix = "kb:"
"#,
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let log = data("revisions/18f-handbook/sample.jsonl");
    let args = [
        "--replay",
        log.to_str().unwrap(),
        "--watch",
        docs.to_str().unwrap(),
    ];
    let mut casement = Casement::start(dir.path(), &config, &args);
    casement.wait_for_line("ready in", Duration::from_secs(1800));
    let client = Client::new(&casement.base);

    // The replay: the final revision answers, the first revision's text is gone.
    let (doc, revision, old, new) = changed_document(&log);
    let windows = client.search(&new, &[&doc]).await;
    assert!(
        contains(&windows, &new),
        "{doc} r{revision}: {new:?} not in {windows:#?}"
    );
    assert_eq!(windows[0]["revision"], revision);
    let windows = client.search(&old, &[&doc]).await;
    assert!(
        !contains(&windows, &old),
        "{doc}: old text {old:?} still answered"
    );

    // The watched folder: indexed, then an edit replaces the answer.
    let pantry_id = "kb:office/pantry";
    eventually(
        Duration::from_secs(60),
        "the watched file is indexed",
        || async {
            contains(
                &client.search("pantry door code", &[pantry_id]).await,
                "4417",
            )
        },
    )
    .await;
    std::fs::write(
        &pantry,
        "# Office pantry\n\nThe pantry door code is 9902 this month.\n\nAsk the office manager when it changes.\n",
    )
    .unwrap();
    eventually(Duration::from_secs(60), "the edit is answered", || async {
        let windows = client.search("pantry door code", &[pantry_id]).await;
        contains(&windows, "9902") && !contains(&windows, "4417")
    })
    .await;

    // The webhook: applied, replaced, stale, other formats, deleted.
    let vpn = "kb:vpn";
    let (status, body) = client
        .event(&native(
            vpn,
            1,
            "The VPN gateway hostname is vpn-gw-7781.example.org for all staff.",
        ))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("applied")),
        "{body}"
    );
    assert!(body["sentences"]["embedded"].as_u64().unwrap() > 0);
    assert!(contains(
        &client.search("VPN gateway hostname", &[vpn]).await,
        "vpn-gw-7781"
    ));
    let (status, body) = client
        .event(&native(
            vpn,
            2,
            "The VPN gateway hostname is vpn-gw-8812.example.org for all staff.",
        ))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("applied")),
        "{body}"
    );
    let windows = client.search("VPN gateway hostname", &[vpn]).await;
    assert!(contains(&windows, "vpn-gw-8812") && !contains(&windows, "vpn-gw-7781"));
    let (status, body) = client.event(&native(vpn, 1, "An old revision.")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("stale")),
        "{body}"
    );
    let debezium = shared_event("debezium/mysql-inventory-products.jsonl");
    let first_row = debezium.lines().next().unwrap().as_bytes().to_vec();
    let product = post_applied(&client, first_row, "Debezium").await;
    assert!(!client.search("scooter", &[&product]).await.is_empty());
    let mut cloudevent: Value =
        serde_json::from_str(&shared_event("cloudevents/examples/json-object-data.json")).unwrap();
    cloudevent["data"] = json!({"type": "upsert", "doc_id": "kb:remote", "revision": 7,
        "format": "markdown", "content": "# Pairing\n\nPress both buttons to pair the remote."});
    post_applied(
        &client,
        serde_json::to_vec(&cloudevent).unwrap(),
        "CloudEvents",
    )
    .await;
    assert!(contains(
        &client.search("pair the remote", &["kb:remote"]).await,
        "Press both buttons"
    ));
    let page_change = shared_event("wikimedia/examples/mediawiki-page-change-1.2.0.example1.json");
    let mut with_content: Value = serde_json::from_str(&page_change).unwrap();
    with_content["revision"]["content_slots"]["main"]["content_body"] =
        json!("'''Example''' is a page.\n\n== History ==\nIt was edited twice.");
    let wiki = post_applied(
        &client,
        serde_json::to_vec(&with_content).unwrap(),
        "MediaWiki",
    )
    .await;
    assert!(contains(
        &client.search("edited twice", &[&wiki]).await,
        "edited twice"
    ));
    let (status, body) = client
        .event(&json!({"type": "delete", "doc_id": vpn, "revision": 3}))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("deleted")),
        "{body}"
    );
    assert!(
        client
            .search("VPN gateway hostname", &[vpn])
            .await
            .is_empty()
    );
    let (status, _) = client
        .event(&native(vpn, 2, "Back from before the delete."))
        .await;
    assert_eq!(status, 200);
    assert!(
        client
            .search("VPN gateway hostname", &[vpn])
            .await
            .is_empty(),
        "an older upsert after a delete changes nothing"
    );

    // Bad webhook input: a 4xx with a message, and a line in the dead-letter file.
    let bad: [(Vec<u8>, u16, &str); 4] = [
        (b"{\"type\": \"upsert\", ".to_vec(), 400, "not_json"),
        (br#"{"hello": "world"}"#.to_vec(), 422, "schema"),
        (vec![b' '; 70_000], 413, "too_large"),
        (page_change.into_bytes(), 422, "no_content"),
    ];
    for (body, expected, reason) in bad {
        let (status, answer) = client.post_raw("/v1/events", body).await;
        assert_eq!(status, expected, "{answer}");
        assert_eq!(answer["status"], "rejected");
        assert_eq!(answer["error"]["code"], reason, "{answer}");
        assert!(!answer["error"]["message"].as_str().unwrap().is_empty());
    }
    let letters = std::fs::read_to_string(dir.path().join("data/dead-letters.jsonl")).unwrap();
    let reasons: Vec<String> = letters
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["reason"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(reasons, ["not_json", "schema", "too_large", "no_content"]);
    assert_eq!(
        metric(&client, "casement_webhook_requests_total{status=\"413\"}").await,
        1.0
    );

    // The served OpenAPI document describes the webhook beside the search API, with every
    // status it answered above.
    let (_, text) = client.get("/openapi.json").await;
    let openapi: Value = serde_json::from_str(&text).unwrap();
    assert!(openapi["paths"]["/v1/search"]["post"].is_object());
    let responses = &openapi["paths"]["/v1/events"]["post"]["responses"];
    for status in ["200", "400", "413", "422"] {
        assert!(
            responses[status].is_object(),
            "/v1/events {status} undocumented"
        );
    }
    assert!(openapi["components"]["schemas"]["EventAnswer"].is_object());

    // One /metrics for every part, exactly the names docs/metrics.md lists for it.
    // Label values too: each enumerated label serves exactly the documented values.
    let (_, text) = client.get("/metrics").await;
    casement_testkit::metrics_doc::assert_served_as_documented(
        &text,
        &[""],
        &["casement_indexer_consumer_lag_messages"],
    );

    // A deleted file leaves the answers.
    std::fs::remove_file(&parking).unwrap();
    eventually(
        Duration::from_secs(60),
        "the deleted file leaves the answers",
        || async {
            client
                .search("visitor parking permits", &["kb:office/parking"])
                .await
                .is_empty()
        },
    )
    .await;

    // Restart: the index, the replay position and the watch state are kept; nothing is
    // embedded again.
    casement.stop();
    let mut casement = Casement::start(dir.path(), &config, &args);
    casement.wait_for_line("ready in", Duration::from_secs(600));
    let client = Client::new(&casement.base);
    let windows = client.search("pantry door code", &[pantry_id]).await;
    assert!(contains(&windows, "9902") && !contains(&windows, "4417"));
    assert!(contains(&client.search(&new, &[&doc]).await, &new));
    assert!(
        client
            .search("VPN gateway hostname", &[vpn])
            .await
            .is_empty()
    );
    tokio::time::sleep(Duration::from_secs(2)).await; // Let the watcher's resend finish.
    assert!(
        client
            .search("visitor parking permits", &["kb:office/parking"])
            .await
            .is_empty()
    );
    let embedded = metric(
        &client,
        "casement_indexer_sentences_total{decision=\"embedded\"}",
    )
    .await;
    assert_eq!(embedded, 0.0, "a restart embeds nothing again");
    assert_eq!(
        metric(&client, "casement_source_events_total{source=\"replay\"}").await,
        0.0
    );
    casement.stop();
}

/// `make run`'s path: no source configured runs the bundled sample, prints the sample
/// question's answer with its citation, starts quietly (the checked-out pages are not
/// "saved" files), and follows an edit of a checked-out page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_sample_answers_and_follows_an_edit() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = dir.path().join("casement.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\n[sources.watch]\npoll_ms = 200\n",
            data_dir.display()
        ),
    )
    .unwrap();
    let mut casement = Casement::start(dir.path(), &config, &[]);
    let answer = casement.wait_for_line("A: ", Duration::from_secs(600));
    assert!(answer.contains("Wait up to 5 business days"), "{answer}");
    let citation = casement.wait_for_line("— ", Duration::from_secs(10));
    assert!(
        citation.contains("Changing your name › Changing your name across GSA"),
        "{citation}"
    );
    let client = Client::new(&casement.base);
    let doc = "18f-handbook:_pages/how-we-work/changing-your-name";
    let page = data_dir.join("docs/_pages/how-we-work/changing-your-name.md");
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("Wait up to 5 business days"));
    std::fs::write(
        &page,
        text.replace("Wait up to 5 business days", "Wait up to 10 business days"),
    )
    .unwrap();
    eventually(Duration::from_secs(60), "the edit is answered", || async {
        let windows = client
            .search("How long does a name change take?", &[doc])
            .await;
        contains(&windows, "Wait up to 10 business days")
            && !contains(&windows, "Wait up to 5 business days")
    })
    .await;
    let log = casement.stderr_text();
    assert_eq!(
        log.matches("file saved").count(),
        1,
        "only the edit is a saved file:\n{log}"
    );
    casement.stop();
}
