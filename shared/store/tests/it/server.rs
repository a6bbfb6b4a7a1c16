//! The store contract against a Qdrant server, when `QDRANT_URL` is set (e.g.
//! `QDRANT_URL=http://localhost:6334`; `QDRANT_API_KEY` if the server wants one). Each test
//! uses its own collection and drops it at the end. Without `QDRANT_URL` every test says
//! so and passes: no Qdrant server binary is available from the package registries here,
//! so CI runs the same scenarios against Qdrant Edge (`tests/it/edge.rs`).
//!
//! With `QDRANT_TLS=1` as well, every scenario goes through the test kit's TLS-terminating
//! proxy in front of `QDRANT_URL`'s port, with a CA made for the run trusted through
//! `store.server.ca_file`: the same contract over TLS.

use crate::contract;

use casement_store::{Backend, ServerStore, StoreConfig};
use contract::{DIMENSION, Harness};

struct Server {
    config: StoreConfig,
    /// With `QDRANT_TLS=1`: the proxy and the directory of its certificates.
    _tls: Option<(casement_testkit::tls::TlsProxy, tempfile::TempDir)>,
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
        let tls = (std::env::var("QDRANT_TLS").as_deref() == Ok("1")).then(|| {
            let upstream = config.server.url.trim_start_matches("http://");
            let upstream = std::net::ToSocketAddrs::to_socket_addrs(upstream)
                .expect("QDRANT_URL is http://host:port")
                .next()
                .expect("QDRANT_URL resolves");
            let dir = tempfile::tempdir().expect("temp dir");
            casement_testkit::tls::pki(dir.path(), "qdrant");
            let proxy = casement_testkit::tls::TlsProxy::start(dir.path(), "qdrant", upstream);
            config.server.url = format!("https://127.0.0.1:{}", proxy.port);
            config.server.ca_file = Some(dir.path().join("qdrant-ca.pem"));
            (proxy, dir)
        });
        Some(Self { config, _tls: tls })
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
scenario!(access_filter);
scenario!(cut_off_write_heals, 1);

/// Casement's collections are behind an alias (`<name>.1` behind `<name>`). When a
/// migration moves the alias: a reader of the same model and radius follows it, a writer
/// stays and refuses every write (transiently: the pipeline retries, commits nothing) until
/// the alias comes back, and a reader of another model keeps reading its own collection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alias_moves_are_followed_or_refused() {
    use casement_store::{Access, Aliases, Error, IndexSettings, Store, check_settings};
    use std::time::{Duration, Instant};

    let Some(mut server) = Server::new("alias") else {
        return;
    };
    server.config.server.follow_secs = 1;
    let aliases = Aliases::connect(&server.config).expect("connects");
    let alias = server.config.collection.clone();
    let first = format!("{alias}.1");
    let ours = IndexSettings {
        model: "all-minilm-l6-v2:fp32".into(),
        dimension: DIMENSION,
        probe: contract::embed(&[casement_store::SETTINGS_PROBE.to_owned()]).remove(0),
        window_radius: 3,
        context: "structural".into(),
    };

    let writer = server.open().await;
    assert_eq!(writer.alias(), Some(alias.as_str()));
    assert_eq!(writer.collection(), first);
    assert_eq!(aliases.target().await.expect("target"), Some(first.clone()));
    check_settings(&writer, &ours, Access::Write)
        .await
        .expect("records");
    contract::index(
        &writer,
        &contract::markdown("guide", 1, None, contract::GUIDE),
    )
    .await;
    let reader = server.open().await;
    check_settings(&reader, &ours, Access::Read)
        .await
        .expect("matches");
    let mut other_model = ours.clone();
    other_model.model = "other:int8".into();
    other_model.probe = contract::embed(&["another probe text altogether".to_owned()]).remove(0);
    let other_reader = server.open().await;
    other_reader.bind_settings(&other_model, Access::Read);
    // A writer that never looks on its own (follow_secs = 0): its flush looks.
    let mut unfollowing = server.config.clone();
    unfollowing.server.follow_secs = 0;
    let flushing = ServerStore::open(&unfollowing, DIMENSION)
        .await
        .expect("opens");
    check_settings(&flushing, &ours, Access::Write)
        .await
        .expect("matches");
    flushing
        .sync()
        .await
        .expect("the alias names its collection");

