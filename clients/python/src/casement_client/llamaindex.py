"""A LlamaIndex retriever over Casement (extra ``casement-client[llamaindex]``).

>>> from casement_client.llamaindex import CasementRetriever
>>> retriever = CasementRetriever(base_url="http://127.0.0.1:8080", top_k=4)  # doctest: +SKIP
>>> for hit in retriever.retrieve("How do I change my name?"):               # doctest: +SKIP
...     print(hit.score, hit.node.metadata["citation"])

Each window is a ``NodeWithScore`` holding a ``TextNode``: the window text, its character
range in the document (``start_char_idx``/``end_char_idx``), the document as its
``SOURCE`` relationship, and the metadata of
:func:`casement_client._convert.window_metadata` (the document's event metadata as one
object under ``"metadata"``); only ``title``, ``section_path`` and ``url`` are shown to the
LLM with the text. ``metadata_filter={"team": "it"}`` restricts the search to documents
with that event metadata (``SearchRequest.metadata``; named as the LangChain retriever's).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from ._client import AsyncClient, Client
from ._convert import LLM_METADATA_KEYS, window_id, window_metadata
from ._models import MetadataFilter, SearchRequest, SearchResponse, Window

__all__ = ["CasementRetriever"]


class CasementRetriever(BaseRetriever):
    """Retrieves Casement windows as LlamaIndex nodes, sync (``retrieve``) and async
    (``aretrieve``).

    Give ``client`` (and optionally ``async_client``), or ``base_url`` and ``api_key``.
    Without ``async_client``, each async call opens a short-lived :class:`AsyncClient`
    with the sync client's settings."""

    def __init__(
        self,
        client: Optional[Client] = None,
        *,
        async_client: Optional[AsyncClient] = None,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        top_k: Optional[int] = None,
        tenant: Optional[str] = None,
        doc_ids: Optional[Sequence[str]] = None,
        rerank: Optional[bool] = None,
        window_radius: Optional[int] = None,
        min_revision: Optional[Mapping[str, int]] = None,
        token_budget: Optional[int] = None,
        metadata_filter: Optional[MetadataFilter] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.client = client if client is not None else Client(base_url, api_key=api_key)
        self.async_client = async_client
        self.top_k = top_k
        self.tenant = tenant
        self.doc_ids = list(doc_ids) if doc_ids is not None else None
        self.rerank = rerank
        self.window_radius = window_radius
        self.min_revision = dict(min_revision) if min_revision is not None else None
        self.token_budget = token_budget
        self.metadata_filter = dict(metadata_filter) if metadata_filter is not None else None

    def _request(self, query_bundle: QueryBundle) -> SearchRequest:
        return SearchRequest(
            query=query_bundle.query_str,
            top_k=self.top_k,
            tenant=self.tenant,
            doc_ids=self.doc_ids,
            rerank=self.rerank,
            window_radius=self.window_radius,
            min_revision=self.min_revision,
            token_budget=self.token_budget,
            metadata=self.metadata_filter,
        )

    @staticmethod
    def _node(window: Window) -> NodeWithScore:
        metadata: dict[str, Any] = window_metadata(window)
        node = TextNode(
            id_=window_id(window),
            text=window.text,
            metadata=metadata,
            start_char_idx=window.char_start,
            end_char_idx=window.char_end,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=window.doc_id)},
            excluded_llm_metadata_keys=[k for k in metadata if k not in LLM_METADATA_KEYS],
            excluded_embed_metadata_keys=list(metadata),
        )
        return NodeWithScore(node=node, score=window.score)

    def _nodes(self, response: SearchResponse) -> list[NodeWithScore]:
        return [self._node(window) for window in response.windows]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self.client.search_request(self._request(query_bundle)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        request = self._request(query_bundle)
        if self.async_client is not None:
            return self._nodes(await self.async_client.search_request(request))
        sync = self.client
        async with AsyncClient(
            sync.base_url, api_key=sync.api_key, timeout=sync.timeout, retry=sync.retry
        ) as client:
            return self._nodes(await client.search_request(request))
