//! The HTTP API: routes, API keys, limits, the per-request deadline and request metrics.
//! Errors become responses in one place (`error.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use casement_store::Store;
use casement_text::{DocRef, Reader};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api::{DocumentAnswer, DocumentText, SearchRequest, SearchResponse, SectionAnswer};
use crate::auth::UserTokens;
use crate::config::{ApiKey, AuthConfig, QueryConfig};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::search::Searcher;

/// The OpenAPI document, kept in the repository (with the default limits) and served at
/// `/openapi.json` with the configured ones.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// [`OPENAPI`] with the limits of `config`, so that clients and fuzzers see the real ones.
pub fn openapi(config: &QueryConfig) -> String {
    let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(OPENAPI) else {
        return OPENAPI.to_owned();
    };
    let request = &mut doc["components"]["schemas"]["SearchRequest"]["properties"];
    let limits = &config.limits;
    request["query"]["maxLength"] = limits.max_query_chars.into();
    request["top_k"]["maximum"] = limits.max_top_k.into();
    request["window_radius"]["maximum"] = config.search.indexed_window_radius.into();
    request["token_budget"]["maximum"] = config.search.token_budget.into();
    request["doc_ids"]["maxItems"] = limits.max_doc_ids.into();
    request["min_revision"]["maxProperties"] = limits.max_doc_ids.into();
    request["metadata"]["maxProperties"] = config.store.indexed_metadata.len().into();
    serde_json::to_string_pretty(&doc).unwrap_or_else(|_| OPENAPI.to_owned())
}

/// Who is asking: the tenant their key is bound to, if any, what it may read, and the
/// key's name for the logs (`None` when no key is configured: an open API).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: Option<String>,
    pub key: Option<String>,
    /// The key's reader: its groups, or every document (of its tenant, when it has one).
    /// A person's token narrows it per request (`auth::reader`).
    pub reader: Reader,
    /// An operator's key (no tenant, no groups), or no key configured at all.
    pub operator: bool,
}

/// Everything a handler needs.
#[derive(Debug)]
pub struct App<S> {
    pub searcher: Searcher<S>,
    pub config: QueryConfig,
    pub metrics: Metrics,
    /// Set by the store probe; `/readyz` answers 503 while it is false.
    pub store_probe: casement_store::StoreProbe,
    /// The served OpenAPI document ([`openapi`]).
    pub openapi: String,
    /// Changes found at start (the all-in-one's watched folders, its journal) not yet
    /// applied: `/readyz` answers 503 until they are (0: caught up).
    pub catching_up: Arc<AtomicUsize>,
    /// The verifier of people's tokens (`[auth.jwt]`), when configured.
    pub users: Option<Arc<UserTokens>>,
}

impl<S> App<S> {
    /// The request's key and its reader (the key's, narrowed by a person's token).
    pub fn reader(&self, headers: &HeaderMap) -> Result<(Principal, Reader), ApiError> {
        let principal = self.config.auth.principal(headers)?;
        let reader = crate::auth::reader(&principal, self.users.as_deref(), headers)?;
        Ok((principal, reader))
    }
}

