//! The indexer binary's admin port, against the mock cluster (or `KAFKA_BOOTSTRAP`):
//! `/healthz`, `/readyz` (models loaded, store reachable, partitions assigned) and
//! `/metrics`, which serves exactly the series listed in `docs/metrics.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use casement_testkit::metrics_doc;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use support::{Broker, config, unique};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The indexer's part of `docs/metrics.md`, and what every service serves.
const PREFIXES: [&str; 4] = [
    "casement_indexer_",
    "casement_index_",
    "casement_build_",
    "process_",
];

async fn get(url: &str) -> (u16, String) {
    match reqwest::get(url).await {
        Ok(response) => (
            response.status().as_u16(),
            response.text().await.unwrap_or_default(),
        ),
        Err(_) => (0, String::new()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_port_serves_health_readiness_and_every_documented_metric() {
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, 2), (&format!("{topic}.dlq"), 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let mut config = config(&broker.bootstrap, &topic, &group, dir.path());
    let port = free_port();
    config.admin.listen = format!("127.0.0.1:{port}").parse().unwrap();
    let config_file = dir.path().join("indexer.toml");
    std::fs::write(&config_file, toml::to_string(&config).unwrap()).unwrap();

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .create()
        .unwrap();
    for (key, value) in [
        (
            "kb/a",
            r##"{"type":"upsert","doc_id":"kb/a","revision":1,"format":"markdown","content":"# A\n\nHold the button. The light blinks."}"##,
        ),
        (
            "kb/a",
            r##"{"type":"upsert","doc_id":"kb/a","revision":2,"format":"markdown","content":"# A\n\nHold the button longer. The light blinks."}"##,
        ),
        ("kb/b", "{broken"),
    ] {
        producer
            .send(
                FutureRecord::to(&topic).key(key).payload(value),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }

    let log = std::fs::File::create(dir.path().join("indexer.log")).unwrap();
    let mut child = support::KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_casement-indexer"))
            .args(["--config", config_file.to_str().unwrap(), "run"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let mut saw_not_ready = false;
    loop {
        assert!(child.0.try_wait().unwrap().is_none(), "indexer exited");
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "not ready after 120 s"
        );
        let (health, _) = get(&format!("{base}/healthz")).await;
        let (ready, body) = get(&format!("{base}/readyz")).await;
        if health == 200 && ready == 503 {
            assert!(body.contains(": no"), "503 says which check fails: {body}");
            saw_not_ready = true;
        }
        if ready == 200 {
            assert!(body.contains("partitions_assigned: ok"), "{body}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        2,
        Duration::from_secs(120),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(5500)).await; // Statistics (lag) and the store probe.

    let (status, metrics) = get(&format!("{base}/metrics")).await;
    assert_eq!(status, 200);
    let served = metrics_doc::served_names(&metrics, &PREFIXES);
    let documented = metrics_doc::documented_names(&PREFIXES);
    assert_eq!(documented.len(), 38, "{documented:?}");
    assert_eq!(served, documented, "served vs docs/metrics.md");
    // Label values as well as names: every enumerated label serves exactly the values the
    // docs list (a value the code never records is not pre-registered, and vice versa).
    let labels = metrics_doc::documented_labels(&PREFIXES);
    assert_eq!(labels.len(), 10, "{labels:?}");
    assert_eq!(
        metrics_doc::served_labels(&metrics, &labels),
        labels,
        "served label values vs docs/metrics.md"
    );
    for series in [
        "casement_indexer_events_total{outcome=\"applied\"} 2",
        "casement_indexer_events_total{outcome=\"dead_lettered\"} 1",
        "casement_indexer_dead_letters_total{reason=\"not_json\"} 1",
        "casement_indexer_partitions_assigned 2",
        "casement_index_documents 1",
        "casement_indexer_consumer_lag_messages{partition=",
        // Produced without the `casement.bulk` header: live edits.
        "casement_indexer_freshness_seconds_count{origin=\"live\"} 2",
        "casement_indexer_freshness_seconds_count{origin=\"bulk\"} 0",
        "casement_indexer_oldest_unapplied_age_seconds 0",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last()?.parse().ok())
            .unwrap_or_else(|| panic!("{name} in\n{metrics}"))
    };
    assert!(value("casement_index_disk_bytes{part=\"segments\"}") > 0.0);
    assert!(value("casement_index_disk_bytes{part=\"wal\"}") > 0.0);
    assert!(value("process_resident_memory_bytes") > 0.0);
    assert!(value("casement_indexer_last_applied_age_seconds") < 60.0);
    let info = metrics
        .lines()
        .find(|l| l.starts_with("casement_build_info{"))
        .expect("casement_build_info");
    for label in [
        "store_backend=\"edge\"",
        concat!("version=\"", env!("CARGO_PKG_VERSION"), "\""),
        "model=\"all-minilm-l6-v2:fp32\"",
    ] {
        assert!(info.contains(label), "{label} in {info}");
    }
    assert!(info.ends_with(" 1"), "{info}");
    println!("not ready seen before ready: {saw_not_ready}");
    Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(child.0.wait().unwrap().success());
}
