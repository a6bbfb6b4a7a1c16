"""Python client for Casement's HTTP API: sentence-window search over a wiki that is kept
in step with its edits, read-your-writes, and the all-in-one's webhook.

>>> from casement_client import Client
>>> with Client("http://127.0.0.1:8080") as casement:          # doctest: +SKIP
...     for window in casement.search("How do I change my name?", top_k=3).windows:
...         print(window.text, "—", window.citation)

Retrievers for LangChain and LlamaIndex are in :mod:`casement_client.langchain` and
:mod:`casement_client.llamaindex` (extras ``[langchain]`` and ``[llamaindex]``).
"""

from ._client import DEFAULT_BASE_URL, DEFAULT_TIMEOUT, AsyncClient, Client
from ._errors import (
    APIError,
    AuthenticationError,
    CasementConnectionError,
    CasementError,
    CasementTimeoutError,
    ClientError,
    EventRejectedError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    RevisionNotIndexedError,
    ServerError,
    ServerTimeoutError,
    UnavailableError,
)
from ._models import (
    DocumentInfo,
    Event,
    EventResult,
    Link,
    Match,
    MetadataFilter,
    MetadataValue,
    NativeEvent,
    Scores,
    SearchRequest,
    SearchResponse,
    Section,
    Window,
)
from ._retry import RetryPolicy
from ._version import __version__

__all__ = [
    "APIError",
    "AsyncClient",
    "AuthenticationError",
    "CasementConnectionError",
    "CasementError",
    "CasementTimeoutError",
    "Client",
    "ClientError",
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT",
    "DocumentInfo",
    "Event",
    "EventRejectedError",
    "EventResult",
    "InvalidRequestError",
    "Link",
    "Match",
    "MetadataFilter",
    "MetadataValue",
    "NativeEvent",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RetryPolicy",
    "RevisionNotIndexedError",
    "Scores",
    "SearchRequest",
    "SearchResponse",
    "Section",
    "ServerError",
    "ServerTimeoutError",
    "UnavailableError",
    "Window",
    "__version__",
]