impl AuthConfig {
    /// Checks the `Authorization: Bearer` header against the configured keys (the scheme
    /// is case-insensitive, RFC 7235).
    pub fn principal(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        if self.keys.is_empty() {
            return Ok(Principal {
                tenant: None,
                key: None,
                reader: Reader::Operator,
                operator: true,
            });
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .ok_or(ApiError::Unauthorized)?;
        // Every key is compared, each in constant time over SHA-256 digests (fixed length:
        // neither how much of a key was right nor its length shows in the response time).
        let presented = Sha256::digest(token.as_bytes());
        let mut found = None;
        for (index, key) in self.keys.iter().enumerate() {
            let digest = Sha256::digest(key.token.expose().as_bytes());
            if bool::from(digest.as_slice().ct_eq(presented.as_slice())) {
                found = Some((index, key));
            }
        }
        found
            .map(|(index, k)| Principal {
                tenant: k.tenant.clone(),
                key: Some(k.name.clone().unwrap_or_else(|| format!("keys[{index}]"))),
                reader: k.groups.as_ref().map_or(Reader::Operator, |groups| {
                    Reader::groups(groups.iter().cloned())
                }),
                operator: k.is_operator(),
            })
            .ok_or(ApiError::Unauthorized)
    }

    /// For `/metrics` and `/openapi.json`: anyone unless `protect_ops`, then a key bound to
    /// no tenant.
    pub fn operator(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if !self.protect_ops || self.keys.is_empty() {
            return Ok(());
        }
        if self.principal(headers)?.operator {
            Ok(())
        } else {
            Err(ApiError::Forbidden(
                "this API key is bound to a tenant or to groups; /metrics and /openapi.json need \
                 an operator key (one with neither)"
                    .into(),
            ))
        }
    }

    /// Whether an operator key (one bound to no tenant and no groups) is configured: the
    /// admin routes are off without one.
    pub fn has_operator_key(&self) -> bool {
        self.keys.iter().any(ApiKey::is_operator)
    }

    /// For the admin routes (`/v1/admin/...`): an operator key. With none configured the
    /// routes are off (403), whatever the address: an open admin API can replace the
    /// index or send data where a caller says.
    pub fn admin(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        if !self.has_operator_key() {
            return Err(ApiError::Forbidden(
                "the admin routes are off: configure an operator key (an [[auth.keys]] entry \
                 with neither tenant nor groups) and send it as `Authorization: Bearer <key>`"
                    .into(),
            ));
        }
        let principal = self.principal(headers)?;
        if !principal.operator {
            return Err(ApiError::Forbidden(
                "this API key is bound to a tenant or to groups; the admin routes need an \
                 operator key (one with neither)"
                    .into(),
            ));
        }
        Ok(principal)
    }
}

impl AuthConfig {
    /// For an admin route that changes state: an operator key ([`AuthConfig::admin`]) and
    /// a request no web page could have made ([`check_state_changing`]). The key's name,
    /// for the log line of what it did; a refusal is logged here with `action`.
    pub fn admin_write(&self, headers: &HeaderMap, action: &str) -> Result<String, ApiError> {
        let checked = self.admin(headers).and_then(|principal| {
            check_state_changing(headers)?;
            Ok(principal)
        });
        match checked {
            Ok(principal) => Ok(principal.key.unwrap_or_default()),
            Err(error) => {
                self.refused(headers, &error, action);
                Err(error)
            }
        }
    }

    /// For an admin route that reads: as [`AuthConfig::admin`], a refusal logged.
    pub fn admin_read(&self, headers: &HeaderMap, action: &str) -> Result<String, ApiError> {
        match self.admin(headers) {
            Ok(principal) => Ok(principal.key.unwrap_or_default()),
            Err(error) => {
                self.refused(headers, &error, action);
                Err(error)
            }
        }
    }

    fn refused(&self, headers: &HeaderMap, error: &ApiError, action: &str) {
        let key = self
            .principal(headers)
            .ok()
            .and_then(|p| p.key)
            .unwrap_or_else(|| "none".into());
        tracing::warn!(target: "casement::admin", key, status = error.status().as_u16(),
            reason = %error, "admin request refused: {action}");
    }
}

/// The token of an `Authorization` value of the `Bearer` scheme, in any case.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// For every route that changes state (`POST /v1/events`, the admin routes): a JSON body
/// (`application/json` or a `+json` type such as `application/cloudevents+json`) and no
/// foreign `Origin`. A web page can make a browser post `text/plain` to a local instance
/// without asking first ("simple requests"); a JSON type makes the browser ask (CORS
/// preflight), which this server never grants, and a foreign `Origin` is refused outright.
pub fn check_state_changing(headers: &HeaderMap) -> Result<(), ApiError> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site.eq_ignore_ascii_case("cross-site")
    {
        return Err(ApiError::Forbidden(
            "cross-site requests are refused on routes that change state".into(),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .map(|(_, rest)| rest.trim_end_matches('/'));
        let same = matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h));
        if !same {
            return Err(ApiError::Forbidden(
                "requests from another origin (a web page) are refused on routes that change state"
                    .into(),
            ));
        }
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_json_media_type(content_type) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "send the body as JSON with `Content-Type: application/json` (or a `+json` type); got {}",
            if content_type.is_empty() {
                "none".to_owned()
            } else {
                format!("{:?}", content_type.chars().take(100).collect::<String>())
            }
        )));
    }
    Ok(())
}

