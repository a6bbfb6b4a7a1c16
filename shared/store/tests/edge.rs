//! The store contract against Qdrant Edge (in-process, a temporary data directory).
//! Needs the models (`make models`).

mod contract;

use casement_store::{EdgeStore, StoreConfig};
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
async fn sparse_channel_finds_identifier() {
    contract::sparse_channel_finds_identifier(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_filter() {
    contract::tenant_filter(&Edge::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_off_write_heals() {
    for seed in [1, 2, 3] {
        contract::cut_off_write_heals(&Edge::new(), seed).await;
    }
}
