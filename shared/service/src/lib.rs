//! The skeleton every Casement binary shares, written once (mini-redis's `bin/server.rs`
//! shape): `main` parses its CLI and calls [`exit`] with its work; the work builds the
//! [`runtime`] and hands the library a shutdown future ([`stop_signal`]), so libraries never
//! own signals. [`metrics`] serves a Prometheus registry in the text format.

use std::process::ExitCode;

use anyhow::Context;
use axum::http::header;
use axum::response::IntoResponse;
use prometheus::{Encoder, IntGaugeVec, Opts, Registry, TextEncoder};

/// Runs a binary's work: exit code 0, or 1 with the error chain on stderr (`error: …`).
pub fn exit(work: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    match work() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The multi-threaded runtime every service runs on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Resolves on SIGTERM or Ctrl-C: the shutdown future a binary hands its library.
pub async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// What `casement_build_info` says about a running service.
#[derive(Debug, Clone, Copy)]
pub struct BuildInfo<'a> {
    /// The binary's version (`env!("CARGO_PKG_VERSION")`).
    pub version: &'a str,
    /// The embedding model's id (`Embed::model_id`).
    pub model: &'a str,
    /// `edge` or `server`.
    pub store_backend: &'a str,
}

/// Registers what every service serves beside its own metrics: the `process_*` metrics of
/// this process (CPU seconds, resident and virtual memory, open and maximum file
/// descriptors, threads, start time; read from `/proc` on Linux) and
/// `casement_build_info{version, model, store_backend}` = 1.
pub fn register_process_metrics(registry: &Registry, build: BuildInfo<'_>) -> anyhow::Result<()> {
    #[cfg(target_os = "linux")]
    registry
        .register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .context("registering the process metrics")?;
    let info = IntGaugeVec::new(
        Opts::new(
            "casement_build_info",
            "Always 1; the labels say what is running.",
        ),
        &["version", "model", "store_backend"],
    )
    .context("casement_build_info")?;
    info.with_label_values(&[build.version, build.model, build.store_backend])
        .set(1);
    registry
        .register(Box::new(info))
        .context("registering casement_build_info")?;
    Ok(())
}

/// The text exposition format of `registry`.
pub fn render(registry: &Registry) -> String {
    let mut buffer = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&registry.gather(), &mut buffer) {
        tracing::error!(%error, "encoding metrics");
    }
    String::from_utf8_lossy(&buffer).into_owned()
}

/// The `/metrics` response for `registry`.
pub fn metrics(registry: &Registry) -> impl IntoResponse + use<> {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render(registry),
    )
}
