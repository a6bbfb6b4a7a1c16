//! `POST /v1/events`: one change event per request, in any format the Kafka indexer
//! decodes (native, CloudEvents, Debezium, MediaWiki `page_change`; detected unless
//! `events.format` says). The event goes through the same pipeline as every other source
//! (decode, fence, dead letters, metrics); the request waits for its outcome:
//!
//! | outcome | status | body |
//! |---|---|---|
//! | applied, deleted | 200 | `status`, `doc_id`, `revision`, sentence decisions |
//! | stale (not newer than the indexed revision) | 200 | `status: "stale"` and why |
//! | rejected (dead-lettered) | 400 not JSON or UTF-8, 413 too large, 422 otherwise | `status: "rejected"`, `error.code` (the reason), `error.message` |
//! | still in the pipeline after `sources.webhook.wait_ms`, kept in the journal | 202 | `status: "accepted"` |
//! | still in the pipeline, and the journal is full (or cannot be written) | 503 + `Retry-After` | `error.code: "unavailable"` |
//!
//! A 202 is a promise: the body is synced to the journal of accepted events
//! (`sources/journal.rs`) before the answer, and replayed at the next start if the process
//! stops before the event is applied. Rejected events are appended to the dead-letter file,
//! bodies over the size limit too (without their bytes).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use casement_pipeline::{Decision, Finished, Outcome, Reason, SourceId};
use casement_query::config::AuthConfig;
use casement_query::error::ApiError;
use serde_json::{Value, json};

use crate::metrics::LocalMetrics;
use crate::sources::Feeder;
use crate::sources::dead_letters::DeadLetterFile;
use crate::sources::journal::{Journal, KeepError};

/// The paths and schemas `/v1/events` adds to the query service's OpenAPI document.
const OPENAPI_EVENTS: &str = include_str!("../openapi-events.json");

/// The OpenAPI paths and schemas of `/v1/admin/migrations` (`crate::migrate::http`).
const OPENAPI_MIGRATIONS: &str = include_str!("../openapi-migrations.json");

/// The query service's OpenAPI document (with the configured limits) plus the webhook's
/// routes (when it is on) and the migration routes.
pub fn openapi(config: &casement_query::QueryConfig, webhook: bool) -> String {
    let query = casement_query::http::openapi(config);
    let (Ok(mut doc), Ok(events), Ok(admin)) = (
        serde_json::from_str::<Value>(&query),
        serde_json::from_str::<Value>(OPENAPI_EVENTS),
        serde_json::from_str::<Value>(OPENAPI_MIGRATIONS),
    ) else {
        return query;
    };
    doc["info"]["title"] = "Casement all-in-one API".into();
    if webhook {
        merge_openapi(&mut doc, &events);
        if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
            schemas.insert("NativeEvent".into(), native_event_component());
        }
    }
    merge_openapi(&mut doc, &admin);
    serde_json::to_string_pretty(&doc).unwrap_or(query)
}

/// Adds a fragment's `tags`, `paths` and `schemas` to an OpenAPI document.
fn merge_openapi(doc: &mut Value, extra: &Value) {
    if let (Some(tags), Some(more)) = (doc["tags"].as_array_mut(), extra["tags"].as_array()) {
        tags.extend(more.iter().cloned());
    }
    if let (Some(paths), Some(more)) = (doc["paths"].as_object_mut(), extra["paths"].as_object()) {
        paths.extend(more.clone());
    }
    if let (Some(schemas), Some(more)) = (
        doc["components"]["schemas"].as_object_mut(),
        extra["schemas"].as_object(),
    ) {
        schemas.extend(more.clone());
    }
}

/// The native event's JSON Schema in OpenAPI 3.0's dialect: the same properties, types,
/// enums and limits, without the 2020-12 keywords 3.0 lacks (`$schema`, `$id`, and the
/// `if`/`then` that makes `format` and `content` required for an upsert, said in the
/// description instead; the decoder enforces it).
pub fn native_event_component() -> Value {
    let Ok(Value::Object(mut schema)) =
        serde_json::from_str::<Value>(casement_events::NATIVE_EVENT_SCHEMA)
    else {
        return Value::Object(serde_json::Map::new());
    };
    for keyword in ["$schema", "$id", "if", "then"] {
        schema.remove(keyword);
    }
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    schema.insert(
        "description".into(),
        format!(
            "{description} An upsert also needs `format` and `content`. (shared/events/schema/native-event.schema.json)"
        )
        .trim_start()
        .into(),
    );
    Value::Object(schema)
}

