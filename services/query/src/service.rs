//! Starting the service: load the models, open the store, probe it, serve until the
//! shutdown future its binary hands it resolves.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use casement_inference::{BlockingPool, Embed, load_embedder};
use casement_store::{AnyStore, Store, StoreProbe};

use crate::config::QueryConfig;
use crate::eval::Evaluator;
use crate::http::{App, router};
use crate::metrics::Metrics;
use crate::search::{Reranker, Searcher};

/// Loads the query embedder and the configured reranker (failing at start when a model is
/// missing). Rescoring uses its own embedder settings (`rerank.embedder`).
pub async fn load_models(
    config: &QueryConfig,
) -> anyhow::Result<(Arc<dyn Embed>, Option<Reranker>)> {
    let embedder_config = config.embedder.clone();
    let embedder = tokio::task::spawn_blocking(move || load_embedder(&embedder_config))
        .await?
        .context("loading the query embedder ([embedder])")?;
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
    // A standalone query service's one index gauge (the all-in-one serves the indexer's).
    let replaced = prometheus::IntGauge::new(
        "casement_index_replaced",
        "1 while the collection alias names a collection of other settings than this process's (restart it with them).",
    )
    .ok()
    .filter(|gauge| metrics.registry.register(Box::new(gauge.clone())).is_ok());
    let probe = StoreProbe::spawn(store.clone(), move |stats| {
        if let Some(gauge) = &replaced {
            gauge.set(i64::from(stats.replaced));
        }
    });
    app_with(config, store, embedder, reranker, metrics, openapi, probe)
}

/// [`app`] serving `openapi` at `/openapi.json` and answering `/readyz` from `probe`: the
/// all-in-one adds its webhook to the document and shares its one store probe.
pub fn app_with<S: Store + Clone + 'static>(
    config: QueryConfig,
    store: S,
    embedder: Arc<dyn Embed>,
    reranker: Option<Reranker>,
    metrics: Metrics,
    openapi: String,
    probe: StoreProbe,
) -> Arc<App<S>> {
    // Checked by the config's validation at start; a key set that went bad since leaves
    // no verifier, so requests with a token are refused (401), never read as the key.
    let users = config.auth.jwt.as_ref().and_then(|jwt| {
        crate::auth::UserTokens::load(jwt)
            .inspect_err(|e| tracing::error!("auth.jwt: {e:#}"))
            .ok()
            .map(Arc::new)
    });
    let searcher = Searcher::new(
        store,
        BlockingPool::new(embedder, 2),
        reranker,
        &config,
        metrics.clone(),
    );
    Arc::new(App {
        searcher,
        openapi,
        config,
        metrics,
        store_probe: probe,
        catching_up: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        users,
    })
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

/// `casement-query run`: everything from the config, until `shutdown` resolves (its binary
/// hands it SIGTERM or Ctrl-C); then requests in flight finish.
pub async fn run(
    config: QueryConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if config.auth.keys.is_empty() {
        tracing::warn!(
            "no API keys configured ([auth] keys): the API is open to anyone who can reach {}",
            config.listen
        );
    }
    if let Some(golden) = crate::eval::check(&config.eval)? {
        tracing::info!(
            path = %golden.path.display(),
            cases = golden.cases.len(),
            every_secs = config.eval.interval_secs,
            "golden set evaluated at start and periodically ([eval])"
        );
    }
    let (embedder, reranker) = load_models(&config).await?;
    let store = AnyStore::open(&config.store, embedder.dimension())
        .await
        .context("opening the store ([store])")?;
    check_index_settings(&store, &embedder, config.search.indexed_window_radius).await?;
    let listener = bind(config.listen).await?;
    tracing::info!(
        address = %listener.local_addr()?,
        reranker = reranker.as_ref().map_or("none", |r| r.name()),
        "query service listening (POST /v1/search, GET /openapi.json, /metrics)"
    );
    let metrics = Metrics::new();
    casement_service::register_process_metrics(
        &metrics.registry,
        casement_service::BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            model: embedder.model_id(),
            store_backend: config.store.backend.as_str(),
        },
    )?;
    let app = app(config, store, embedder, reranker, metrics);
    let evaluation = Evaluator::new(&app, &app.metrics.registry)
        .map(|evaluator| tokio::spawn(Arc::new(evaluator).now_and_every_interval()));
    serve(listener, app, shutdown).await?;
    if let Some(evaluation) = evaluation {
        evaluation.abort();
    }
    tracing::info!("stopped");
    Ok(())
}

/// A reader's check of the index's recorded settings: the model (and dimension) its query
/// vectors come from, and the window radius it was indexed with, must be the index's.
pub async fn check_index_settings<S: casement_store::Store>(
    store: &S,
    embedder: &Arc<dyn Embed>,
    indexed_window_radius: usize,
) -> anyhow::Result<()> {
    let probe = BlockingPool::new(embedder.clone(), 1)
        .embed(vec![casement_store::SETTINGS_PROBE.to_owned()])
        .await
        .map_err(|e| anyhow::anyhow!("embedding the settings probe: {e}"))?
        .pop()
        .unwrap_or_default();
    let ours = casement_store::IndexSettings {
        model: embedder.model_id().to_owned(),
        dimension: embedder.dimension(),
        probe,
        window_radius: indexed_window_radius,
        context: String::new(),
    };
    match casement_store::check_settings(store, &ours, casement_store::Access::Read).await {
        Ok(casement_store::SettingsCheck::Unrecorded) => {
            tracing::warn!(
                "the index has no recorded settings yet (an indexer records them when it starts): \
                 its model and window radius cannot be checked against this service's"
            );
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(error) => Err(anyhow::anyhow!("{error}")),
    }
}

pub async fn bind(listen: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))
}
