//! The indexer binary, run as a child process against the mock cluster (or
//! `KAFKA_BOOTSTRAP`), is killed with SIGKILL at random moments while it indexes the 18F
//! sample stream, and restarted each time; a last run finishes the stream and stops on
//! SIGTERM. The index then equals a rebuild of each document's final revision: nothing
//! lost, nothing doubled. Small store thresholds make index builds and write-ahead log
//! compactions happen amid the kills. Needs `make models` and `../shared/data`.
//!
//! In `make test` it runs over the first `SOAK_EVENTS` (700) events of the sample stream,
//! with 3 kills: the same assertions as the soak on a third of the stream (each kill lands
//! at a random point; what is checked is the end state, not its size).
//!
//! `make soak` runs it as the Kafka half of the issue-19 soak: `SOAK_KILLS` kills (3 here),
//! over `SOAK_LOG` (the sample's first `SOAK_EVENTS` here) plus `SOAK_SYNTHETIC` seeded
//! edits (none here), reporting the kills that landed during a compaction or an index
//! build; `SOAK_PARTITIONS` (3 here) spreads a long history over more partitions.
//! `SOAK_COMPACT_MIB` (4 here, 16 in the soak) and `SOAK_INDEX_AFTER` (1000 here, 3000 in
//! the soak) set how often the store compacts and builds its index;
//! `SOAK_KEEP` names a directory to keep the data directory in when anything differs;
//! `SOAK_KILL_DURING` (`compaction` or `build`) aims each kill at one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use casement_indexer::replay;
use casement_store::Store;
use support::{Broker, config, corpus, read_log, unique};

