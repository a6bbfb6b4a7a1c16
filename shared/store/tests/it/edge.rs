//! The store contract against Qdrant Edge (in-process, a temporary data directory).
//! Needs the models (`make models`).

use crate::contract;

use casement_store::{AnyStore, EdgeStore, Store, StoreConfig};
use contract::{DIMENSION, Harness};

struct Edge {
    dir: tempfile::TempDir,
}

impl Edge {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }
}

impl Harness for Edge {
    type S = EdgeStore;

    async fn open(&self) -> EdgeStore {
        let mut config = StoreConfig::default();
        config.edge.path = self.dir.path().join("index");
        config.indexed_metadata = contract::INDEXED_METADATA.map(str::to_owned).to_vec();
        EdgeStore::open(&config, DIMENSION).expect("edge store opens")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_and_reopen() {
    contract::schema_and_reopen(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_back_exactly() {
    contract::read_back_exactly(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_update_keeps_vector() {
    contract::payload_update_keeps_vector(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_tombstone_stale() {
    contract::delete_tombstone_stale(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_recorded_and_checked() {
    contract::settings_recorded_and_checked(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_listing() {
    contract::documents_listing(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparse_channel_finds_identifier() {
    contract::sparse_channel_finds_identifier(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_filter() {
    contract::tenant_filter(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_filter() {
    contract::metadata_filter(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_filter() {
    contract::access_filter(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_off_write_heals() {
    for seed in [1, 2, 3] {
        contract::cut_off_write_heals(&Edge::new(), seed).await;
    }
}

/// An acknowledged (synced) write survives the process dying right after it (no drop, no
/// flush on exit), and a document written after the last flush is named in the journal and
/// written again, as it reads, by the next open (see `edge/journal.rs`): the test re-runs
/// itself as a child that writes and aborts, then reopens.
#[test]
fn acknowledged_write_survives_a_crash() {
    const CHILD: &str = "CASEMENT_STORE_CRASH_CHILD_DIR";
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if let Some(dir) = std::env::var_os(CHILD) {
        let mut config = StoreConfig::default();
        config.edge.path = std::path::PathBuf::from(dir);
        runtime.block_on(async {
            let store = EdgeStore::open(&config, DIMENSION).expect("open");
            let revision = contract::markdown(
                "crash",
                1,
                None,
                "# A\n\nWritten before the crash. Twice.\n",
            );
            contract::index(&store, &revision).await;
            store.sync().await.expect("sync");
            let unflushed = contract::markdown("unflushed", 1, None, "# B\n\nNot flushed.\n");
            contract::index(&store, &unflushed).await;
            // Dropping it would close the engine, which flushes.
            std::mem::forget(store);
        });
        std::process::abort();
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("index");
    let status = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "edge::acknowledged_write_survives_a_crash",
            "--nocapture",
        ])
        .env(CHILD, &path)
        .status()
        .expect("child runs");
    assert!(!status.success(), "the child aborts");
    let journal = path.join("unflushed.jsonl");
    assert_eq!(
        std::fs::read_to_string(&journal).expect("journal"),
        "[null,\"unflushed\"]\n",
        "the journal names the document written after the last flush, only it"
    );
    let mut config = StoreConfig::default();
    config.edge.path = path;
    runtime.block_on(async {
        let store = EdgeStore::open(&config, DIMENSION).expect("reopen after the crash");
        assert_eq!(
            std::fs::read_to_string(&journal).expect("journal"),
            "",
            "the open repaired the named document and emptied the journal"
        );
        let records = store.records("crash").await.expect("records");
        assert_eq!(records.len(), 2, "both sentences survived");
        let document = store
            .document("crash")
            .await
            .expect("document")
            .expect("state");
        assert_eq!(document.revision, 1);
        // The repaired document reads as a whole revision or not at all; planned again,
        // it is complete.
        let unflushed = contract::markdown("unflushed", 1, None, "# B\n\nNot flushed.\n");
        contract::index(&store, &unflushed).await;
        assert_eq!(store.records("unflushed").await.expect("records").len(), 1);
        store.sync().await.expect("sync");
        assert_eq!(std::fs::read_to_string(&journal).expect("journal"), "");
    });
}

/// Through `AnyStore` (what the services use): a store made for one model dimension
/// refuses to open for another, saying why; a bad config fails before anything is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_dimension_and_bad_config_fail_clearly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = StoreConfig::default();
    config.edge.path = dir.path().join("index");
    let store = AnyStore::open(&config, DIMENSION).await.expect("opens");
    assert_eq!(store.dimension(), DIMENSION);
    drop(store);
    let error = AnyStore::open(&config, 768)
        .await
        .expect_err("wrong dimension");
    let message = error.to_string();
    assert!(
        message.contains("dimension 384") && message.contains("768"),
        "{message}"
    );

    let bad = StoreConfig {
        collection: "no spaces please".into(),
        ..config.clone()
    };
    let message = AnyStore::open(&bad, DIMENSION)
        .await
        .expect_err("bad name")
        .to_string();
    assert!(message.contains("store.collection"), "{message}");
    let mut bad = config;
    bad.edge.path = dir.path().join("other");
    bad.bm25.language = "klingon".into();
    let message = AnyStore::open(&bad, DIMENSION)
        .await
        .expect_err("bad language")
        .to_string();
    assert!(message.contains("klingon"), "{message}");
    assert!(
        !dir.path().join("other").exists(),
        "nothing created on a bad config"
    );
}

/// One Edge directory, one open store: a second open fails with a clear message (two
/// processes would corrupt it), and the directory opens again once the first is dropped.
#[test]
fn a_data_directory_is_opened_by_one_store_at_a_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = StoreConfig::default();
    config.edge.path = dir.path().join("index");
    let first = EdgeStore::open(&config, DIMENSION).expect("opens");
    let error = EdgeStore::open(&config, DIMENSION).expect_err("a second open fails");
    assert!(error.to_string().contains("in use"), "{error}");
    // It names the holder (here this test's own process).
    assert!(
        error
            .to_string()
            .contains(&format!("held by process {} (", std::process::id())),
        "{error}"
    );
    drop(first);
    EdgeStore::open(&config, DIMENSION).expect("opens again after the first is dropped");
}
