"""The LlamaIndex retriever against a real `casement run` on the bundled sample."""

from __future__ import annotations

import pytest
from conftest import GOLDEN_BY_ID, MetadataDocs, normalized
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, TextNode

from casement_client import AsyncClient
from casement_client.llamaindex import CasementRetriever


def test_llamaindex_retriever_returns_nodes_of_the_golden_document(casement_url: str) -> None:
    case = GOLDEN_BY_ID["preferred-name"]
    # k = 5, as the golden set is run (with fewer, the window that holds this case's text
    # is narrower: fewer sentence hits widen it).
    retriever = CasementRetriever(base_url=casement_url, top_k=5)
    assert isinstance(retriever, BaseRetriever)
    hits = retriever.retrieve(case.query)
    assert 1 <= len(hits) <= 5
    assert all(isinstance(h, NodeWithScore) and isinstance(h.node, TextNode) for h in hits)
    top = hits[0]
    node = top.node
    assert isinstance(node, TextNode)
    assert node.metadata["doc_id"] == case.doc_id
    # The golden rule: one of the first k windows is of the document and holds the text.
    assert any(
        h.node.metadata["doc_id"] == case.doc_id and normalized(case.text) in normalized(h.node.get_content())
        for h in hits
    )
    assert top.score == node.metadata["score"] and top.score is not None and top.score > 0
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert (node.start_char_idx, node.end_char_idx) == (node.metadata["char_start"], node.metadata["char_end"])
    assert node.relationships[NodeRelationship.SOURCE].node_id == case.doc_id  # type: ignore[union-attr]
    prompt = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "Changing your name" in prompt and "fused_score" not in prompt


@pytest.mark.anyio
async def test_llamaindex_retriever_async_returns_the_golden_document(casement_url: str) -> None:
    case = GOLDEN_BY_ID["slack-channels"]
    hits = await CasementRetriever(base_url=casement_url).aretrieve(case.query)
    assert hits[0].node.metadata["doc_id"] == case.doc_id
    async with AsyncClient(casement_url) as client:
        hits = await CasementRetriever(async_client=client, base_url=casement_url, top_k=1).aretrieve(case.query)
    assert len(hits) == 1 and hits[0].node.metadata["doc_id"] == case.doc_id


def test_llamaindex_retriever_filters_on_metadata_and_exposes_it(casement_url: str, metadata_docs: MetadataDocs) -> None:
    gardens, keys = metadata_docs.ids
    retriever = CasementRetriever(
        base_url=casement_url, top_k=10, min_revision=metadata_docs.min_revision,
        metadata_filter={"team": metadata_docs.metadata[gardens]["team"], "tier": 1},
    )  # fmt: skip
    hits = retriever.retrieve(metadata_docs.query)
    assert hits and {h.node.metadata["doc_id"] for h in hits} == {gardens}
    node = hits[0].node
    assert node.metadata["metadata"] == metadata_docs.metadata[gardens]
    assert node.metadata["doc_id"] == gardens and node.metadata["source"] == gardens
    # For code, not for the prompt nor the embedder.
    assert "metadata" in node.excluded_llm_metadata_keys and "metadata" in node.excluded_embed_metadata_keys
    assert "not-the-doc-id" not in node.get_content(metadata_mode=MetadataMode.LLM)


@pytest.mark.anyio
async def test_llamaindex_retriever_async_filters_on_metadata(casement_url: str, metadata_docs: MetadataDocs) -> None:
    gardens, keys = metadata_docs.ids
    retriever = CasementRetriever(
        base_url=casement_url, min_revision=metadata_docs.min_revision,
        metadata_filter={"team": metadata_docs.metadata[keys]["team"]},
    )  # fmt: skip
    hits = await retriever.aretrieve(metadata_docs.query)
    assert hits and {h.node.metadata["doc_id"] for h in hits} == {keys}
    assert hits[0].node.metadata["metadata"] == metadata_docs.metadata[keys]
