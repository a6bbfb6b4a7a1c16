//! The all-in-one binary end to end, as a user runs it: `casement run` on a temporary
//! directory replays the 18F sample stream (2,025 real revisions), watches a folder and
//! takes webhook events; answers over HTTP must follow every new revision (and drop the
//! old text), deletes must leave the answers, bad webhook input must get a 4xx with a
//! message and land in the dead-letter file, and a restart must keep the index without
//! embedding anything again. Real models, real Qdrant Edge.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod access;
mod bad_disks;
mod deletes;
mod durable;
mod hardening;
mod mediawiki;
mod mediawiki_poll;
mod prometheus;
mod ready;
mod replay;
mod sample;
use crate::support;
mod tenants;
mod watch_hostile;
mod webhook;

use std::time::Duration;

use replay::changed_document;
use support::{Casement, Client, contains, data, eventually, write_config};

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
    let config = write_config(
        dir.path(),
        r#"[events]
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
    );
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

    webhook::applies_every_format(&client).await;
    webhook::rejects_bad_input(&client, &dir.path().join("data")).await;
    webhook::is_in_the_openapi_document(&client).await;

    // One /metrics for every part, exactly the names docs/metrics.md lists for it.
    // Label values too: each enumerated label serves exactly the documented values. No
    // golden set is configured here, so no casement_eval_* (tests/e2e/sample.rs has them);
    // casement_audit_* are the audit job's (tests/it/audit.rs).
    let (_, text) = client.get("/metrics").await;
    let not_served =
        casement_testkit::metrics_doc::documented_names(&["casement_eval_", "casement_audit_"]);
    let mut except: Vec<&str> = not_served.iter().map(String::as_str).collect();
    except.push("casement_indexer_consumer_lag_messages");
    casement_testkit::metrics_doc::assert_served_as_documented(&text, &[""], &except);
    // Freshness apart by origin: the replay is a bulk load, the watched files and the
    // webhook's events are live edits.
    let count = |origin: &str| -> f64 {
        let series = format!("casement_indexer_freshness_seconds_count{{origin=\"{origin}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{series} in\n{text}"))
    };
    assert!(count("bulk") >= 10.0, "replayed events: {}", count("bulk"));
    assert!(count("live") >= 3.0, "live edits: {}", count("live"));

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
            .search("VPN gateway hostname", &[webhook::VPN])
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
    let embedded = client
        .metric("casement_indexer_sentences_total{decision=\"embedded\"}")
        .await;
    assert_eq!(embedded, 0.0, "a restart embeds nothing again");
    assert_eq!(
        client
            .metric("casement_source_events_total{source=\"replay\"}")
            .await,
        0.0
    );
    casement.stop();
}
