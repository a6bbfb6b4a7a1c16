//! Starting the service: load the models, open the store, probe it, serve until SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use casement_inference::{BlockingPool, Embed, OnnxEmbedder, load_embedder};
use casement_store::{AnyStore, Store};

use crate::config::QueryConfig;
use crate::http::{App, router};
use crate::metrics::Metrics;
use crate::search::{Reranker, Searcher};

/// Loads the query embedder and the configured reranker (failing at start when a model is
/// missing). Rescoring uses its own embedder settings (`rerank.embedder`).
pub async fn load_models(
    config: &QueryConfig,
) -> anyhow::Result<(Arc<dyn Embed>, Option<Reranker>)> {
    let embedder_config = config.embedder.clone();
    let embedder: Arc<dyn Embed> = Arc::new(
        tokio::task::spawn_blocking(move || OnnxEmbedder::load(&embedder_config))
            .await?
            .context("loading the query embedder ([embedder])")?,
    );
    Ok((embedder, load_reranker(config).await?))
}

/// Loads the reranker of `[rerank]` (none when `rerank.reranker` is `none`).
pub async fn load_reranker(config: &QueryConfig) -> anyhow::Result<Option<Reranker>> {
    let rerank = config.rerank.clone();
    let reranker = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let scorer = if rerank.reranker.needs_embedder() {
            Some(
                load_embedder(&rerank.embedder)
                    .context("loading the rescoring model ([rerank.embedder])")?,
            )
        } else {
            None
        };
        Ok(rerank.reranker.build(scorer)?)
    })
    .await?
    .context("loading the reranker ([rerank.reranker])")?;
    // About 3 words per 4 tokens: the model then sees the matched sentence and its
    // neighbours instead of the window's first tokens only.
    let max_words = (config.rerank.embedder.max_tokens * 3 / 4).max(1);
    Ok(reranker.map(|r| Reranker::new(r).with_max_words(max_words)))
}

/// The application over an open store (the all-in-one passes the store it indexes into).
pub fn app<S: Store + Clone + 'static>(
    config: QueryConfig,
    store: S,
    embedder: Arc<dyn Embed>,
    reranker: Option<Reranker>,
    metrics: Metrics,
) -> Arc<App<S>> {
    let openapi = crate::http::openapi(&config);
    app_with_openapi(config, store, embedder, reranker, metrics, openapi)
}

/// [`app`] serving `openapi` at `/openapi.json` (the all-in-one adds its webhook to it).
pub fn app_with_openapi<S: Store + Clone + 'static>(
    config: QueryConfig,
    store: S,
    embedder: Arc<dyn Embed>,
    reranker: Option<Reranker>,
    metrics: Metrics,
    openapi: String,
) -> Arc<App<S>> {
    let searcher = Searcher::new(
        store,
        BlockingPool::new(embedder, 2),
        reranker,
        &config,
        metrics.clone(),
    );
    let app = Arc::new(App {
        searcher,
        openapi,
        config,
        metrics,
        store_reachable: AtomicBool::new(false),
    });
    spawn_store_probe(&app);
    app
}

/// Checks every 5 s that the store answers; `/readyz` follows.
fn spawn_store_probe<S: Store + 'static>(app: &Arc<App<S>>) {
    let weak = Arc::downgrade(app);
    tokio::spawn(async move {
        while let Some(app) = weak.upgrade() {
            let ok = app.searcher.store().stats().await.is_ok();
            if app.store_reachable.swap(ok, Ordering::Relaxed) != ok {
                tracing::info!(reachable = ok, "store probe");
            }
            drop(app);
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
}

/// Serves `app` on `listener` until `shutdown` resolves, then finishes requests in flight.
pub async fn serve<S: Store + 'static>(
    listener: tokio::net::TcpListener,
    app: Arc<App<S>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
        .context("HTTP server")
}

/// `casement-query run`: everything from the config, until SIGTERM or Ctrl-C.
pub async fn run(config: QueryConfig) -> anyhow::Result<()> {
    if config.auth.keys.is_empty() {
        tracing::warn!(
            "no API keys configured ([auth] keys): the API is open to anyone who can reach {}",
            config.listen
        );
    }
    let (embedder, reranker) = load_models(&config).await?;
    let store = AnyStore::open(&config.store, embedder.dimension())
        .await
        .context("opening the store ([store])")?;
    let listener = bind(config.listen).await?;
    tracing::info!(
        address = %listener.local_addr()?,
        reranker = reranker.as_ref().map_or("none", |r| r.name()),
        "query service listening (POST /v1/search, GET /openapi.json, /metrics)"
    );
    let app = app(config, store, embedder, reranker, Metrics::new());
    serve(listener, app, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

pub async fn bind(listen: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutting down: finishing requests in flight");
}
