//! The indexer binary, run as a child process against the mock cluster (or
//! `KAFKA_BOOTSTRAP`), is killed with SIGKILL at random moments while it indexes the 18F
//! sample stream, and restarted each time; a last run finishes the stream and stops on
//! SIGTERM. The index then equals a rebuild of each document's final revision: nothing
//! lost, nothing doubled. Needs `make models` and `../shared/data`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use casement_indexer::replay;
use casement_store::Store;
use support::{Broker, config, corpus, read_log, unique};

const KILLS: usize = 5;
const PARTITIONS: i32 = 3;

fn spawn(config_file: &Path, log: &Path) -> support::KillOnDrop {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    support::KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_casement-indexer"))
            .args(["--config", config_file.to_str().unwrap(), "run"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("indexer binary"),
    )
}

fn committed_total(bootstrap: &str, group: &str, topic: &str) -> i64 {
    support::committed(bootstrap, group, topic, PARTITIONS)
        .iter()
        .map(|&o| o.max(0))
        .sum()
}

/// xorshift64*: random kill moments, reproducible from the printed seed.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_loses_nothing_and_doubles_nothing() {
    let topic = unique("changes");
    let broker = Broker::start(&[(&topic, PARTITIONS), (&format!("{topic}.dlq"), 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let config = config(&broker.bootstrap, &topic, &group, dir.path());
    let config_file = dir.path().join("indexer.toml");
    std::fs::write(&config_file, toml::to_string(&config).unwrap()).unwrap();
    let log = dir.path().join("indexer.log");
    let sample = corpus("sample.jsonl");
    let total = replay::run(&config.kafka, &sample, None, false)
        .await
        .unwrap()
        .published as i64;
    support::assert_log_complete(&broker.bootstrap, &topic, PARTITIONS);

    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let (b, g, t) = (broker.bootstrap.clone(), group.clone(), topic.clone());
    let committed = move || {
        let (b, g, t) = (b.clone(), g.clone(), t.clone());
        async move {
            tokio::task::spawn_blocking(move || committed_total(&b, &g, &t))
                .await
                .unwrap()
        }
    };
    for kill in 1..=KILLS {
        let before = committed().await;
        let mut child = spawn(&config_file, &log);
        // Kills spread over the stream: kill k waits until this run has committed
        // progress and the stream is past a random point of its k-th sixth, then waits a
        // random 0-2 s more.
        let fraction =
            (kill as f64 - 1.0 + (next(&mut seed) % 1000) as f64 / 1000.0) / (KILLS + 1) as f64;
        let target = before.max((total as f64 * fraction) as i64);
        let started = Instant::now();
        while committed().await <= target {
            assert!(
                child.0.try_wait().unwrap().is_none(),
                "indexer exited; see {}",
                log.display()
            );
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "no progress after restart"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        tokio::time::sleep(Duration::from_millis(next(&mut seed) % 2000)).await;
        child.0.kill().expect("SIGKILL");
        child.0.wait().unwrap();
        let at = committed().await;
        println!(
            "kill {kill}: committed {at} of {total} after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        assert!(
            at < total,
            "kill {kill} came after the stream was done; the test needs a longer stream"
        );
    }

    let mut child = spawn(&config_file, &log);
    support::wait_committed_to_end(
        &broker.bootstrap,
        &group,
        &topic,
        PARTITIONS,
        Duration::from_secs(900),
    )
    .await;
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.0.wait().unwrap();
    let output = std::fs::read_to_string(&log).unwrap();
    assert!(exit.success(), "SIGTERM exits cleanly: {exit:?}\n{output}");
    assert!(
        output.contains("stopped; committed"),
        "drained and committed on SIGTERM"
    );

    let dead_letters = support::high_watermarks(&broker.bootstrap, &format!("{topic}.dlq"), 1);
    assert_eq!(dead_letters, vec![0], "nothing dead-lettered");
    let store = support::open_store(dir.path());
    support::assert_equals_rebuild(&store, &read_log(&sample), 5).await;
    let stats = store.stats().await.unwrap();
    println!(
        "final index: {} points, {} documents",
        stats.points, stats.documents
    );
}
