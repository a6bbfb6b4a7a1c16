//! Kill-and-restart soak (issues 19 and 22), `#[ignore]`d: `make soak`. The all-in-one
//! replays a long history plus synthetic edits (by default the 18F Handbook's full history,
//! 5,875 real revisions, and 1,500 seeded edits after it) as a child process on a temporary
//! directory, SIGKILLed `SOAK_KILLS` times (20) and restarted each time: a third of the
//! kills at seeded moments of the replay, a third as a compaction of the write-ahead log
//! starts, a third as a vector-index build starts (the store's own log lines; small
//! thresholds make both frequent). It stops on SIGTERM; then the index is opened offline and
//! every document of the log is compared with a rebuild of its final revision (state,
//! revision, records with their payloads, every vector), and the data directory's size with
//! a fresh backfill of the same final content. Meanwhile bytes on disk (segments, WAL) are
//! sampled against point writes. `SOAK_CLEAN=1` also replays once without kills and
//! compares the two indexes record by record. Prints a table and writes
//! `target/bench/soak.json`. Real models, real Qdrant Edge.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compare;
mod process;

use std::time::{Duration, Instant};

use casement_inference::Embed;
use casement_store::EdgeStore;
use casement_testkit::{
    data, final_events, open_store, read_log, rebuild_differences, synthetic_edits, write_log,
};
use process::Setup;
use serde::Serialize;

const DEFAULT_KILLS: usize = 20;
const DEFAULT_SEED: u64 = 22;
const DEFAULT_SYNTHETIC: usize = 1500;
/// Small thresholds, so that compactions and index builds happen often.
const SETTINGS: &str = "[store.edge]\nindex_after_points = 3000\ncompact_wal_bytes = 16777216\ncompact_wal_ratio = 0.25\nwal_segment_bytes = 4194304\n";
const COMPACTION: (&str, &str) = (
    "compacting the write-ahead log",
    "write-ahead log compacted",
);
const BUILD: (&str, &str) = ("building the vector index", "vector index build ended");

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
enum Aim {
    Events,
    Compaction,
    IndexBuild,
}

#[derive(Debug, Serialize)]
struct Kill {
    aim: Aim,
    /// What the store was doing when the kill landed (its log: a start line without its
    /// end line): "compaction", "index build", or "events".
    landed_during: &'static str,
    committed_before: u64,
    committed_after: u64,
    seconds_after_start: f64,
}

