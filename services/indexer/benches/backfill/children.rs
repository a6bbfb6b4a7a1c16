//! The release binaries as child processes: `casement backfill` over a log or a folder, and
//! `casement-indexer run` catching up a topic; their wall time, peak RSS and counts.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use casement_indexer::replay;

use crate::support::{self, Broker};

const PARTITIONS: i32 = 8;

/// What a child process did.
pub struct Child {
    pub seconds: f64,
    pub peak_rss_bytes: u64,
    pub sentences: u64,
    pub documents: u64,
    pub points: u64,
}

/// `casement backfill PATH` into `dir/data`.
pub fn backfill(bin: &Path, dir: &Path, input: &Path) -> Child {
    let stdout = dir.join("stdout.txt");
    let stderr = dir.join("stderr.txt");
    let started = Instant::now();
    let child = Command::new(bin.join("casement"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("backfill")
        .arg(input)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("starting casement backfill");
    let mut child = child;
    let status = child.wait().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let out = std::fs::read_to_string(&stdout).unwrap();
    assert!(
        status.success(),
        "casement backfill failed ({status}):\n{out}\n{}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    print!("{out}");
    // "index: D documents, P sentences; E sentences embedded (...)"
    let index = out
        .lines()
        .find_map(|l| l.strip_prefix("index: "))
        .expect("the backfill summary");
    let numbers: Vec<u64> = index
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    // "peak memory: N bytes", read by the process from /proc/self/status at its end.
    let peak_rss_bytes = out
        .lines()
        .find_map(|l| l.strip_prefix("peak memory: "))
        .and_then(|l| l.split(' ').next()?.parse().ok())
        .expect("the backfill's peak memory line");
    Child {
        seconds,
        peak_rss_bytes,
        documents: numbers[0],
        points: numbers[1],
        sentences: numbers[2],
    }
}

/// The peak resident set of a running process (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The revision log `log` (`events` events) into the mock cluster, then `casement-indexer run` from the start
/// until every event is finished (its `/metrics`), then SIGTERM.
pub async fn kafka_catch_up(bin: &Path, dir: &Path, log: &Path, events: usize) -> Child {
    let topic = support::unique("changes");
    let broker = Broker::start(&[(&topic, PARTITIONS), (&format!("{topic}.dlq"), 1)]);
    let mut config = support::config(&broker.bootstrap, &topic, "backfill", &dir.join("data"));
    replay::run(&config.kafka, log, None, true)
        .await
        .expect("producing the history");
    support::assert_log_complete(&broker.bootstrap, &topic, PARTITIONS);
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    config.admin.listen = admin.local_addr().unwrap();
    drop(admin);
    config.store.edge.path = dir.join("data/index");
    let config_path = dir.join("indexer.toml");
    std::fs::write(&config_path, toml::to_string(&config).unwrap()).unwrap();
    let stderr = dir.join("stderr.txt");
    let started = Instant::now();
    let child = Command::new(bin.join("casement-indexer"))
        .arg("--config")
        .arg(&config_path)
        .arg("run")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("starting casement-indexer");
    let pid = child.id();
    let metrics_url = format!("http://{}/metrics", config.admin.listen);
    let http = reqwest::Client::new();
    let (finished_at, sentences, documents, points) = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the catch-up did not finish within an hour"
        );
        let Ok(response) = http.get(&metrics_url).send().await else {
            continue;
        };
        let Ok(text) = response.text().await else {
            continue;
        };
        let finished: f64 = series(&text, "casement_indexer_events_total{").iter().sum();
        if finished as usize >= events {
            let embedded = series(
                &text,
                "casement_indexer_sentences_total{decision=\"embedded\"}",
            );
            let documents = series(&text, "casement_index_documents ");
            let points = series(&text, "casement_index_points ");
            break (
                started.elapsed(),
                embedded.first().copied().unwrap_or(0.0) as u64,
                documents.first().copied().unwrap_or(0.0) as u64,
                points.first().copied().unwrap_or(0.0) as u64,
            );
        }
    };
    // The high-water mark of the whole catch-up, read before the process is stopped.
    let peak_rss_bytes = peak_rss(pid).expect("the indexer's /proc status");
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut child = child;
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(
        status.success(),
        "casement-indexer exited with {status}:\n{}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    Child {
        seconds: finished_at.as_secs_f64(),
        peak_rss_bytes,
        sentences,
        documents,
        points,
    }
}

/// Values of the exposition lines starting with `prefix`.
fn series(text: &str, prefix: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

pub fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