/// `application/json`, or `application/<anything>+json`, with or without parameters.
pub fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json") && sub.len() > "+json".len())
}

/// The query API's router.
pub fn router<S: Store + 'static>(app: Arc<App<S>>) -> Router {
    router_with(app, Router::new())
}

/// The query API's router with `extra` routes (the all-in-one's webhook and admin routes)
/// merged in before the request-observing layer, so every route gets the same access
/// log line, `x-request-id` and request metrics.
pub fn router_with<S: Store + 'static>(app: Arc<App<S>>, extra: Router) -> Router {
    let body_limit = app.config.limits.max_body_bytes;
    Router::new()
        .route("/v1/search", post(search::<S>))
        .route("/v1/documents/{*doc_id}", get(document::<S>))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz::<S>))
        .route("/metrics", get(metrics_text::<S>))
        .route("/openapi.json", get(openapi_json::<S>))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(app.clone())
        .merge(extra)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app, observe::<S>))
}

async fn search<S: Store + 'static>(
    State(app): State<Arc<App<S>>>,
    headers: HeaderMap,
    body: Result<Json<SearchRequest>, JsonRejection>,
) -> Result<Json<SearchResponse>, ApiError> {
    let (principal, reader) = app.reader(&headers)?;
    let Json(request) = body?;
    let mut request = request.validate(
        &app.config.limits,
        &app.searcher.search_config(&app.config.search),
        app.config.rerank.by_default,
        &app.config.store.indexed_metadata,
    )?;
    if let Some(bound) = principal.tenant {
        match &request.tenant {
            Some(asked) if *asked != bound => {
                return Err(ApiError::Forbidden(format!(
                    "this API key is bound to another tenant than {asked:?}"
                )));
            }
            _ => request.tenant = Some(bound),
        }
    }
    request.reader = reader;
    let timeout = app.config.limits.request_timeout_ms;
    tokio::time::timeout(
        app.config.limits.request_timeout(),
        app.searcher.search(request),
    )
    .await
    .map_err(|_| ApiError::Timeout(timeout))?
    .map(Json)
}

/// `GET /v1/documents/{doc_id}?tenant=`: a document is its id within its tenant: the key's
/// tenant, or for a key bound to none, `tenant` (no tenant when left out).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentQuery {
    tenant: Option<String>,
}

async fn document<S: Store + 'static>(
    State(app): State<Arc<App<S>>>,
    headers: HeaderMap,
    Path(doc_id): Path<String>,
    query: Result<Query<DocumentQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (principal, reader) = app.reader(&headers)?;
    let Query(query) = query.map_err(|e| ApiError::Malformed(e.body_text()))?;
    let tenant = match (principal.tenant, query.tenant) {
        (Some(bound), Some(asked)) if bound != asked => {
            return Err(ApiError::Forbidden(format!(
                "this API key is bound to another tenant than {asked:?}"
            )));
        }
        (Some(bound), _) => Some(bound),
        (None, asked) => asked,
    };
    let index = app.searcher.index();
    let store = &index.store;
    // `…/text` is the document's citation text, unless a document has that very id.
    // A document the reader may not read is answered as one that is not indexed: 404,
    // never 403 (which would say that it exists).
    let readable =
        |state: Option<casement_text::DocumentState>| state.filter(|s| s.readable_by(&reader));
    let exact = readable(
        store
            .document(DocRef::new(tenant.as_deref(), &doc_id))
            .await
            .map_err(ApiError::store)?,
    );
    let (doc_id, text_view, state) = match (exact, doc_id.strip_suffix("/text")) {
        (Some(state), _) => (doc_id.clone(), false, Some(state)),
        (None, Some(base)) => {
            let state = readable(
                store
                    .document(DocRef::new(tenant.as_deref(), base))
                    .await
                    .map_err(ApiError::store)?,
            );
            (base.to_owned(), true, state)
        }
        (None, None) => (doc_id.clone(), false, None),
    };
    let doc = DocRef::new(tenant.as_deref(), &doc_id);
    let state =
        state.ok_or_else(|| ApiError::NotFound(format!("document {doc_id:?} is not indexed")))?;
    let mut records = store.records(doc).await.map_err(ApiError::store)?;
    if text_view {
        // Only the records of the revision the state names (a write may be under way).
        records.retain(|r| r.revision == state.revision);
        return Ok(Json(DocumentText {
            doc_id: state.doc_id,
            revision: state.revision,
            tenant: state.tenant,
            text: casement_text::citation_text(&records),
        })
        .into_response());
    }
    records.sort_by_key(|r| (r.position.section, r.position.index));
    let mut sections: Vec<SectionAnswer> = Vec::new();
    for record in &records {
        match sections.last_mut() {
            Some(last) if last.section_id == record.section_id => last.sentences += 1,
            _ => sections.push(SectionAnswer {
                section_id: record.section_id.clone(),
                path: record.section_path.clone(),
                sentences: 1,
            }),
        }
    }
    Ok(Json(DocumentAnswer {
        doc_id: state.doc_id,
        revision: state.revision,
        deleted: state.deleted,
        title: state.title,
        url: state.url,
        revision_url: state.revision_url,
        tenant: state.tenant,
        sentence_count: records.len(),
        sections,
    })
    .into_response())
}

