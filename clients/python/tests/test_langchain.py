"""The LangChain retriever against a real `casement run` on the bundled sample."""

from __future__ import annotations

import pytest
from conftest import GOLDEN_BY_ID, MetadataDocs, normalized
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from casement_client import AsyncClient, Client
from casement_client.langchain import CasementRetriever


def test_langchain_retriever_returns_documents_of_the_golden_document(casement_url: str) -> None:
    case = GOLDEN_BY_ID["name-change-wait"]
    retriever = CasementRetriever(base_url=casement_url, top_k=5)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(case.query)
    assert 1 <= len(docs) <= 5 and all(isinstance(d, Document) for d in docs)
    top = docs[0]
    assert top.metadata["doc_id"] == case.doc_id
    # The golden rule: one of the first k windows is of the document and holds the text.
    assert any(d.metadata["doc_id"] == case.doc_id and normalized(case.text) in normalized(d.page_content) for d in docs)
    assert top.metadata["title"] == "Changing your name"
    assert top.metadata["char_end"] - top.metadata["char_start"] == len(top.page_content)
    # Reranked by default: the rank score is the learned ranker's, the fused one is kept.
    assert top.metadata["score"] == top.metadata["rerank_score"] and top.metadata["fused_score"] > 0
    assert top.metadata["revision"] >= 15 and top.metadata["matches"]
    assert top.metadata["source"] == top.metadata["url"]
    assert case.doc_id in top.metadata["citation"]
    assert top.id == f"{case.doc_id}@{top.metadata['revision']}:{top.metadata['char_start']}-{top.metadata['char_end']}"


def test_langchain_retriever_search_parameters_apply_per_call(casement_url: str) -> None:
    case = GOLDEN_BY_ID["slack-purpose"]
    with Client(casement_url) as client:
        retriever = CasementRetriever(client=client, top_k=5, doc_ids=["18f-handbook:tools/slack"])
        docs = retriever.invoke(case.query)
        assert {d.metadata["doc_id"] for d in docs} == {"18f-handbook:tools/slack"}
        one = retriever.invoke(case.query, top_k=1, window_radius=0)
    assert len(one) == 1
    # Radius 0: the window is its matched sentences alone, nothing around them.
    matches = one[0].metadata["matches"]
    assert one[0].metadata["char_start"] == min(m["char_start"] for m in matches)
    assert one[0].metadata["char_end"] == max(m["char_end"] for m in matches)
    with pytest.raises(TypeError):
        retriever.invoke(case.query, colour="blue")


@pytest.mark.anyio
async def test_langchain_retriever_async_returns_the_golden_document(casement_url: str) -> None:
    case = GOLDEN_BY_ID["traveling-calendar"]
    docs = await CasementRetriever(base_url=casement_url, top_k=2).ainvoke(case.query)
    assert docs[0].metadata["doc_id"] == case.doc_id
    async with AsyncClient(casement_url) as client:
        retriever = CasementRetriever(base_url=casement_url, async_client=client)
        docs = await retriever.ainvoke(case.query)
    assert docs[0].metadata["doc_id"] == case.doc_id
    assert any(normalized(case.text) in normalized(d.page_content) for d in docs)


def test_langchain_retriever_filters_on_metadata_and_exposes_it(casement_url: str, metadata_docs: MetadataDocs) -> None:
    gardens, keys = metadata_docs.ids
    retriever = CasementRetriever(
        base_url=casement_url, top_k=10, min_revision=metadata_docs.min_revision,
        metadata_filter={"team": metadata_docs.metadata[gardens]["team"]},
    )  # fmt: skip
    docs = retriever.invoke(metadata_docs.query)
    assert docs and {d.metadata["doc_id"] for d in docs} == {gardens}
    top = docs[0]
    # The event's metadata whole, under "metadata"; its doc_id and source keys do not
    # shadow the window's.
    assert top.metadata["metadata"] == metadata_docs.metadata[gardens]
    assert (top.metadata["doc_id"], top.metadata["source"]) == (gardens, gardens)
    # Per call, as every search parameter.
    docs = retriever.invoke(metadata_docs.query, metadata_filter={"tier": [2, 3]})
    assert {d.metadata["doc_id"] for d in docs} == {keys}
    assert docs[0].metadata["url"] is None
    assert docs[0].metadata["metadata"]["url"] == "https://cms.example/not-the-url"


@pytest.mark.anyio
async def test_langchain_retriever_async_filters_on_metadata(casement_url: str, metadata_docs: MetadataDocs) -> None:
    gardens, keys = metadata_docs.ids
    retriever = CasementRetriever(
        base_url=casement_url, min_revision=metadata_docs.min_revision,
        metadata_filter={"team": metadata_docs.metadata[keys]["team"]},
    )  # fmt: skip
    docs = await retriever.ainvoke(metadata_docs.query)
    assert docs and {d.metadata["doc_id"] for d in docs} == {keys}
    assert docs[0].metadata["metadata"] == metadata_docs.metadata[keys]
