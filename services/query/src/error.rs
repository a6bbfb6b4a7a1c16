//! Every error the API answers with, and its status code: the one place they are mapped.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::api::{ErrorBody, ErrorDetail};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON, or not the JSON of this request.
    #[error("{0}")]
    Malformed(String),
    /// Valid JSON whose values break a rule or a limit.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("missing or unknown API key; send `Authorization: Bearer <key>`")]
    Unauthorized,
    /// The `X-Casement-User` token is missing what it needs, expired, or not signed by a
    /// configured key: never read as the bot's key alone.
    #[error("X-Casement-User: {0}")]
    UserToken(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// `min_revision` was not reached within the wait.
    #[error("document {doc_id} is indexed at revision {indexed} (asked for at least {wanted})")]
    RevisionNotIndexed {
        doc_id: String,
        indexed: u64,
        wanted: u64,
    },
    #[error("the request took longer than {0} ms")]
    Timeout(u64),
    /// The store or a model failed; the message says which.
    #[error("{0}")]
    Unavailable(String),
    /// The request conflicts with work under way (an operator's migration).
    #[error("{0}")]
    Conflict(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Malformed(_) => StatusCode::BAD_REQUEST,
            Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized | Self::UserToken(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::RevisionNotIndexed { .. } => StatusCode::CONFLICT,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Conflict(_) => StatusCode::CONFLICT,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed_request",
            Self::Invalid(_) => "invalid_request",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::TooLarge(_) => "body_too_large",
            Self::Unauthorized => "unauthorized",
            Self::UserToken(_) => "invalid_user_token",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::RevisionNotIndexed { .. } => "revision_not_indexed",
            Self::Timeout(_) => "timeout",
            Self::Unavailable(_) => "unavailable",
            Self::Conflict(_) => "conflict",
        }
    }

    /// The store failed: the detail (which may name files or the backend's internals) goes
    /// to the log, the caller reads which part failed and that a retry may work.
    pub fn store(error: casement_store::Error) -> Self {
        tracing::warn!(%error, "store error");
        Self::Unavailable("the index store is unavailable; retry later".into())
    }

    /// A model failed: as [`ApiError::store`].
    pub fn model(error: casement_inference::Error) -> Self {
        tracing::warn!(%error, "model error");
        Self::Unavailable("the model could not serve this request; retry later".into())
    }
}

/// What a 503 asks the caller to wait before trying again (`Retry-After`, seconds).
pub const RETRY_AFTER_SECS: &str = "1";

/// A serde or axum message about a request body, as an API client reads it: JSON's type
/// names instead of Rust's (`u32`, `struct SearchRequest`, `a sequence`), without axum's
/// prefix. The field path, the JSON position and serde's wording otherwise stay.
pub fn client_message(text: &str) -> String {
    let mut text = text;
    for prefix in [
        "Failed to deserialize the JSON body into the target type: ",
        "Failed to parse the request body as JSON: ",
        "Failed to buffer the request body: ",
    ] {
        text = text.strip_prefix(prefix).unwrap_or(text);
    }
    let mut out = text.to_owned();
    // Whole words only: `u32` but not `u320`.
    const WORDS: [(&str, &str); 22] = [
        ("expected u8", "expected a non-negative integer"),
        ("expected u16", "expected a non-negative integer"),
        ("expected u32", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected usize", "expected a non-negative integer"),
        ("expected i8", "expected an integer"),
        ("expected i16", "expected an integer"),
        ("expected i32", "expected an integer"),
        ("expected i64", "expected an integer"),
        ("expected isize", "expected an integer"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a borrowed string", "expected a string"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected an object"),
        ("expected a tuple", "expected an array"),
        ("invalid type: map", "invalid type: object"),
        ("invalid type: sequence", "invalid type: array"),
        ("invalid type: unit value", "invalid type: null"),
        ("invalid type: floating point", "invalid type: number"),
        ("invalid type: newtype struct", "invalid type: value"),
        ("expected unit", "expected null"),
    ];
    for (word, plain) in WORDS {
        out = replace_word(&out, word, plain);
    }
    // `expected struct SearchRequest`, `untagged enum Filter`: the type's name is ours.
    for (word, plain) in [
        ("expected struct ", "expected an object"),
        ("expected enum ", "expected one of the accepted values"),
        (
            "data did not match any variant of untagged enum ",
            "not one of the accepted forms",
        ),
    ] {
        while let Some(at) = out.find(word) {
            let name_end = out[at + word.len()..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(out.len(), |end| at + word.len() + end);
            out.replace_range(at..name_end, plain);
        }
    }
    out
}

fn replace_word(text: &str, word: &str, plain: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let after = &rest[at + word.len()..];
        let whole = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if whole { plain } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let text = client_message(&rejection.body_text());
        match rejection {
            JsonRejection::JsonSyntaxError(_) => Self::Malformed(text),
            JsonRejection::JsonDataError(_) => Self::Invalid(text),
            JsonRejection::MissingJsonContentType(_) => Self::UnsupportedMediaType(
                "send the body as JSON with `Content-Type: application/json`".into(),
            ),
            JsonRejection::BytesRejection(_)
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Self::TooLarge(format!("request body too large: {text}"))
            }
            _ => Self::Malformed(text),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Unavailable(message) = &self {
            tracing::warn!(%message, "request failed");
        }
        let (doc_id, indexed_revision) = match &self {
            Self::RevisionNotIndexed {
                doc_id, indexed, ..
            } => (Some(doc_id.clone()), Some(*indexed)),
            _ => (None, None),
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code().to_owned(),
                message: self.to_string(),
                doc_id,
                indexed_revision,
            },
        };
        let mut response = (self.status(), Json(body)).into_response();
        if self.status() == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        response
    }
}