async fn readyz<S: Store>(State(app): State<Arc<App<S>>>) -> Response {
    let catching_up = app.catching_up.load(Ordering::SeqCst);
    if catching_up > 0 {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("models_loaded: ok\nstore_reachable: ok\ncaught_up: no (catching up {catching_up} changes found at start)\n"),
        )
            .into_response();
    }
    if app.store_probe.reachable() {
        "models_loaded: ok\nstore_reachable: ok\n".into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "models_loaded: ok\nstore_reachable: no\n",
        )
            .into_response()
    }
}

async fn metrics_text<S>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    if let Err(error) = app.config.auth.operator(&headers) {
        return error.into_response();
    }
    casement_service::metrics(&app.metrics.registry).into_response()
}

async fn openapi_json<S>(State(app): State<Arc<App<S>>>, headers: HeaderMap) -> Response {
    if let Err(error) = app.config.auth.operator(&headers) {
        return error.into_response();
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        app.openapi.clone(),
    )
        .into_response()
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let mut response = ApiError::Malformed(format!(
        "{method} is not allowed on {}; see /openapi.json",
        uri.path()
    ))
    .into_response();
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

/// The header that carries a request's id, in and out.
pub const REQUEST_ID: &str = "x-request-id";

/// The caller's `x-request-id` when it is a short printable token, else a new one: unique
/// in this process, and across restarts (it starts from the process's start time).
fn request_id(headers: &HeaderMap) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if let Some(id) = headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
    {
        return id.to_owned();
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{:x}-{n}", process_started_ms())
}

fn process_started_ms() -> u64 {
    static STARTED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *STARTED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    })
}

/// Counts every request by route template and status, times it by route and status class,
/// echoes its request id in `x-request-id`, and logs one access line (target
/// `casement::access`: `info` for the API, `debug` for probes and scrapes).
async fn observe<S>(State(app): State<Arc<App<S>>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let id = request_id(request.headers());
    let method = request.method().clone();
    let started = Instant::now();
    let mut response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status();
    app.metrics
        .request_duration
        .with_label_values(&[route.as_str(), status_class(status)])
        .observe(elapsed.as_secs_f64());
    app.metrics
        .requests
        .with_label_values(&[route.as_str(), status.as_str()])
        .inc();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    let ms = elapsed.as_secs_f64() * 1000.0;
    if matches!(route.as_str(), "/healthz" | "/readyz" | "/metrics") {
        tracing::debug!(target: "casement::access", request_id = %id, %method, route, status = status.as_u16(), ms, "request");
    } else {
        tracing::info!(target: "casement::access", request_id = %id, %method, route, status = status.as_u16(), ms, "request");
    }
    response
}

/// `2xx`, `4xx`, `5xx` (and `1xx`, `3xx`, which this server does not answer).
pub fn status_class(status: StatusCode) -> &'static str {
    match status.as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}
