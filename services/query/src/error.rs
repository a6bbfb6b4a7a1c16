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
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Malformed(_) => StatusCode::BAD_REQUEST,
            Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::RevisionNotIndexed { .. } => StatusCode::CONFLICT,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed_request",
            Self::Invalid(_) => "invalid_request",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::TooLarge(_) => "body_too_large",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::RevisionNotIndexed { .. } => "revision_not_indexed",
            Self::Timeout(_) => "timeout",
            Self::Unavailable(_) => "unavailable",
        }
    }

    pub fn store(error: casement_store::Error) -> Self {
        Self::Unavailable(format!("store: {error}"))
    }

    pub fn model(error: casement_inference::Error) -> Self {
        Self::Unavailable(format!("model: {error}"))
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let text = rejection.body_text();
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
        (self.status(), Json(body)).into_response()
    }
}
