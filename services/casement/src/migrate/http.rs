//! The migration routes of `casement run` (`/v1/admin/migrations`, its rollback, its
//! status; [`super::online`] does the work), and `casement migrate --url`, their client.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use casement_pipeline::migrate::Pass;
use casement_query::error::ApiError;
use serde::{Deserialize, Serialize};

use super::gate::Gate;
use super::online::{MAX_KEEP_HOURS, Online};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Idle,
    Building,
    Gating,
    Swapping,
    Swapped,
    Refused,
    RollingBack,
    RolledBack,
    Failed,
    /// Recorded as under way in the serving pointer, run by no one (the service stopped
    /// during it): the same request resumes it.
    Interrupted,
}

/// What `GET /v1/admin/migrations` answers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    pub phase: Phase,
    /// The index searches read now.
    pub serving: String,
    /// The index being built (or the one a rollback returns to).
    pub target: Option<String>,
    pub set: Vec<String>,
    pub passes: Vec<Pass>,
    /// The pass under way: documents copied of those to copy, sentences embedded.
    pub progress: Option<[usize; 3]>,
    /// Sentences embedded per second over the copy passes and the index build.
    pub sentences_per_second: Option<f64>,
    pub gate: Option<Gate>,
    /// How long the swap held new events back (the pipeline paused for the last copy).
    pub pause_seconds: Option<f64>,
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrateRequest {
    /// The new index's settings, `section.key=value`.
    pub set: Vec<String>,
    #[serde(default)]
    pub force: bool,
    #[serde(default = "default_margin")]
    pub margin: f64,
    #[serde(default = "default_keep_hours")]
    pub keep_hours: u64,
}

fn default_margin() -> f64 {
    0.02
}

fn default_keep_hours() -> u64 {
    168
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    #[serde(default = "default_keep_hours")]
    pub keep_hours: u64,
}

/// No body is the documented default: the replaced index kept for a week.
impl Default for RollbackRequest {
    fn default() -> Self {
        Self {
            keep_hours: default_keep_hours(),
        }
    }
}

/// The fewest hours an API caller may keep the replaced index: a caller with the key
/// cannot delete the index the service was serving at once (`casement migrate` on the
/// command line may: its operator has the data directory anyway).
pub const MIN_API_KEEP_HOURS: u64 = 24;

/// What an API caller may change: the settings a migration is for (the model directory,
/// its precision and what shapes its vectors: batch size, for int8's batch-independence,
/// and token limit; the window radius; the enrichment mode and prompt version). URLs, key
/// variables and endpoints come only from the configuration file: a caller who could set
/// them could send the index's text, every query and a configured secret to a host of
/// their choosing.
pub const API_SETTABLE: [&str; 8] = [
    "embedder.model_dir",
    "embedder.precision",
    "embedder.batch_size",
    "embedder.max_tokens",
    "text.window_radius",
    "search.indexed_window_radius",
    "enrich.mode",
    "enrich.llm.prompt_version",
];

/// Refuses a pair an API caller may not set (the whole key must be one of
/// [`API_SETTABLE`]: a table value such as `embedder={…}` is not).
pub fn check_api_settable(set: &[String]) -> Result<(), ApiError> {
    for pair in set {
        let key = pair
            .split_once('=')
            .map_or(pair.as_str(), |(k, _)| k)
            .trim();
        if !API_SETTABLE
            .iter()
            .any(|allowed| key.eq_ignore_ascii_case(allowed))
        {
            return Err(ApiError::Invalid(format!(
                "`set`: {:?} cannot be changed through the API; it may set {} (URLs, keys \
                 and endpoints come only from the configuration file)",
                key.chars().take(100).collect::<String>(),
                API_SETTABLE.join(", ")
            )));
        }
    }
    Ok(())
}

pub fn router(online: Arc<Online>) -> Router {
    Router::new()
        .route("/v1/admin/migrations", post(start).get(status))
        .route("/v1/admin/migrations/rollback", post(rollback))
        .with_state(online)
}

async fn start(
    State(online): State<Arc<Online>>,
    headers: HeaderMap,
    body: Result<Json<MigrateRequest>, JsonRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let key = online.auth.admin_write(&headers, "start a migration")?;
    let Json(request) = body?;
    if request.set.is_empty() {
        return Err(ApiError::Invalid(
            "`set` names no setting of the new index (e.g. [\"embedder.precision=int8\"])".into(),
        ));
    }
    check_api_settable(&request.set)?;
    if !(0.0..=1.0).contains(&request.margin) {
        return Err(ApiError::Invalid("`margin` must be between 0 and 1".into()));
    }
    check_keep_hours(request.keep_hours)?;
    tracing::info!(target: "casement::admin", key, set = ?request.set, force = request.force,
        keep_hours = request.keep_hours, "migration requested");
    Ok((StatusCode::ACCEPTED, Json(online.start(request)?)))
}

