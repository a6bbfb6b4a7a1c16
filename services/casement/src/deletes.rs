//! `POST /v1/admin/deletes/release` (operator key): the deletes the mass-deletion guard
//! holds (`casement_pipeline::guard`) are applied, and deletes go through for one window
//! (a watched folder held as not mounted sends its deletes then); `GET` says how many are
//! held. `casement release-deletes` is its client.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use casement_pipeline::DeleteGuard;
use casement_query::config::AuthConfig;
use casement_query::error::ApiError;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Deletes {
    guard: DeleteGuard,
    auth: AuthConfig,
}

pub fn router(guard: DeleteGuard, auth: AuthConfig) -> Router {
    Router::new()
        .route("/v1/admin/deletes", get(held))
        .route("/v1/admin/deletes/release", post(release))
        .with_state(Deletes { guard, auth })
}

async fn held(State(deletes): State<Deletes>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    deletes.auth.admin_read(&headers, "held deletes")?;
    Ok(Json(json!({"held": deletes.guard.held()})))
}

async fn release(
    State(deletes): State<Deletes>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let key = deletes
        .auth
        .admin_write(&headers, "release the held deletes")?;
    let released = deletes.guard.release();
    tracing::warn!(target: "casement::admin", key, released, "held deletes released");
    Ok(Json(json!({"released": released})))
}

/// `casement release-deletes --url`: asks a running service to release its held deletes.
pub async fn remote(url: &str, api_key: Option<&str>) -> anyhow::Result<()> {
    let base = url.trim_end_matches('/');
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/admin/deletes/release"))
        .json(&json!({}));
    if let Some(key) = api_key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        anyhow::bail!(
            "{base}: {status}: {}",
            answer["error"]["message"].as_str().unwrap_or("no message")
        );
    }
    println!(
        "released: {} held deletes are applied now (and deletes go through for one window)",
        answer["released"]
    );
    Ok(())
}
