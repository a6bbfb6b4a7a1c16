"""``Client`` (blocking) and ``AsyncClient`` (asyncio/trio): the same methods, the same
retries, the same exceptions. What a request sends and what an answer means is decided
once, in ``_ClientBase``; the two classes only differ in how they wait."""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Optional, Sequence, Union
from urllib.parse import quote

import anyio  # httpx's own dependency: sleeps under asyncio and trio alike
import httpx

from ._errors import CasementConnectionError, CasementError, CasementTimeoutError, error_from_response
from ._models import DocumentInfo, Event, EventResult, MetadataFilter, SearchRequest, SearchResponse
from ._retry import RETRY_EXCEPTIONS, RETRY_STATUSES, RetryPolicy, parse_retry_after
from ._version import __version__

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
#: Seconds. Above the server's own waits: ``min_revision`` (``limits.max_wait_ms``, 5 s)
#: and the webhook's (``sources.webhook.wait_ms``, 10 s).
DEFAULT_TIMEOUT = 30.0

Timeout = Union[float, httpx.Timeout]


class _ClientBase:
    def __init__(
        self,
        base_url: Optional[str],
        api_key: Optional[str],
        timeout: Timeout,
        retry: Optional[RetryPolicy],
        headers: Optional[Mapping[str, str]],
    ) -> None:
        self.base_url = (base_url or os.environ.get("CASEMENT_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("CASEMENT_API_KEY")
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy()
        self._headers = {
            "accept": "application/json",
            "user-agent": f"casement-client-python/{__version__}",
            **(headers or {}),
        }
        if self.api_key:
            # The server checks `Authorization: Bearer <key>` (services/query/src/http.rs).
            self._headers["authorization"] = f"Bearer {self.api_key}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    @staticmethod
    def _search_request(
        query: str,
        top_k: Optional[int],
        tenant: Optional[str],
        doc_ids: Optional[Sequence[str]],
        rerank: Optional[bool],
        window_radius: Optional[int],
        min_revision: Optional[Mapping[str, int]],
        token_budget: Optional[int],
        timings: bool,
        metadata: Optional[MetadataFilter],
        min_relevance: Optional[float] = None,
    ) -> SearchRequest:
        if isinstance(doc_ids, str):
            raise TypeError("doc_ids is a list of document ids, not one string")
        return SearchRequest(
            query=query,
            top_k=top_k,
            tenant=tenant,
            doc_ids=list(doc_ids) if doc_ids is not None else None,
            rerank=rerank,
            window_radius=window_radius,
            min_revision=min_revision,
            token_budget=token_budget,
            timings=timings,
            metadata=metadata,
            min_relevance=min_relevance,
        )

    @staticmethod
    def _document_path(doc_id: str) -> str:
        if not doc_id:
            raise ValueError("doc_id must not be empty")
        # Ids may hold `/` (the route takes the rest of the path); everything else that is
        # not URL-safe is escaped.
        return "/v1/documents/" + quote(doc_id, safe="/:@")

    @staticmethod
    def _document_params(tenant: Optional[str]) -> Optional[dict[str, str]]:
        return {"tenant": tenant} if tenant is not None else None

    @staticmethod
    def _event_body(event: Event) -> dict[str, Any]:
        if not isinstance(event, Mapping):
            raise TypeError("event must be a JSON object (a mapping)")
        return dict(event)

    def _retry_delay(self, attempt: int, response: httpx.Response) -> Optional[float]:
        if response.status_code not in RETRY_STATUSES:
            return None
        return self.retry.delay(attempt, parse_retry_after(response.headers.get("retry-after")))

    def _transport_failure(self, error: Exception, attempt: int) -> Optional[float]:
        if isinstance(error, RETRY_EXCEPTIONS):
            return self.retry.delay(attempt, None)
        return None

    def _raise_transport(self, method: str, path: str, error: Exception, attempt: int) -> CasementError:
        where = f"{method} {self.base_url}{path}"
        tries = f" (after {attempt} attempts)" if attempt > 1 else ""
        if isinstance(error, httpx.TimeoutException) and not isinstance(error, httpx.ConnectTimeout):
            return CasementTimeoutError(
                f"{where}: no answer within the client's timeout{tries}: {error!r}", attempts=attempt
            )
        return CasementConnectionError(f"{where}: {error!r}{tries}", attempts=attempt)

    @staticmethod
    def _json(response: httpx.Response, attempt: int) -> Any:
        if response.status_code >= 400:
            try:
                body: Any = response.json()
            except ValueError:
                body = response.text
            raise error_from_response(response.status_code, body, response.text, attempts=attempt)
        try:
            return response.json()
        except ValueError as error:
            raise CasementError(
                f"{response.request.method} {response.request.url}: answer {response.status_code} "
                f"is not JSON: {response.text[:200]!r}"
            ) from error


class Client(_ClientBase):
    """A blocking client of Casement's HTTP API (the all-in-one or ``casement-query``).

    ``base_url`` defaults to ``$CASEMENT_URL`` or ``http://127.0.0.1:8080`` and
    ``api_key`` to ``$CASEMENT_API_KEY`` (sent as ``Authorization: Bearer``). Use it as a
    context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        *,
        api_key: Optional[str] = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        retry: Optional[RetryPolicy] = None,
        headers: Optional[Mapping[str, str]] = None,
        transport: Optional[httpx.BaseTransport] = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout, retry, headers)
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=self._headers, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def search(
        self,
        query: str,
        top_k: Optional[int] = None,
        tenant: Optional[str] = None,
        doc_ids: Optional[Sequence[str]] = None,
        rerank: Optional[bool] = None,
        window_radius: Optional[int] = None,
        min_revision: Optional[Mapping[str, int]] = None,
        token_budget: Optional[int] = None,
        *,
        metadata: Optional[MetadataFilter] = None,
        timings: bool = False,
        min_relevance: Optional[float] = None,
    ) -> SearchResponse:
        """``POST /v1/search``: the windows that answer ``query``, best first.

        ``min_revision={doc_id: revision}`` reads your writes: the server waits until each
        document is indexed at least at that revision, else raises
        :class:`RevisionNotIndexedError`.

        ``metadata={"team": "it", "tier": [1, 2]}`` keeps the documents whose event
        ``metadata`` has every value given (or one of a list's). Its keys must be among the
        server's ``store.indexed_metadata``; another raises :class:`InvalidRequestError`
        (422) naming the allowed ones."""
        request = self._search_request(
            query, top_k, tenant, doc_ids, rerank, window_radius, min_revision, token_budget,
            timings, metadata, min_relevance,
        )  # fmt: skip
        return self.search_request(request)

    def search_request(self, request: SearchRequest) -> SearchResponse:
        return SearchResponse.from_json(self._call("POST", "/v1/search", json=request.to_json()))

    def document(self, doc_id: str, tenant: Optional[str] = None) -> DocumentInfo:
        """``GET /v1/documents/{doc_id}``: the indexed revision, tombstone and sections."""
        data = self._call("GET", self._document_path(doc_id), params=self._document_params(tenant))
        return DocumentInfo.from_json(data)

    def send_event(self, event: Event) -> EventResult:
        """``POST /v1/events`` (the all-in-one's webhook): index one change event and
        return its outcome. A rejected event raises :class:`EventRejectedError`."""
        return EventResult.from_json(self._call("POST", "/v1/events", json=self._event_body(event)))

    def healthy(self) -> bool:
        """``/healthz`` answers 200 (the process is up). Never raises, never retries."""
        return self._probe("/healthz")

    def ready(self) -> bool:
        """``/readyz`` answers 200 (models loaded, store reachable). Never raises."""
        return self._probe("/readyz")

    def _probe(self, path: str) -> bool:
        try:
            return self._http.get(path).status_code == 200
        except httpx.HTTPError:
            return False

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Optional[Any] = None,
        params: Optional[Mapping[str, str]] = None,
    ) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(method, path, json=json, params=params)
            except httpx.TransportError as error:
                delay = self._transport_failure(error, attempt)
                if delay is None:
                    raise self._raise_transport(method, path, error, attempt) from error
                time.sleep(delay)
                continue
            delay = self._retry_delay(attempt, response)
            if delay is not None:
                response.close()
                time.sleep(delay)
                continue
            return self._json(response, attempt)


class AsyncClient(_ClientBase):
    """The asynchronous twin of :class:`Client` (``await`` every method; ``async with``)."""

    def __init__(
        self,
        base_url: Optional[str] = None,
        *,
        api_key: Optional[str] = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        retry: Optional[RetryPolicy] = None,
        headers: Optional[Mapping[str, str]] = None,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout, retry, headers)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, headers=self._headers, transport=transport
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def search(
        self,
        query: str,
        top_k: Optional[int] = None,
        tenant: Optional[str] = None,
        doc_ids: Optional[Sequence[str]] = None,
        rerank: Optional[bool] = None,
        window_radius: Optional[int] = None,
        min_revision: Optional[Mapping[str, int]] = None,
        token_budget: Optional[int] = None,
        *,
        metadata: Optional[MetadataFilter] = None,
        timings: bool = False,
        min_relevance: Optional[float] = None,
    ) -> SearchResponse:
        """See :meth:`Client.search`."""
        request = self._search_request(
            query, top_k, tenant, doc_ids, rerank, window_radius, min_revision, token_budget,
            timings, metadata, min_relevance,
        )  # fmt: skip
        return await self.search_request(request)

    async def search_request(self, request: SearchRequest) -> SearchResponse:
        data = await self._call("POST", "/v1/search", json=request.to_json())
        return SearchResponse.from_json(data)

    async def document(self, doc_id: str, tenant: Optional[str] = None) -> DocumentInfo:
        data = await self._call(
            "GET", self._document_path(doc_id), params=self._document_params(tenant)
        )
        return DocumentInfo.from_json(data)

    async def send_event(self, event: Event) -> EventResult:
        data = await self._call("POST", "/v1/events", json=self._event_body(event))
        return EventResult.from_json(data)

    async def healthy(self) -> bool:
        return await self._probe("/healthz")

    async def ready(self) -> bool:
        return await self._probe("/readyz")

    async def _probe(self, path: str) -> bool:
        try:
            return (await self._http.get(path)).status_code == 200
        except httpx.HTTPError:
            return False

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: Optional[Any] = None,
        params: Optional[Mapping[str, str]] = None,
    ) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(method, path, json=json, params=params)
            except httpx.TransportError as error:
                delay = self._transport_failure(error, attempt)
                if delay is None:
                    raise self._raise_transport(method, path, error, attempt) from error
                await anyio.sleep(delay)
                continue
            delay = self._retry_delay(attempt, response)
            if delay is not None:
                await response.aclose()
                await anyio.sleep(delay)
                continue
            return self._json(response, attempt)
