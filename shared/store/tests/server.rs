//! The store contract against a Qdrant server, when `QDRANT_URL` is set (e.g.
//! `QDRANT_URL=http://localhost:6334`; `QDRANT_API_KEY` if the server wants one). Each test
//! uses its own collection and drops it at the end. Without `QDRANT_URL` every test says
//! so and passes: no Qdrant server binary is available from the package registries here,
//! so CI runs the same scenarios against Qdrant Edge (`tests/edge.rs`).

mod contract;

use casement_store::{Backend, ServerStore, StoreConfig};
use contract::{DIMENSION, Harness};

struct Server {
    config: StoreConfig,
}

impl Server {
    fn new(name: &str) -> Option<Self> {
        let Ok(url) = std::env::var("QDRANT_URL") else {
            eprintln!("QDRANT_URL is not set: skipping the Qdrant server half of the contract");
            return None;
        };
        let mut config = StoreConfig {
            backend: Backend::Server,
            collection: format!("casement_test_{name}_{}", std::process::id()),
            ..StoreConfig::default()
        };
        config.server.url = url;
        config.indexed_metadata = contract::INDEXED_METADATA.map(str::to_owned).to_vec();
        config.server.api_key = std::env::var("QDRANT_API_KEY").ok().map(Into::into);
        Some(Self { config })
    }

    async fn finish(self) {
        let store = self.open().await;
        store
            .delete_collection()
            .await
            .expect("drop test collection");
    }
}

impl Harness for Server {
    type S = ServerStore;

    async fn open(&self) -> ServerStore {
        ServerStore::open(&self.config, DIMENSION)
            .await
            .expect("server store opens")
    }
}

macro_rules! scenario {
    ($name:ident $(, $arg:expr)?) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let Some(server) = Server::new(stringify!($name)) else {
                return;
            };
            contract::$name(&server $(, $arg)?).await;
            server.finish().await;
        }
    };
}

scenario!(schema_and_reopen);
scenario!(read_back_exactly);
scenario!(payload_update_keeps_vector);
scenario!(delete_tombstone_stale);
scenario!(documents_listing);
scenario!(settings_recorded_and_checked);
scenario!(sparse_channel_finds_identifier);
scenario!(tenant_filter);
scenario!(metadata_filter);
scenario!(cut_off_write_heals, 1);
