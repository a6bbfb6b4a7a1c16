//! The webhook end to end: every event format applied, replaced, stale and deleted; bad
//! input answered with a 4xx and a message and kept in the dead-letter file; the served
//! OpenAPI document describes every answer.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{Client, contains, data};

/// The document the native events write, replace and delete.
pub const VPN: &str = "kb:vpn";

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

/// Native, Debezium, CloudEvents and MediaWiki events: applied, replaced, stale, deleted.
pub async fn applies_every_format(client: &Client) {
    let vpn = VPN;
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
    let product = post_applied(client, first_row, "Debezium").await;
    assert!(!client.search("scooter", &[&product]).await.is_empty());
    let mut cloudevent: Value =
        serde_json::from_str(&shared_event("cloudevents/examples/json-object-data.json")).unwrap();
    cloudevent["data"] = json!({"type": "upsert", "doc_id": "kb:remote", "revision": 7,
        "format": "markdown", "content": "# Pairing\n\nPress both buttons to pair the remote."});
    post_applied(
        client,
        serde_json::to_vec(&cloudevent).unwrap(),
        "CloudEvents",
    )
    .await;
    assert!(contains(
        &client.search("pair the remote", &["kb:remote"]).await,
        "Press both buttons"
    ));
    let mut with_content: Value = serde_json::from_str(&shared_event(
        "wikimedia/examples/mediawiki-page-change-1.2.0.example1.json",
    ))
    .unwrap();
    // The published example is a redirect page (which deletes): as an article.
    with_content["page"]["is_redirect"] = json!(false);
    with_content["revision"]["content_slots"]["main"]["content_body"] =
        json!("'''Example''' is a page.\n\n== History ==\nIt was edited twice.");
    let wiki = post_applied(
        client,
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
}

/// Bad input: a 4xx with a message, and a line in the dead-letter file of `data_dir`.
pub async fn rejects_bad_input(client: &Client, data_dir: &Path) {
    // A real page_change without its content (as an article: the published example is a
    // redirect page), of a page not indexed yet: the wiki's API would have to be asked,
    // and no fetch.api_url is set.
    let mut page_change: Value = serde_json::from_str(&shared_event(
        "wikimedia/examples/mediawiki-page-change-1.2.0.example1.json",
    ))
    .unwrap();
    page_change["page"]["is_redirect"] = json!(false);
    page_change["page"]["page_id"] = json!(2);
    let page_change = page_change.to_string();
    let wrong_type = br#"{"type": "upsert", "doc_id": "kb:x", "revision": "three", "format": "markdown", "content": "x"}"#;
    let bad: [(Vec<u8>, u16, &str); 5] = [
        (b"{\"type\": \"upsert\", ".to_vec(), 400, "not_json"),
        (br#"{"hello": "world"}"#.to_vec(), 422, "schema"),
        (vec![b' '; 70_000], 413, "too_large"),
        (page_change.into_bytes(), 422, "no_content"),
        (wrong_type.to_vec(), 422, "schema"),
    ];
    let data_dir_text = data_dir.display().to_string();
    for (body, expected, reason) in bad {
        let (status, answer) = client.post_raw("/v1/events", body).await;
        assert_eq!(status, expected, "{answer}");
        assert_eq!(answer["status"], "rejected");
        assert_eq!(answer["error"]["code"], reason, "{answer}");
        assert_eq!(answer["dead_lettered"], true, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(!message.is_empty());
        // In JSON's words, without the server's paths or Rust's type names.
        let text = answer.to_string();
        assert!(!text.contains(&data_dir_text), "{answer}");
        for rust in ["u64", "usize", "struct ", "NativeEvent"] {
            assert!(!message.contains(rust), "{rust} in {answer}");
        }
    }
    let (_, answer) = client.post_raw("/v1/events", wrong_type.to_vec()).await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("revision") && message.contains("expected a non-negative integer"),
        "{answer}"
    );
    let letters = std::fs::read_to_string(data_dir.join("dead-letters.jsonl")).unwrap();
    let reasons: Vec<String> = letters
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["reason"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "not_json",
            "schema",
            "too_large",
            "no_content",
            "schema",
            "schema"
        ]
    );
    assert_eq!(
        client
            .metric("casement_webhook_requests_total{status=\"413\"}")
            .await,
        1.0
    );
}

/// The served OpenAPI document describes the webhook beside the search API, with every
/// status it answered above.
pub async fn is_in_the_openapi_document(client: &Client) {
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
}