fn check_keep_hours(hours: u64) -> Result<(), ApiError> {
    if !(MIN_API_KEEP_HOURS..=MAX_KEEP_HOURS).contains(&hours) {
        return Err(ApiError::Invalid(format!(
            "`keep_hours` must be between {MIN_API_KEEP_HOURS} and {MAX_KEEP_HOURS} (the \
             replaced index is what a rollback needs; `casement migrate` on the command line \
             can keep it for less)"
        )));
    }
    Ok(())
}

/// The body is optional (`{}` or none: the defaults).
async fn rollback(
    State(online): State<Arc<Online>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    let key = online.auth.admin_write(&headers, "roll back")?;
    let request: RollbackRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RollbackRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            let message = casement_query::error::client_message(&e.to_string());
            if e.is_data() {
                ApiError::Invalid(message)
            } else {
                ApiError::Malformed(message)
            }
        })?
    };
    check_keep_hours(request.keep_hours)?;
    tracing::info!(target: "casement::admin", key, keep_hours = request.keep_hours, "rollback requested");
    Ok((
        StatusCode::ACCEPTED,
        Json(online.start_rollback(request).await?),
    ))
}

async fn status(
    State(online): State<Arc<Online>>,
    headers: HeaderMap,
) -> Result<Json<Status>, ApiError> {
    online.auth.admin_read(&headers, "migration status")?;
    Ok(Json(online.status().await))
}

/// `casement migrate --url`: the same through a running service's API, following its
/// status until it ends. Returns the exit code.
pub async fn remote(
    url: &str,
    api_key: Option<&str>,
    body: serde_json::Value,
    rollback: bool,
) -> anyhow::Result<u8> {
    let http = reqwest::Client::new();
    let base = url.trim_end_matches('/');
    let path = if rollback {
        format!("{base}/v1/admin/migrations/rollback")
    } else {
        format!("{base}/v1/admin/migrations")
    };
    let authorised = |request: reqwest::RequestBuilder| match api_key {
        Some(key) => request.bearer_auth(key),
        None => request,
    };
    let response = authorised(http.post(&path).json(&body)).send().await?;
    let code = response.status();
    let answer: serde_json::Value = response.json().await.unwrap_or_default();
    if !code.is_success() {
        anyhow::bail!(
            "{path}: {code}: {}",
            answer["error"]["message"].as_str().unwrap_or("no message")
        );
    }
    let mut said = String::new();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let status: serde_json::Value = authorised(http.get(format!("{base}/v1/admin/migrations")))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let phase = status["phase"].as_str().unwrap_or("unknown").to_owned();
        let line = match status["progress"].as_array() {
            Some(p) if p.len() == 3 => format!(
                "{phase}: {}/{} documents, {} sentences embedded",
                p[0], p[1], p[2]
            ),
            _ => phase.clone(),
        };
        if line != said {
            eprintln!("{line}");
            said = line;
        }
        match phase.as_str() {
            "swapped" | "rolled_back" => {
                print_gate(&status);
                println!(
                    "{phase}: {} now serves {}",
                    base,
                    status["serving"].as_str().unwrap_or("?")
                );
                return Ok(super::SWAPPED);
            }
            "refused" => {
                print_gate(&status);
                println!(
                    "refused by the gate: {} keeps serving {}",
                    base,
                    status["serving"].as_str().unwrap_or("?")
                );
                return Ok(super::REFUSED);
            }
            "failed" => anyhow::bail!("{}", status["error"].as_str().unwrap_or("failed")),
            _ => {}
        }
    }
}

fn print_gate(status: &serde_json::Value) {
    let gate = &status["gate"];
    if let (Some(old), Some(new)) = (gate["serving"].as_object(), gate["new"].as_object()) {
        println!("gate ({} queries, k = {}):", old["queries"], old["k"]);
        println!("  {:<12} {:>8} {:>8}", "", "serving", "new");
        for key in ["recall", "mrr", "failures"] {
            println!(
                "  {key:<12} {:>8} {:>8}",
                old[key].to_string(),
                new[key].to_string()
            );
        }
    }
}
