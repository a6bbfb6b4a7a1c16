//! Kill-and-restart soak (issue 22), `#[ignore]`d: `make soak-restart`. The all-in-one
//! replays the 18F sample stream (2,025 real revisions, deletes included) twice, as a child
//! process on a temporary directory: once cleanly (directory A), once SIGKILLed at seeded
//! moments spread over the replay and restarted each time (directory B, `SOAK_KILLS`
//! kills, 12 by default). Both stop on SIGTERM; then both indexes are opened offline and
//! every document of the log must have the same state (revision, tombstone, title, url,
//! tenant, counts), the same records and the same vectors in B as in A. Real models, real
//! Qdrant Edge. `SOAK_SEED` picks other kill moments (the seed is printed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod process;
#[path = "../support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use casement_inference::{Embed, cosine};
use casement_store::{EdgeStore, Store};
use casement_testkit::{data, final_events, open_store, read_log};
use process::Setup;

const DEFAULT_KILLS: usize = 12;
const DEFAULT_SEED: u64 = 22;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of several minutes: make soak-restart"]
async fn killed_and_restarted_replay_ends_equal_to_a_clean_run() {
    let started = Instant::now();
    let kills = env_number("SOAK_KILLS", DEFAULT_KILLS as u64) as usize;
    let mut seed = env_number("SOAK_SEED", DEFAULT_SEED).max(1);
    println!("seed {seed} (SOAK_SEED), {kills} kills (SOAK_KILLS)");
    let log = data("revisions/18f-handbook/sample.jsonl");
    let events = read_log(&log);
    let total = events.len() as u64;
    let dir = tempfile::tempdir().unwrap();
    // A copy: a rebuild of the workspace during the soak must not change the binary
    // between restarts.
    let binary = dir.path().join("casement");
    std::fs::copy(env!("CARGO_BIN_EXE_casement"), &binary).unwrap();

    // A: the clean run.
    let clean = Setup::new(&dir.path().join("a"), &binary, &log);
    let mut run = clean.start();
    let listening = run.wait_for("API listening", Duration::from_secs(600));
    let ready = run.wait_for("ready in", Duration::from_secs(3600));
    let replay_seconds = ready.duration_since(listening).as_secs_f64();
    let clean_embedded = run.scrape().await.embedded();
    run.stop();
    assert_eq!(
        clean.committed(),
        total,
        "the clean run replayed everything"
    );
    println!(
        "clean run: {total} events replayed in {replay_seconds:.1} s, \
         {clean_embedded} sentences embedded"
    );

    // B: killed at seeded moments, restarted each time. Kill k waits until the committed
    // replay position passes a seeded point of the k-th of `kills + 1` equal slices of the
    // stream (progress, not time: the machine's speed varies), then a seeded 0.5-2.5 s
    // more, so each kill lands amid events in flight and the last one before the end.
    let killed = Setup::new(&dir.path().join("b"), &binary, &log);
    let mut killed_embedded = 0.0;
    let mut landed = Vec::new();
    for kill in 1..=kills {
        let before = killed.committed();
        let mut run = killed.start();
        let since_start = Instant::now();
        run.wait_for("API listening", Duration::from_secs(600));
        let listening = Instant::now();
        let share = (kill - 1) as f64 + (next(&mut seed) % 1000) as f64 / 1000.0;
        let target = (total as f64 * share / (kills + 1) as f64) as u64;
        while killed.committed() < target {
            run.assert_running();
            assert!(
                listening.elapsed() < Duration::from_secs(1800),
                "kill {kill}: the replay is not past {target} within 30 minutes"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let extra = 0.5 + (next(&mut seed) % 2000) as f64 / 1000.0;
        tokio::time::sleep(Duration::from_secs_f64(extra)).await;
        let wait = listening.elapsed().as_secs_f64();
        let metrics = run.scrape().await;
        let (finished, embedded) = (metrics.finished(), metrics.embedded());
        let in_flight = metrics.get("casement_indexer_in_flight_events");
        let after_replay = run.saw("ready in");
        run.kill();
        killed_embedded += embedded;
        let at = killed.committed();
        println!(
            "kill {kill:>2}: {wait:.1} s after listening ({:.1} s after start); \
             replay committed {before} -> {at} of {total} (target {target}); this run \
             finished {finished} events, {in_flight} in flight, embedded {embedded} \
             sentences{}",
            since_start.elapsed().as_secs_f64(),
            if after_replay {
                " (AFTER the replay ended)"
            } else {
                ""
            }
        );
        landed.push((at, after_replay));
    }
    let mut run = killed.start();
    run.wait_for("ready in", Duration::from_secs(3600));
    let last_embedded = run.scrape().await.embedded();
    killed_embedded += last_embedded;
    run.stop();
    assert_eq!(
        killed.committed(),
        total,
        "the killed run replayed everything"
    );
    println!(
        "killed run: last run embedded {last_embedded} sentences; {killed_embedded} in all \
         ({} more than the clean run)",
        killed_embedded - clean_embedded
    );

    // Both stopped: compare the indexes offline.
    let dimension = casement_testkit::model().dimension();
    let a = open_store(&clean.data, dimension);
    let b = open_store(&killed.data, dimension);
    let ids: BTreeSet<&str> = events.iter().map(|e| e.doc_id.as_str()).collect();
    let deleted_in_log = final_events(&events)
        .values()
        .filter(|e| e.is_delete())
        .count();
    let mut differences = Vec::new();
    let (mut tombstones, mut records, mut vectors) = (0, 0, 0);
    for &doc_id in &ids {
        let state_a = a.document(doc_id).await.unwrap();
        let state_b = b.document(doc_id).await.unwrap();
        if state_a.as_ref().is_some_and(|s| s.deleted) {
            tombstones += 1;
        }
        if state_a != state_b {
            differences.push(format!(
                "{doc_id}: document state differs\n  clean:  {state_a:?}\n  killed: {state_b:?}"
            ));
        }
        let records_a = sorted_records(&a, doc_id).await;
        let records_b = sorted_records(&b, doc_id).await;
        records += records_a.len();
        if records_a != records_b {
            differences.push(format!(
                "{doc_id}: records differ (clean {}, killed {})\n{}",
                records_a.len(),
                records_b.len(),
                describe_record_difference(&records_a, &records_b)
            ));
            continue;
        }
        let ids: Vec<_> = records_a.iter().map(|r| r.id).collect();
        let vectors_a = a.dense_vectors(&ids).await.unwrap();
        let vectors_b = b.dense_vectors(&ids).await.unwrap();
        for id in &ids {
            match (vectors_a.get(id), vectors_b.get(id)) {
                (Some(va), Some(vb)) if cosine(va, vb) > 0.9999 => vectors += 1,
                (va, vb) => differences.push(format!(
                    "{doc_id} {id}: vector differs (clean {}, killed {}, cosine {:?})",
                    va.map_or("missing", |_| "present"),
                    vb.map_or("missing", |_| "present"),
                    va.zip(vb).map(|(va, vb)| cosine(va, vb))
                )),
            }
        }
    }
    let (stats_a, stats_b) = (a.stats().await.unwrap(), b.stats().await.unwrap());
    if (stats_a.points, stats_a.documents, stats_a.tombstones)
        != (stats_b.points, stats_b.documents, stats_b.tombstones)
    {
        differences.push(format!(
            "index totals differ: clean {stats_a:?}, killed {stats_b:?}"
        ));
    }

    let during_replay = landed.iter().filter(|(_, after)| !after).count();
    let points: Vec<String> = landed.iter().map(|(at, _)| at.to_string()).collect();
    println!(
        "soak: {kills} kills ({during_replay} during the replay, committed positions {}), \
         {} documents compared ({tombstones} deleted; {deleted_in_log} end deleted in the \
         log), {records} records and {vectors} vectors compared, {} differences, {:.0} s",
        points.join(", "),
        ids.len(),
        differences.len(),
        started.elapsed().as_secs_f64()
    );
    for difference in &differences {
        println!("{difference}");
    }
    assert!(differences.is_empty(), "{} differences", differences.len());
    assert!(
        during_replay >= 10,
        "fewer than 10 kills landed in the replay"
    );
    assert_eq!(tombstones, deleted_in_log);
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

async fn sorted_records(store: &EdgeStore, doc_id: &str) -> Vec<casement_text::SentenceRecord> {
    let mut records = store.records(doc_id).await.unwrap();
    records.sort_by_key(|r| r.id);
    records
}

fn describe_record_difference(
    a: &[casement_text::SentenceRecord],
    b: &[casement_text::SentenceRecord],
) -> String {
    let ids_a: BTreeSet<_> = a.iter().map(|r| r.id).collect();
    let ids_b: BTreeSet<_> = b.iter().map(|r| r.id).collect();
    let mut lines = Vec::new();
    for r in a.iter().filter(|r| !ids_b.contains(&r.id)).take(3) {
        lines.push(format!("  only clean:  r{} {:?}", r.revision, r.sentence));
    }
    for r in b.iter().filter(|r| !ids_a.contains(&r.id)).take(3) {
        lines.push(format!("  only killed: r{} {:?}", r.revision, r.sentence));
    }
    let differing = a
        .iter()
        .filter_map(|ra| Some((ra, b.iter().find(|rb| rb.id == ra.id)?)))
        .filter(|(ra, rb)| ra != rb);
    for (ra, rb) in differing.take(2) {
        lines.push(format!("  clean:  {ra:?}\n  killed: {rb:?}"));
    }
    lines.join("\n")
}
