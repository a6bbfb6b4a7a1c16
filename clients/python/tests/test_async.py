"""The asynchronous client against a real `casement run` on the bundled sample."""

from __future__ import annotations

import uuid

import anyio
import pytest
from conftest import GOLDEN_BY_ID, MetadataDocs, normalized

from casement_client import AsyncClient, InvalidRequestError

pytestmark = pytest.mark.anyio


async def test_async_search_top_window_is_from_the_golden_document(casement_url: str) -> None:
    case = GOLDEN_BY_ID["traveling-slack-status"]
    async with AsyncClient(casement_url) as client:
        assert await client.healthy() and await client.ready()
        answer = await client.search(case.query, top_k=3)
    assert answer.windows[0].doc_id == case.doc_id
    assert normalized(case.text) in normalized(answer.windows[0].text)


async def test_async_searches_run_concurrently_and_read_their_writes(casement_url: str) -> None:
    doc_id = f"clients-python/async-{uuid.uuid4().hex[:8]}"
    results: dict[str, str] = {}
    async with AsyncClient(casement_url) as client:
        sent = await client.send_event(
            {"type": "upsert", "doc_id": doc_id, "revision": 5, "format": "text",
             "content": "The narwhal room is booked through the front desk."}
        )  # fmt: skip
        assert sent.status == "applied"

        async def ask(name: str, query: str) -> None:
            answer = await client.search(query, top_k=1, min_revision={doc_id: 5})
            results[name] = answer.windows[0].doc_id

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ask, "new", "How do I book the narwhal room?")
            for case in list(GOLDEN_BY_ID.values())[:3]:
                tasks.start_soon(ask, case.id, case.query)
        info = await client.document(doc_id)
    assert results.pop("new") == doc_id
    assert results == {case.id: case.doc_id for case in list(GOLDEN_BY_ID.values())[:3]}
    assert info.revision == 5


async def test_async_bad_request_raises_invalid_request(casement_url: str) -> None:
    async with AsyncClient(casement_url) as client:
        with pytest.raises(InvalidRequestError) as raised:
            await client.search("leave", top_k=0)
    assert raised.value.message == "top_k = 0 must be between 1 and 50"


async def test_async_search_filters_on_metadata(casement_url: str, metadata_docs: MetadataDocs) -> None:
    gardens, keys = metadata_docs.ids
    async with AsyncClient(casement_url) as client:
        answer = await client.search(
            metadata_docs.query, top_k=10, min_revision=metadata_docs.min_revision,
            metadata={"team": metadata_docs.metadata[keys]["team"]},
        )  # fmt: skip
        with pytest.raises(InvalidRequestError) as raised:
            await client.search("greenhouse", metadata={"audience": "staff"})
    assert answer.windows and {w.doc_id for w in answer.windows} == {keys}
    assert answer.windows[0].metadata == metadata_docs.metadata[keys]
    assert raised.value.message == "metadata.audience: not a filterable key; these are: team, tier"
