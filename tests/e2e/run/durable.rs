//! A 202 is a promise (issue 22): events the webhook accepted while the pipeline was busy
//! are applied after a kill (SIGKILL, nothing flushed on the way out) and a restart; when
//! the journal of accepted events is full, the answer is 503 with `Retry-After` instead.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Casement, Client, eventually, write_config};

fn native(doc_id: &str, content: String) -> Value {
    json!({"type": "upsert", "doc_id": doc_id, "revision": 1, "title": doc_id,
           "format": "markdown", "content": content})
}

/// `n` distinct sentences: a document that keeps the model busy for a while.
fn long_text(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "Clause {i} of the supplier terms covers delivery window {}. ",
                i * 13
            )
        })
        .collect()
}

fn journaled(data: &std::path::Path) -> usize {
    std::fs::read_dir(data.join("accepted"))
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "event"))
            })
            .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_events_survive_a_kill_and_a_full_journal_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // One lane: the small events queue behind the long one. A 1 ms wait: every answer is 202.
    let config = write_config(
        dir.path(),
        r#"[events]
max_event_bytes = 131072
[pipeline]
lanes = 1
[sources.webhook]
wait_ms = 1
journal_max_bytes = 131072
"#,
    );
    let mut casement = Casement::start(dir.path(), &config, &[]);
    casement.wait_for_line("ready in", Duration::from_secs(600));
    let client = Client::new(&casement.base);

    let (status, answer) = client
        .event(&native("terms-supplier", long_text(600)))
        .await;
    assert_eq!(
        (status, answer["status"].as_str()),
        (202, Some("accepted")),
        "{answer}"
    );
    let small: Vec<String> = (0..5).map(|i| format!("notes-{i}")).collect();
    for (i, doc_id) in small.iter().enumerate() {
        let content = format!("# Note {i}\n\nThe courier code for desk {i} is QZ-{i}{i}{i}.\n");
        let (status, answer) = client.event(&native(doc_id, content)).await;
        assert_eq!(
            (status, answer["status"].as_str()),
            (202, Some("accepted")),
            "{answer}"
        );
        assert!(
            answer["message"].as_str().unwrap().contains("journal"),
            "{answer}"
        );
    }
    // Full: this one would take the journal past its 131,072 bytes.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/events", casement.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&native("terms-other", long_text(1_600))).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("5")
    );
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("journal"),
        "{answer}"
    );

    // Still behind the long document: not applied yet, but on disk.
    let (status, _) = client.get(&format!("/v1/documents/{}", small[4])).await;
    assert_eq!(status, 404, "the last note is not applied before the kill");
    let kept = journaled(&data);
    assert!(kept >= 5, "{kept} events in the journal");
    drop(casement); // SIGKILL

    let mut casement = Casement::start(dir.path(), &config, &[]);
    casement.wait_for_line("API listening", Duration::from_secs(600));
    let client = Client::new(&casement.base);
    eventually(
        Duration::from_secs(300),
        "every accepted event is applied after the restart",
        || async {
            let mut all = true;
            for doc_id in small.iter().map(String::as_str).chain(["terms-supplier"]) {
                all &= client.get(&format!("/v1/documents/{doc_id}")).await.0 == 200;
            }
            all
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the journal is emptied",
        || async { journaled(&data) == 0 },
    )
    .await;
    casement.stop();
}
