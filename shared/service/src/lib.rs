//! The skeleton every Casement binary shares, written once (mini-redis's `bin/server.rs`
//! shape): `main` parses its CLI and calls [`exit`] with its work; the work builds the
//! [`runtime`] and hands the library a shutdown future ([`stop_signal`]), so libraries never
//! own signals. [`metrics`] serves a Prometheus registry in the text format.

use std::process::ExitCode;

use anyhow::Context;
use axum::http::header;
use axum::response::IntoResponse;
use prometheus::{Encoder, Registry, TextEncoder};

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
