"""The exceptions this client raises, one type per thing a caller handles differently.

Every answer of the server that is an error becomes an :class:`APIError` carrying the
server's ``error.code`` and ``error.message`` (its JSON body, ``{"error": {"code",
"message", ...}}``); 4xx answers are :class:`ClientError` subclasses, 5xx
:class:`ServerError`. A server that cannot be reached is :class:`CasementConnectionError`.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional


class CasementError(Exception):
    """Base of every exception of this package."""


class CasementConnectionError(CasementError):
    """The server could not be reached (or dropped the connection), also after retries."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class CasementTimeoutError(CasementConnectionError):
    """No answer within the client's ``timeout`` (not retried: the server may still be
    working on the request)."""


class APIError(CasementError):
    """The server answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        code: Optional[str],
        body: Any,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        #: The server's ``error.message`` (or the body's text when it is not JSON).
        self.message = message
        self.status_code = status_code
        #: The server's stable ``error.code``, e.g. ``invalid_request``.
        self.code = code
        #: The whole decoded JSON body (or its text).
        self.body = body
        #: How many requests were made (more than one after retries).
        self.attempts = attempts

    def __str__(self) -> str:
        code = f" {self.code}" if self.code else ""
        return f"{self.status_code}{code}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status_code={self.status_code!r}, code={self.code!r}, "
            f"message={self.message!r})"
        )


class ClientError(APIError):
    """A 4xx answer: the request is at fault and will not succeed as it is."""


class InvalidRequestError(ClientError):
    """400, 413, 415 or 422: malformed, too large or breaking a rule (``top_k`` 0, an
    empty query, a ``window_radius`` over the indexed one, ...)."""


class EventRejectedError(InvalidRequestError):
    """``POST /v1/events`` rejected the event (400/413/422, ``status: rejected``); the
    server dead-lettered it. ``code`` is the reason: ``not_json``, ``not_utf8``,
    ``too_large``, ``schema``, ``no_content``, ``unsupported``, ``text``."""


class AuthenticationError(ClientError):
    """401: missing or unknown API key."""


class PermissionDeniedError(ClientError):
    """403: the API key is bound to another tenant (or is not an operator's)."""


class NotFoundError(ClientError):
    """404: no such document (or route)."""


class RevisionNotIndexedError(ClientError):
    """409: ``min_revision`` was not reached within the server's wait
    (``limits.max_wait_ms``). ``doc_id`` is the document that lags and
    ``indexed_revision`` the revision the index holds."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        code: Optional[str],
        body: Any,
        attempts: int = 1,
        doc_id: Optional[str] = None,
        indexed_revision: Optional[int] = None,
    ) -> None:
        super().__init__(message, status_code=status_code, code=code, body=body, attempts=attempts)
        self.doc_id = doc_id
        self.indexed_revision = indexed_revision


class RateLimitedError(ClientError):
    """429, still after the retries."""


class ServerError(APIError):
    """A 5xx answer."""


class UnavailableError(ServerError):
    """503, still after the retries: the store, a model or the event journal is unavailable."""


class ServerTimeoutError(ServerError):
    """504: the search took longer than the server's ``limits.request_timeout_ms``."""


_BY_STATUS: Mapping[int, type[APIError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: InvalidRequestError,
    409: RevisionNotIndexedError,
    413: InvalidRequestError,
    415: InvalidRequestError,
    422: InvalidRequestError,
    429: RateLimitedError,
    503: UnavailableError,
    504: ServerTimeoutError,
}


def error_from_response(status_code: int, body: Any, text: str, *, attempts: int) -> APIError:
    """The exception for an error answer, from its status and decoded JSON body."""
    detail: Mapping[str, Any] = {}
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        detail = body["error"]
    code = detail.get("code") if isinstance(detail.get("code"), str) else None
    message = detail.get("message")
    if not isinstance(message, str) or not message:
        message = text.strip()[:1000] or f"HTTP {status_code}"
    if isinstance(body, Mapping) and body.get("status") == "rejected" and 400 <= status_code < 500:
        return EventRejectedError(
            message, status_code=status_code, code=code, body=body, attempts=attempts
        )
    kind = _BY_STATUS.get(status_code)
    if kind is None:
        kind = ClientError if status_code < 500 else ServerError
    if kind is RevisionNotIndexedError:
        revision = detail.get("indexed_revision")
        doc_id = detail.get("doc_id")
        return RevisionNotIndexedError(
            message,
            status_code=status_code,
            code=code,
            body=body,
            attempts=attempts,
            doc_id=doc_id if isinstance(doc_id, str) else None,
            indexed_revision=revision if isinstance(revision, int) else None,
        )
    return kind(message, status_code=status_code, code=code, body=body, attempts=attempts)
