//! Compacting the embedded store's write-ahead log: the disk comes back, nothing is lost
//! (ids, payloads, vectors), searches running meanwhile neither fail nor miss a point,
//! writes after it (also after a reopen) apply, and a store left by a kill in the middle
//! of a truncation opens whole. Needs the models (`make models`).

#[allow(unused)]
use crate::contract;

use std::collections::BTreeMap;
use std::path::Path;

use casement_store::{EdgeStore, QueryFilter, Store, StoreConfig};
use contract::{DIMENSION, GUIDE, by_id, index, markdown, query};

fn closed_segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("wal"))
        .expect("wal dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("closed-"))
        .collect();
    names.sort_by_key(|n| n["closed-".len()..].parse::<u64>().unwrap_or(0));
    names
}

fn config(dir: &Path) -> StoreConfig {
    let mut config = StoreConfig::default();
    config.edge.path = dir.to_owned();
    config.edge.wal_segment_bytes = 64 * 1024;
    config.edge.compact_wal_bytes = 0;
    config
}

/// Ten documents, each written in three revisions (a sentence added each time).
async fn churn(store: &EdgeStore, revisions: std::ops::Range<u64>) {
    for revision in revisions {
        for doc in 0..10 {
            let content = format!("{GUIDE}\nRevision {revision} of page {doc} adds this line.\n");
            index(
                store,
                &markdown(&format!("page-{doc}"), revision, None, &content),
            )
            .await;
        }
    }
}

async fn snapshot(store: &EdgeStore) -> BTreeMap<String, (usize, Vec<Vec<f32>>)> {
    let mut all = BTreeMap::new();
    for doc in 0..10 {
        let doc_id = format!("page-{doc}");
        let records = by_id(store.records(&doc_id).await.expect("records"));
        let ids: Vec<_> = records.keys().copied().collect();
        let vectors = store.dense_vectors(&ids).await.expect("vectors");
        let mut ordered: Vec<Vec<f32>> = ids.iter().map(|id| vectors[id].clone()).collect();
        ordered.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        let state = store
            .document(&doc_id)
            .await
            .expect("state")
            .expect("indexed");
        all.insert(
            format!("{doc_id}@{}", state.revision),
            (records.len(), ordered),
        );
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_gives_the_disk_back_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = EdgeStore::open(&config(dir.path()), DIMENSION).expect("opens");
    churn(&store, 1..4).await;
    store.flush().await.expect("flush");
    let before = closed_segments(dir.path());
    assert!(
        before.len() >= 3,
        "the writes fill several log segments: {before:?}"
    );
    let wal_before = store.stats().await.expect("stats").disk.expect("disk").wal;
    let kept = snapshot(&store).await;
    let all_points = query("deploy main branch", 200, QueryFilter::default());
    let expected_hits = store.query(&all_points).await.expect("query").len();
    assert!(expected_hits > 50);

    // Searches all through the compaction: none fails, none comes back short.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let searcher = {
        let (store, all_points, done) = (store.clone(), all_points.clone(), done.clone());
        tokio::spawn(async move {
            let mut runs = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) || runs < 5 {
                let hits = store
                    .query(&all_points)
                    .await
                    .expect("a search during compaction");
                assert_eq!(hits.len(), expected_hits, "a search missed points");
                runs += 1;
            }
            runs
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let reclaimed = store.compact().await.expect("compacts");
    done.store(true, std::sync::atomic::Ordering::Release);
    let runs = searcher.await.expect("searcher");
    println!("reclaimed {reclaimed} bytes; {runs} searches meanwhile");

    let after = closed_segments(dir.path());
    assert_eq!(
        after,
        [before.last().cloned().expect("one")],
        "only the newest closed segment stays"
    );
    let stats = store.stats().await.expect("stats");
    let (disk, compaction) = (stats.disk.expect("disk"), stats.compaction.expect("edge"));
    assert!(
        reclaimed > 0 && disk.wal < wal_before,
        "{wal_before} → {}",
        disk.wal
    );
    assert_eq!(
        (compaction.runs, compaction.reclaimed_bytes),
        (1, reclaimed)
    );
    assert_eq!(
        snapshot(&store).await,
        kept,
        "ids, payloads and vectors as before"
    );

    // New writes apply (the log numbers them after what the segments hold), also after a
    // reopen, which compacts again at open.
    churn(&store, 4..5).await;
    let live = snapshot(&store).await;
    assert!(live.keys().all(|k| k.ends_with("@4")), "{:?}", live.keys());
    drop(store);
    let store = EdgeStore::open(&config(dir.path()), DIMENSION).expect("reopens");
    assert_eq!(snapshot(&store).await, live);
    churn(&store, 5..6).await;
    assert!(
        snapshot(&store).await.keys().all(|k| k.ends_with("@5")),
        "a write after a compacted reopen is applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_in_the_middle_of_a_truncation_leaves_a_store_that_opens_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = EdgeStore::open(&config(dir.path()), DIMENSION).expect("opens");
    churn(&store, 1..4).await;
    store.flush().await.expect("flush");
    let kept = snapshot(&store).await;
    drop(store);
    // As a kill after the first removal would leave it: the oldest closed segment gone,
    // the others still there.
    let closed = closed_segments(dir.path());
    assert!(closed.len() >= 3, "{closed:?}");
    std::fs::remove_file(dir.path().join("wal").join(&closed[0])).expect("remove");
    let store = EdgeStore::open(&config(dir.path()), DIMENSION).expect("opens after the kill");
    assert_eq!(snapshot(&store).await, kept);
    assert_eq!(
        closed_segments(dir.path()).len(),
        1,
        "the open finished the truncation"
    );
    churn(&store, 4..5).await;
    assert!(snapshot(&store).await.keys().all(|k| k.ends_with("@4")));
}