const KILLS: usize = 3;
/// Events of the sample stream replayed when `SOAK_LOG` is not set.
const EVENTS: usize = 700;
const COMPACTION: (&str, &str) = (
    "compacting the write-ahead log",
    "write-ahead log compacted",
);
const BUILD: (&str, &str) = ("building the vector index", "vector index build ended");

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
    support::committed(bootstrap, group, topic, partitions())
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
    let broker = Broker::start(&[(&topic, partitions()), (&format!("{topic}.dlq"), 1)]);
    let dir = tempfile::tempdir().unwrap();
    let group = unique("indexer");
    let mut config = config(&broker.bootstrap, &topic, &group, dir.path());
    config.store.edge.index_after_points = env_number("SOAK_INDEX_AFTER", 1000) as usize;
    let compact_mib = env_number("SOAK_COMPACT_MIB", 4);
    config.store.edge.compact_wal_bytes = compact_mib << 20;
    config.store.edge.compact_wal_ratio = 0.25;
    config.store.edge.wal_segment_bytes = ((compact_mib << 20) / 4) as usize;
    let kills = env_number("SOAK_KILLS", KILLS as u64) as usize;
    let synthetic = env_number("SOAK_SYNTHETIC", 0) as usize;
    let config_file = dir.path().join("indexer.toml");
    std::fs::write(&config_file, toml::to_string(&config).unwrap()).unwrap();
    let log = dir.path().join("indexer.log");
    let history = std::env::var("SOAK_LOG").ok();
    let sample = if let (Some(path), 0) = (&history, synthetic) {
        std::path::PathBuf::from(path)
    } else {
        let mut events = match &history {
            Some(path) => read_log(Path::new(path)),
            None => {
                let mut events = read_log(&corpus("sample.jsonl"));
                events.truncate(env_number("SOAK_EVENTS", EVENTS as u64) as usize);
                events
            }
        };
        events.extend(casement_testkit::synthetic_edits(&events, synthetic, 19));
        let path = dir.path().join("soak.jsonl");
        casement_testkit::write_log(&path, &events);
        path
    };
    let total = replay::run(&config.kafka, &sample, None, false)
        .await
        .unwrap()
        .published as i64;
    support::assert_log_complete(&broker.bootstrap, &topic, partitions());

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
    let mut during = (0, 0);
    for kill in 1..=kills {
        let before = committed().await;
        let run_start = std::fs::metadata(&log).map_or(0, |m| m.len()) as usize;
        let mut child = spawn(&config_file, &log);
        // Kills spread over the stream: kill k waits until this run has committed
        // progress and the stream is past a random point of its k-th sixth, then waits a
        // random 0-2 s more.
        let fraction =
            (kill as f64 - 1.0 + (next(&mut seed) % 1000) as f64 / 1000.0) / (kills + 1) as f64;
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
        match std::env::var("SOAK_KILL_DURING").as_deref() {
            Ok(during) => wait_for_open_span(&log, run_start, during).await,
            Err(_) => tokio::time::sleep(Duration::from_millis(next(&mut seed) % 2000)).await,
        }
        let log_before = std::fs::metadata(&log).map_or(0, |m| m.len());
        child.0.kill().expect("SIGKILL");
        child.0.wait().unwrap();
        let at = committed().await;
        let run_log = std::fs::read(&log).unwrap_or_default();
        let run_log = run_log
            .get(run_start..(log_before as usize).min(run_log.len()))
            .unwrap_or_default();
        let run_log = String::from_utf8_lossy(run_log);
        let landed = if open_in(&run_log, COMPACTION) {
            during.0 += 1;
            " during a compaction"
        } else if open_in(&run_log, BUILD) {
            during.1 += 1;
            " during an index build"
        } else {
            ""
        };
        println!(
            "kill {kill}{landed}: committed {at} of {total} after {:.1} s",
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
        partitions(),
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

    let repairs = output.matches("the store was not closed").count();
    println!("{repairs} of the restarts repaired documents written after the last flush");
    let dead_letters = support::high_watermarks(&broker.bootstrap, &format!("{topic}.dlq"), 1);
    assert_eq!(dead_letters, vec![0], "nothing dead-lettered");
    let store = support::open_store(dir.path());
    let events = read_log(&sample);
    let report = casement_testkit::rebuild_differences(&store, &events, 5).await;
    let stats = store.stats().await.unwrap();
    println!(
        "kafka soak: {} events, {kills} kills survived ({} during a compaction, {} during an \
         index build); {} documents, {} records and {} vectors compared with the rebuild: {} \
         differences; final index: {} points, {} documents",
        events.len(),
        during.0,
        during.1,
        report.documents,
        report.records,
        report.vectors,
        report.differences.len(),
        stats.points,
        stats.documents
    );
    for difference in report.differences.iter().take(20) {
        println!("{difference}");
    }
    if let Ok(keep) = std::env::var("SOAK_KEEP")
        && !report.differences.is_empty()
    {
        drop(store);
        let keep = Path::new(&keep);
        casement_store::copy_tree(dir.path(), keep, &|_| false).expect("keep the data directory");
        println!(
            "kept the data directory and the indexer's log in {}",
            keep.display()
        );
    }
    assert!(report.differences.is_empty());
    assert!(report.vectors > 0);
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("{name}={v}"))
    })
}

/// Waits (up to a minute) until this run's log shows a compaction (`during` =
/// "compaction") or an index build ("build") in progress.
async fn wait_for_open_span(log: &Path, run_start: usize, during: &str) {
    let span = if during == "build" { BUILD } else { COMPACTION };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let text = std::fs::read(log).unwrap_or_default();
        let text = String::from_utf8_lossy(text.get(run_start..).unwrap_or_default());
        if open_in(&text, span) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The last `start` line of `log` has no `end` line after it.
fn open_in(log: &str, (start, end): (&str, &str)) -> bool {
    log.rfind(start).is_some_and(|at| !log[at..].contains(end))
}

/// Partitions of the topic: 3, or `SOAK_PARTITIONS` (librdkafka's mock cluster keeps at
/// most 5 MB per partition, so a long history needs more).
fn partitions() -> i32 {
    env_number("SOAK_PARTITIONS", 3) as i32
}
