//! The admin port: `/healthz` (the process is up), `/readyz` (models loaded, store
//! reachable, partitions assigned: the `casement_indexer_partitions_assigned` gauge) and `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use casement_pipeline::Metrics;

/// Readiness flags, set by the service as it starts and by its store probe.
#[derive(Debug, Default)]
pub struct Readiness {
    pub models_loaded: AtomicBool,
    /// The store probe (`casement_pipeline::factory::spawn_store_probe`), once started.
    pub store: std::sync::OnceLock<casement_store::StoreProbe>,
}

#[derive(Debug, Clone)]
struct AdminState {
    metrics: Metrics,
    readiness: Arc<Readiness>,
}

pub fn router(metrics: Metrics, readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AdminState { metrics, readiness })
}

/// Binds the admin port (failing at start if it is taken) and serves it in the background.
pub async fn serve(
    listen: SocketAddr,
    metrics: Metrics,
    readiness: Arc<Readiness>,
) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("admin port {listen}: {e}"))?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router(metrics, readiness)).await {
            tracing::error!(%error, "admin server stopped");
        }
    });
    Ok(address)
}

async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    let r = &state.readiness;
    let checks = [
        ("models_loaded", r.models_loaded.load(Ordering::Relaxed)),
        (
            "store_reachable",
            r.store
                .get()
                .is_some_and(casement_store::StoreProbe::reachable),
        ),
        ("partitions_assigned", state.metrics.partitions.get() > 0),
    ];
    let body: String = checks
        .iter()
        .map(|(name, ok)| format!("{name}: {}\n", if *ok { "ok" } else { "no" }))
        .collect();
    let status = if checks.iter().all(|(_, ok)| *ok) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body)
}

async fn metrics_text(State(state): State<AdminState>) -> impl IntoResponse {
    casement_service::metrics(&state.metrics.registry)
}
