//! Shared by the query end-to-end tests: a Qdrant Edge store indexed from real text by the
//! indexer's own stages (real models), and the query service served on a local port.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use casement_events::{Change, Event, EventFormat};
use casement_inference::Embed;
use casement_pipeline::{EnrichConfig, Metrics as PipelineMetrics, Processor};
use casement_query::search::Reranker;
use casement_query::{App, QueryConfig};
use casement_store::{EdgeStore, StoreConfig};
use casement_text::{Format, Revision};
use tokio::sync::oneshot;

mod client;
#[allow(unused_imports)]
pub use client::*;

pub use casement_testkit::data;

/// The default models (query embedder fp32, the learned ranker), loaded once per test binary.
pub async fn models() -> (Arc<dyn Embed>, Option<Reranker>) {
    static MODELS: tokio::sync::OnceCell<(Arc<dyn Embed>, Option<Reranker>)> =
        tokio::sync::OnceCell::const_new();
    MODELS
        .get_or_init(|| async {
            casement_query::service::load_models(&QueryConfig::default())
                .await
                .expect("models (run `make models`)")
        })
        .await
        .clone()
}

pub fn open_store(dir: &Path, dimension: usize) -> EdgeStore {
    let mut config = StoreConfig::default();
    config.edge.path = dir.join("index");
    EdgeStore::open(&config, dimension).expect("store")
}

/// The indexer's processor (the same stages the indexer service runs) over `store`.
pub fn indexer(store: EdgeStore, model: Arc<dyn Embed>) -> Processor<EdgeStore> {
    casement_testkit::processor(
        store,
        model,
        &EnrichConfig::default(),
        &PipelineMetrics::new(),
    )
}

pub fn upsert(
    doc_id: &str,
    revision: u64,
    title: &str,
    tenant: Option<&str>,
    format: Format,
    content: &str,
) -> Event {
    Event {
        change: Change::Upsert(Revision {
            access: None,
            metadata: Default::default(),
            doc_id: doc_id.into(),
            revision,
            title: Some(title.into()),
            url: Some(format!("https://example.org/{doc_id}")),
            tenant: tenant.map(str::to_owned),
            format,
            content: content.into(),
            revision_url: None,
        }),
        format: EventFormat::Native,
    }
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct Article {
    pub title: String,
    pub text: String,
}

/// The first `n` SQuAD v1.1 dev articles.
pub fn squad_articles(n: usize) -> Vec<Article> {
    let text =
        std::fs::read_to_string(data("squad/dev-v1.1.articles.jsonl")).expect("SQuAD articles");
    text.lines()
        .take(n)
        .map(|l| serde_json::from_str(l).expect("article"))
        .collect()
}

/// (article title, question, answer text) of the given articles, in file order.
pub fn squad_questions(titles: &[&str]) -> Vec<(String, String, String)> {
    let raw = std::fs::read_to_string(data("squad/dev-v1.1.json")).expect("SQuAD questions");
    let json: serde_json::Value = serde_json::from_str(&raw).expect("json");
    let mut out = Vec::new();
    for article in json["data"].as_array().expect("data") {
        let title = article["title"].as_str().expect("title");
        if !titles.contains(&title) {
            continue;
        }
        for paragraph in article["paragraphs"].as_array().expect("paragraphs") {
            for qa in paragraph["qas"].as_array().expect("qas") {
                out.push((
                    title.to_owned(),
                    qa["question"].as_str().expect("q").to_owned(),
                    qa["answers"][0]["text"].as_str().expect("a").to_owned(),
                ));
            }
        }
    }
    out
}

/// Final revisions of the first `n` documents of the 18F sample that are not deleted.
pub fn handbook_pages(n: usize) -> Vec<Revision> {
    let (events, _) =
        casement_events::revision_log::read(&data("revisions/18f-handbook/sample.jsonl"))
            .expect("18F sample");
    let mut last: BTreeMap<String, Option<Revision>> = BTreeMap::new();
    for event in &events {
        let revision = (!event.is_delete()).then(|| event.to_revision().expect("revision"));
        last.insert(event.doc_id.clone(), revision);
    }
    last.into_values()
        .flatten()
        .filter(|r| r.content.len() > 2_000)
        .take(n)
        .collect()
}

/// The query service on 127.0.0.1 (a free port), stopped when dropped.
pub struct Served {
    pub base: String,
    pub app: Arc<App<EdgeStore>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn serve(config: QueryConfig, store: EdgeStore) -> Served {
    let (embedder, reranker) = models().await;
    let app = casement_query::service::app(
        config,
        store,
        embedder,
        reranker,
        casement_query::Metrics::new(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let (stop, stopped) = oneshot::channel::<()>();
    let served = app.clone();
    tokio::spawn(async move {
        casement_query::service::serve(listener, served, async {
            let _ = stopped.await;
        })
        .await
        .expect("serve");
    });
    Served {
        base,
        app,
        stop: Some(stop),
    }
}