#[derive(Debug, Serialize)]
struct Sample {
    point_writes: f64,
    committed: u64,
    segments_bytes: f64,
    wal_bytes: f64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of tens of minutes: make soak"]
async fn killed_and_restarted_replay_ends_equal_to_a_rebuild() {
    let started = Instant::now();
    let kills = env_number("SOAK_KILLS", DEFAULT_KILLS as u64) as usize;
    let mut seed = env_number("SOAK_SEED", DEFAULT_SEED).max(1);
    let synthetic = env_number("SOAK_SYNTHETIC", DEFAULT_SYNTHETIC as u64) as usize;
    let history = std::env::var("SOAK_LOG").map_or_else(
        |_| data("revisions/18f-handbook/all.jsonl.gz"),
        std::path::PathBuf::from,
    );
    println!(
        "seed {seed} (SOAK_SEED), {kills} kills (SOAK_KILLS), {} + {synthetic} synthetic edits \
         (SOAK_LOG, SOAK_SYNTHETIC)",
        history.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let mut events = read_log(&history);
    let real = events.len();
    events.extend(synthetic_edits(&events, synthetic, seed));
    let log = dir.path().join("soak.jsonl");
    write_log(&log, &events);
    let events = read_log(&log);
    let total = events.len() as u64;
    // A copy: a rebuild of the workspace during the soak must not change the binary
    // between restarts.
    let binary = dir.path().join("casement");
    std::fs::copy(crate::support::casement_bin(), &binary).unwrap();

    let clean = (std::env::var("SOAK_CLEAN").as_deref() == Ok("1")).then(|| {
        let clean = Setup::new(&dir.path().join("a"), &binary, &log, SETTINGS);
        (clean.data.clone(), clean)
    });
    if let Some((_, clean)) = &clean {
        let mut run = clean.start();
        run.wait_for("ready in", Duration::from_secs(3 * 3600));
        run.stop();
        assert_eq!(
            clean.committed(),
            total,
            "the clean run replayed everything"
        );
        println!("clean run: {total} events replayed");
    }

    // Killed at seeded moments, restarted each time. Kill k is aimed at the k-th of
    // `kills + 1` equal slices of the stream (progress, not time: the machine's speed
    // varies): at a seeded point of it plus 0.5-2.5 s, or at the first compaction or index
    // build that starts in it (plus 0-50 ms, 0-300 ms), falling back to the slice's end.
    let killed = Setup::new(&dir.path().join("b"), &binary, &log, SETTINGS);
    let mut landed = Vec::new();
    let mut curve = Vec::new();
    let mut writes_before = 0.0;
    for kill in 1..=kills {
        let aim = [Aim::Events, Aim::Compaction, Aim::IndexBuild][(kill - 1) % 3];
        let before = killed.committed();
        let stderr_before = std::fs::metadata(killed.stderr()).map_or(0, |m| m.len());
        let mut run = killed.start();
        let since_start = Instant::now();
        run.wait_for("API listening", Duration::from_secs(600));
        let slice_start = total as f64 * (kill - 1) as f64 / (kills + 1) as f64;
        let slice = total as f64 / (kills + 1) as f64;
        let point = (slice_start + slice * (next(&mut seed) % 1000) as f64 / 1000.0) as u64;
        let slice_end = (slice_start + slice) as u64;
        let trigger = match aim {
            Aim::Events => None,
            Aim::Compaction => Some(COMPACTION.0),
            Aim::IndexBuild => Some(BUILD.0),
        };
        let mut last_sample = Instant::now();
        let mut writes_this_run = 0.0;
        loop {
            run.assert_running();
            let at = killed.committed();
            if last_sample.elapsed() > Duration::from_secs(3) {
                last_sample = Instant::now();
                let metrics = run.scrape().await;
                writes_this_run = metrics.point_writes().max(writes_this_run);
                curve.push(Sample {
                    point_writes: writes_before + writes_this_run,
                    committed: at,
                    segments_bytes: metrics.disk("segments"),
                    wal_bytes: metrics.disk("wal"),
                });
            }
            let triggered = trigger.is_some_and(|line| {
                run_log(&killed.stderr(), stderr_before)
                    .matches(line)
                    .count()
                    > 0
            });
            if triggered {
                let pause = match aim {
                    Aim::Compaction => next(&mut seed) % 50,
                    _ => next(&mut seed) % 300,
                };
                tokio::time::sleep(Duration::from_millis(pause)).await;
                break;
            }
            if (trigger.is_none() && at >= point) || at >= slice_end {
                if trigger.is_none() {
                    let extra = 0.5 + (next(&mut seed) % 2000) as f64 / 1000.0;
                    tokio::time::sleep(Duration::from_secs_f64(extra)).await;
                }
                break;
            }
            assert!(
                since_start.elapsed() < Duration::from_secs(3600),
                "kill {kill}: the replay is not past {slice_end} within an hour"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let metrics = run.scrape().await;
        writes_this_run = metrics.point_writes().max(writes_this_run);
        writes_before += writes_this_run;
        let after_replay = run.saw("ready in");
        run.kill();
        let tail = run_log(&killed.stderr(), stderr_before);
        let landed_during = if open_in(&tail, COMPACTION) {
            "compaction"
        } else if open_in(&tail, BUILD) {
            "index build"
        } else {
            "events"
        };
        let at = killed.committed();
        println!(
            "kill {kill:>2} aimed at {aim:?}, landed during {landed_during}: {:.1} s after start; \
             committed {before} -> {at} of {total}{}",
            since_start.elapsed().as_secs_f64(),
            if after_replay {
                " (AFTER the replay ended)"
            } else {
                ""
            }
        );
        assert!(!after_replay, "kill {kill} came after the replay ended");
        landed.push(Kill {
            aim,
            landed_during,
            committed_before: before,
            committed_after: at,
            seconds_after_start: since_start.elapsed().as_secs_f64(),
        });
    }
    let mut run = killed.start();
    run.wait_for("ready in", Duration::from_secs(3 * 3600));
    let metrics = run.scrape().await;
    writes_before += metrics.point_writes();
    run.stop();
    assert_eq!(
        killed.committed(),
        total,
        "the killed run replayed everything"
    );
    let soak_disk = disk_usage(&killed.data.join("index"));

    // A fresh backfill of the final content, for the size of the index it needs.
    let fresh = dir.path().join("fresh");
    let finals: Vec<_> = final_events(&events)
        .into_values()
        .filter(|e| !e.is_delete())
        .collect();
    let final_log = dir.path().join("final.jsonl");
    write_log(&final_log, &finals);
    let output = std::process::Command::new(&binary)
        .env_remove("CASEMENT_CONFIG")
        .arg("--data-dir")
        .arg(&fresh)
        .arg("backfill")
        .arg(&final_log)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let fresh_disk = disk_usage(&fresh.join("index"));

    // Both stopped: compare with the rebuild (and the clean run) offline.
    let dimension = casement_testkit::model().dimension();
    let b = open_store(&killed.data, dimension);
    let report = rebuild_differences(&b, &events, 1).await;
    let mut differences = report.differences.clone();
    if let Some((data, _)) = &clean {
        let a = open_store(data, dimension);
        differences.extend(compare::compare_indexes(&a, &b, &events).await);
    }

    let during = |what: &str| landed.iter().filter(|k| k.landed_during == what).count();
    let ratio = soak_disk.0 as f64 / fresh_disk.0.max(1) as f64;
    println!("\ncurve (point writes -> bytes on disk):");
    println!(
        "{:>12} {:>10} {:>14} {:>10}",
        "point writes", "committed", "segments MiB", "WAL MiB"
    );
    let step = (curve.len() / 20).max(1);
    for sample in curve.iter().step_by(step) {
        println!(
            "{:>12.0} {:>10} {:>14.1} {:>10.1}",
            sample.point_writes,
            sample.committed,
            sample.segments_bytes / MIB,
            sample.wal_bytes / MIB
        );
    }
    println!(
        "\nsoak: {} events ({real} real + {synthetic} synthetic), {:.0} point writes; {kills} \
         kills survived ({} during a compaction, {} during an index build, {} amid events); \
         {} documents ({} deleted), {} records and {} vectors compared with the rebuild: {} \
         differences; index on disk {:.1} MiB (segments {:.1}, WAL {:.1}) vs {:.1} MiB for a \
         fresh backfill of the final content ({ratio:.2}x); {:.0} s",
        total,
        writes_before,
        during("compaction"),
        during("index build"),
        during("events"),
        report.documents,
        report.tombstones,
        report.records,
        report.vectors,
        differences.len(),
        soak_disk.0 as f64 / MIB,
        soak_disk.1 as f64 / MIB,
        soak_disk.2 as f64 / MIB,
        fresh_disk.0 as f64 / MIB,
        started.elapsed().as_secs_f64()
    );
    for difference in differences.iter().take(20) {
        println!("{difference}");
    }
    casement_testkit::write_bench_json(
        "soak.json",
        &serde_json::json!({
            "seed": env_number("SOAK_SEED", DEFAULT_SEED),
            "events": total,
            "real_events": real,
            "synthetic_edits": synthetic,
            "point_writes": writes_before,
            "kills": landed,
            "documents": report.documents,
            "records": report.records,
            "vectors": report.vectors,
            "differences": differences.len(),
            "index_bytes": {"total": soak_disk.0, "segments": soak_disk.1, "wal": soak_disk.2},
            "fresh_backfill_bytes": fresh_disk.0,
            "ratio_to_fresh": ratio,
            "curve": curve,
            "seconds": started.elapsed().as_secs_f64(),
        }),
    );
    assert!(differences.is_empty(), "{} differences", differences.len());
    assert!(ratio < 3.0, "the index is {ratio:.2}x a fresh backfill");
}

const MIB: f64 = 1024.0 * 1024.0;

/// What the runs since `offset` wrote to stderr.
fn run_log(path: &std::path::Path, offset: u64) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(bytes.get(offset as usize..).unwrap_or_default()).into_owned()
}

/// The last `start` line of `log` has no `end` line after it.
fn open_in(log: &str, (start, end): (&str, &str)) -> bool {
    match log.rfind(start) {
        Some(at) => !log[at..].contains(end),
        None => false,
    }
}

/// (total, segments, WAL) bytes allocated under an Edge store directory.
fn disk_usage(path: &std::path::Path) -> (u64, u64, u64) {
    let usage = EdgeStore::disk_usage(path);
    (usage.total(), usage.segments, usage.wal)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("{name}={v}"))
    })
}

/// xorshift64*: the kill moments, reproducible from the seed.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}
