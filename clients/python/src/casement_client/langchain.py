"""A LangChain retriever over Casement (extra ``casement-client[langchain]``).

>>> from casement_client.langchain import CasementRetriever
>>> retriever = CasementRetriever(base_url="http://127.0.0.1:8080", top_k=4)  # doctest: +SKIP
>>> docs = retriever.invoke("How do I change my name?")                      # doctest: +SKIP
>>> docs[0].metadata["citation"]                                              # doctest: +SKIP

Each window is one ``Document``: ``page_content`` is the window text, ``metadata`` the
fields of :func:`casement_client._convert.window_metadata` (``doc_id``, ``title``, ``url``,
``score``, ``char_start``/``char_end``, ``matches``, ``citation``, ..., and the document's
event metadata as one object under ``"metadata"``). Search parameters given to ``invoke``
(``retriever.invoke(q, min_revision={...})``) override the retriever's for that call.

The search's metadata filter is ``metadata_filter`` (``SearchRequest.metadata``): a
LangChain retriever's own ``metadata`` field is the tracing metadata given to callbacks.
"""

from __future__ import annotations

from typing import Any, Optional

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, model_validator

from ._client import AsyncClient, Client
from ._convert import window_id, window_metadata
from ._models import MetadataValue, SearchRequest, SearchResponse

__all__ = ["CasementRetriever"]

#: The retriever's search fields (also ``invoke`` keywords) and their ``SearchRequest`` names.
_SEARCH_FIELDS = {
    "top_k": "top_k", "tenant": "tenant", "doc_ids": "doc_ids", "rerank": "rerank",
    "window_radius": "window_radius", "min_revision": "min_revision",
    "token_budget": "token_budget", "metadata_filter": "metadata",
}  # fmt: skip


class CasementRetriever(BaseRetriever):
    """Retrieves Casement windows as LangChain documents, sync and async.

    Give ``client`` (and optionally ``async_client``), or ``base_url`` and ``api_key``
    to have them made. Without ``async_client``, each async call opens a short-lived
    :class:`AsyncClient` with the sync client's settings."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Optional[Client] = None
    async_client: Optional[AsyncClient] = None
    base_url: Optional[str] = None
    api_key: Optional[str] = Field(default=None, repr=False)

    top_k: Optional[int] = None
    tenant: Optional[str] = None
    doc_ids: Optional[list[str]] = None
    rerank: Optional[bool] = None
    window_radius: Optional[int] = None
    min_revision: Optional[dict[str, int]] = None
    token_budget: Optional[int] = None
    #: Only documents whose event metadata has these values (``SearchRequest.metadata``):
    #: ``{"team": "it"}``; keys among the server's ``store.indexed_metadata``.
    metadata_filter: Optional[dict[str, MetadataValue]] = None

    @model_validator(mode="after")
    def _make_client(self) -> CasementRetriever:
        if self.client is None:
            self.client = Client(self.base_url, api_key=self.api_key)
        return self

    def _request(self, query: str, overrides: dict[str, Any]) -> SearchRequest:
        unknown = set(overrides) - set(_SEARCH_FIELDS)
        if unknown:
            raise TypeError(f"unknown search parameters: {sorted(unknown)}")
        fields = {
            wire: overrides.get(name, getattr(self, name)) for name, wire in _SEARCH_FIELDS.items()
        }
        return SearchRequest(query=query, **fields)

    @staticmethod
    def _documents(response: SearchResponse) -> list[Document]:
        return [
            Document(id=window_id(w), page_content=w.text, metadata=window_metadata(w))
            for w in response.windows
        ]

    def _sync_client(self) -> Client:
        assert self.client is not None  # set by the validator
        return self.client

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        response = self._sync_client().search_request(self._request(query, kwargs))
        return self._documents(response)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        request = self._request(query, kwargs)
        if self.async_client is not None:
            return self._documents(await self.async_client.search_request(request))
        sync = self._sync_client()
        async with AsyncClient(
            sync.base_url, api_key=sync.api_key, timeout=sync.timeout, retry=sync.retry
        ) as client:
            return self._documents(await client.search_request(request))