#[derive(Debug)]
pub struct Webhook {
    pub feeder: Feeder,
    pub dead_letters: Arc<DeadLetterFile>,
    /// Where a 202-accepted event is kept until it is applied.
    pub journal: Arc<Journal>,
    pub auth: AuthConfig,
    pub max_event_bytes: usize,
    /// How bodies decode (to check a tenant-bound key's event before it is taken).
    pub decode: casement_events::DecodeConfig,
    pub wait: Duration,
    pub metrics: LocalMetrics,
    /// Counts an oversize body as a dead letter, like one the pipeline rejects.
    pub pipeline_metrics: casement_pipeline::Metrics,
}

pub fn router(webhook: Arc<Webhook>) -> Router {
    // One byte over the limit is enough to know the body is too large.
    let limit = webhook.max_event_bytes + 1;
    Router::new()
        .route("/v1/events", post(receive))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(webhook)
}

async fn receive(
    State(hook): State<Arc<Webhook>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let response = handle(&hook, &headers, body).await;
    hook.metrics
        .webhook_requests
        .with_label_values(&[response.status().as_str()])
        .inc();
    response
}

async fn handle(
    hook: &Webhook,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let principal = match hook.auth.principal(headers) {
        Err(error) => return error.into_response(),
        Ok(principal) => principal,
    };
    // A key bound to groups is a reader's (a bot's): it may not write what others read,
    // nor say who may read it.
    if matches!(principal.reader, casement_text::Reader::Groups(_)) {
        return ApiError::Forbidden(
            "this API key is bound to groups: a reader's key posts no events (use a key \
             without groups)"
                .into(),
        )
        .into_response();
    }
    // A web page must not be able to make a browser post events (a delete at a high
    // revision fences every later edit).
    if let Err(error) = casement_query::http::check_state_changing(headers) {
        return error.into_response();
    }
    let body = match body {
        Ok(body) if body.len() > hook.max_event_bytes => return too_large(hook, body.len()).await,
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return too_large(hook, hook.max_event_bytes + 1).await;
        }
        Err(rejection) => {
            return ApiError::Malformed(casement_query::error::client_message(
                &rejection.body_text(),
            ))
            .into_response();
        }
    };
    // A key bound to a tenant writes only that tenant's documents. (A body that does not
    // decode goes on to the pipeline, which rejects it to the dead letters as usual.)
    if let Some(bound) = principal.tenant.as_deref()
        && let Ok(event) = casement_events::decode(Some(&body), None, &hook.decode)
        && event.tenant() != Some(bound)
    {
        let asked = event
            .tenant()
            .map_or("no tenant".to_owned(), |t| format!("tenant {t:?}"));
        return ApiError::Forbidden(format!(
            "this API key writes only tenant {bound:?}'s documents; the event is for {asked}"
        ))
        .into_response();
    }
    // Freshness runs from the change at the source when the event says when that was.
    let changed = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|json| crate::sources::event_time_ms(&json));
    let sent = hook
        .feeder
        .send_waiting(SourceId::Webhook, body.to_vec(), false, changed)
        .await;
    let (offset, mut answer) = match sent {
        Ok(sent) => sent,
        Err(error) => return unavailable(format!("{error:#}")),
    };
    match tokio::time::timeout(hook.wait, &mut answer).await {
        Ok(Ok(finished)) => outcome(&finished),
        Ok(Err(_)) => unavailable("the pipeline stopped; post the event again".into()),
        Err(_) => match hook.journal.keep(offset, body).await {
            Ok(entry) => {
                hook.journal.forget_when_done(entry, answer);
                (
                    StatusCode::ACCEPTED,
                    Json(json!({"status": "accepted",
                        "message": format!("event {offset} is still in the pipeline after {} ms; \
                            it is kept in the journal and will be applied, also after a restart",
                            hook.wait.as_millis())})),
                )
                    .into_response()
            }
            Err(error) => {
                if let KeepError::Io(error) = &error {
                    tracing::error!(%error, "cannot keep an accepted event; answering 503");
                }
                // The journal's I/O error names server paths: it is in the log above.
                let why = match &error {
                    KeepError::Full { .. } | KeepError::LowDisk { .. } => error.to_string(),
                    KeepError::Io(_) => "the journal of accepted events cannot be written".into(),
                };
                unavailable(format!(
                    "{why}; the event could not be promised: post it again later (a repeat \
                     is safe, revisions are fenced)"
                ))
            }
        },
    }
}