    // A collection of the same settings, holding another document.
    let mut exact = server.config.clone();
    exact.collection = format!("{alias}.2");
    exact.exact_collection = true;
    let second = ServerStore::open(&exact, DIMENSION).await.expect("opens");
    assert_eq!(second.alias(), None);
    second.record_settings(&ours).await.expect("records");
    contract::index(
        &second,
        &contract::markdown("faq", 1, None, contract::GUIDE),
    )
    .await;
    assert_eq!(
        aliases.numbered().await.expect("numbered"),
        vec![(1, first.clone()), (2, exact.collection.clone())]
    );
    aliases.point_at(&exact.collection).await.expect("moves");
    // At once, before any follower looked: the flush refuses, so nothing is committed.
    let error = flushing.sync().await.expect_err("the alias moved");
    assert!(matches!(error, Error::Moved { .. }), "{error}");
    assert!(error.is_transient());

    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.collection() != exact.collection {
        assert!(
            Instant::now() < deadline,
            "the reader did not follow the alias"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = |store: &ServerStore| {
        let store = store.clone();
        async move {
            store
                .documents()
                .await
                .expect("documents")
                .into_iter()
                .map(|d| d.doc_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(&reader).await, ["faq"]);
    // The writer stays on its collection and refuses writes, naming the move.
    let revision = contract::markdown("guide", 2, None, "# Deploying\n\nChanged.\n");
    let refused = loop {
        let current = writer.records("guide").await.expect("records");
        let (plan, _) =
            casement_text::plan_upsert(&current, &revision, &Default::default()).expect("plan");
        match writer.apply(&plan, &contract::plan_vectors(&plan)).await {
            Err(error) => break error,
            Ok(_) => {
                // Applied before the writer looked: undo nothing, the point is the refusal.
                assert!(Instant::now() < deadline, "the writer never refused");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(matches!(refused, Error::Moved { .. }), "{refused}");
    assert!(refused.is_transient());
    assert!(refused.to_string().contains(&exact.collection), "{refused}");
    assert_eq!(writer.collection(), first);
    assert_eq!(listed(&writer).await, ["guide"]);
    // What the processes' gauges (`casement_index_replaced`) read.
    assert!(writer.stats().await.expect("stats").replaced);
    assert!(!reader.stats().await.expect("stats").replaced);
    while !other_reader.stats().await.expect("stats").replaced {
        assert!(
            Instant::now() < deadline,
            "the other model's reader never looked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(other_reader.collection(), first);
    assert_eq!(listed(&other_reader).await, ["guide"]);

    // The alias back: the writer writes again.
    aliases.point_at(&first).await.expect("moves back");
    let revision = contract::markdown("guide", 3, None, "# Deploying\n\nChanged again.\n");
    loop {
        let current = writer.records("guide").await.expect("records");
        let (plan, _) =
            casement_text::plan_upsert(&current, &revision, &Default::default()).expect("plan");
        match writer.apply(&plan, &contract::plan_vectors(&plan)).await {
            Ok(_) => break,
            Err(Error::Moved { .. }) if Instant::now() < deadline + Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("the writer did not resume: {error}"),
        }
    }
    assert_eq!(
        writer
            .document("guide")
            .await
            .expect("state")
            .map(|s| s.revision),
        Some(3)
    );
    assert!(!writer.stats().await.expect("stats").replaced);
    flushing.sync().await.expect("the alias is back");
    // An alias deleted by hand while its collections exist: opening refuses to point a new
    // one at `.1` (it could serve old data).
    {
        let client = qdrant_client::Qdrant::from_url(&server.config.server.url)
            .api_key(std::env::var("QDRANT_API_KEY").ok())
            .skip_compatibility_check()
            .build()
            .expect("client");
        client
            .delete_alias(alias.as_str())
            .await
            .expect("deletes the alias");
        let error = ServerStore::open(&server.config, DIMENSION)
            .await
            .expect_err("refused");
        assert!(error.to_string().contains(&exact.collection), "{error}");
        aliases.point_at(&first).await.expect("points back");
    }
    // Deleting the collection the alias names is refused (it would take the alias along).
    assert!(aliases.drop_collection(&first).await.is_err());
    aliases.drop_all().await.expect("tear down");
    assert_eq!(aliases.target().await.expect("target"), None);
    assert!(aliases.numbered().await.expect("numbered").is_empty());
}