/// 503 with `Retry-After`: nothing was promised, the caller posts the event again.
fn unavailable(message: String) -> Response {
    let mut response = ApiError::Unavailable(message).into_response();
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from_static(RETRY_AFTER_SECS),
    );
    response
}

/// What a 503 asks the caller to wait before posting again.
const RETRY_AFTER_SECS: &str = "5";

/// A body over the limit: recorded in the dead-letter file (without its bytes), then 413.
async fn too_large(hook: &Webhook, size: usize) -> Response {
    let detail = crate::sources::dead_letters::record_too_large(
        &hook.dead_letters,
        &hook.pipeline_metrics,
        SourceId::Webhook,
        size,
        hook.max_event_bytes,
    )
    .await;
    rejected(StatusCode::PAYLOAD_TOO_LARGE, Reason::TooLarge, &detail)
}

fn rejected(status: StatusCode, reason: Reason, message: &str) -> Response {
    // The dead letter keeps the decoder's own words; the caller reads them in JSON's terms
    // (no Rust type names), and not where the server keeps its files.
    let body = json!({
        "status": "rejected",
        "error": {"code": reason.as_str(), "message": casement_query::error::client_message(message)},
        "dead_lettered": true,
    });
    (status, Json(body)).into_response()
}

fn outcome(finished: &Finished) -> Response {
    let (doc_id, revision) = finished
        .document
        .clone()
        .map_or((None, None), |(d, r)| (Some(d), r));
    let mut body = json!({"doc_id": doc_id, "revision": revision});
    body["status"] = finished.outcome.label().into();
    match finished.outcome {
        Outcome::Applied(d) | Outcome::Deleted(d) => {
            let sentences: serde_json::Map<String, Value> = d
                .counts()
                .map(|(decision, n): (Decision, usize)| (decision.as_str().to_owned(), n.into()))
                .collect();
            body["sentences"] = sentences.into();
        }
        Outcome::Stale { indexed_revision } => {
            body["indexed_revision"] = indexed_revision.into();
            body["message"] = Value::from(
                "not newer than the indexed revision (or the document's deletion): nothing changed",
            );
        }
        Outcome::DeadLettered(reason) => {
            let status = match reason {
                Reason::NotJson | Reason::NotUtf8 => StatusCode::BAD_REQUEST,
                Reason::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            };
            let message = finished.detail.clone().unwrap_or_default();
            return rejected(status, reason, &message);
        }
    }
    (StatusCode::OK, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    match (key.as_str(), inner) {
                        ("$ref", Value::String(target)) => out.push(target),
                        _ => refs(inner, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| refs(item, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_has_tags_no_fixed_server_and_the_native_event_schema() {
        let config = casement_query::QueryConfig::default();
        let doc: Value = serde_json::from_str(&openapi(&config, true)).unwrap();
        assert!(
            doc.get("servers").is_none(),
            "clients use the origin they fetched the document from"
        );
        let tags: Vec<&str> = doc["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        for (path, operations) in doc["paths"].as_object().unwrap() {
            for (method, operation) in operations.as_object().unwrap() {
                let used = operation["tags"].as_array().expect("tagged");
                assert!(!used.is_empty(), "{method} {path}");
                for tag in used {
                    assert!(
                        tags.contains(&tag.as_str().unwrap()),
                        "{method} {path}: {tag}"
                    );
                }
            }
        }
        let mut targets = Vec::new();
        refs(&doc, &mut targets);
        for target in targets {
            let pointer = target.strip_prefix('#').expect("local reference");
            assert!(doc.pointer(pointer).is_some(), "{target} resolves");
        }

        // The request body is the native event's schema file (or another format).
        let body = &doc["paths"]["/v1/events"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"]["anyOf"];
        assert_eq!(body[0]["$ref"], "#/components/schemas/NativeEvent");
        let file: Value = serde_json::from_str(casement_events::NATIVE_EVENT_SCHEMA).unwrap();
        let component = &doc["components"]["schemas"]["NativeEvent"];
        for key in ["properties", "required", "additionalProperties", "type"] {
            assert_eq!(component[key], file[key], "{key} as in the schema file");
        }
        for keyword in ["$schema", "$id", "if", "then"] {
            assert!(
                component.get(keyword).is_none(),
                "{keyword}: not OpenAPI 3.0"
            );
        }

        let query_only: Value = serde_json::from_str(&openapi(&config, false)).unwrap();
        assert!(query_only["paths"].get("/v1/events").is_none());
        assert!(
            query_only["components"]["schemas"]
                .get("NativeEvent")
                .is_none()
        );
    }
}
