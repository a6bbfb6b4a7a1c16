"""The blocking client against a real `casement run` on the bundled sample."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import pytest
from conftest import (
    API_KEY,
    GoldenCase,
    MetadataDocs,
    final_revisions,
    free_port,
    golden_cases,
    normalized,
)

from casement_client import (
    AuthenticationError,
    Client,
    EventRejectedError,
    InvalidRequestError,
    NotFoundError,
    RetryPolicy,
    RevisionNotIndexedError,
)

GOLDEN = golden_cases()


@pytest.fixture
def client(casement_url: str) -> Iterator[Client]:
    with Client(casement_url) as client:
        yield client


def test_healthy_and_ready_true_on_a_running_server_false_on_a_closed_port(client: Client) -> None:
    assert client.healthy()
    assert client.ready()
    with Client(f"http://127.0.0.1:{free_port()}", retry=RetryPolicy(max_attempts=5)) as nobody:
        assert not nobody.healthy()
        assert not nobody.ready()


@pytest.mark.parametrize("case", GOLDEN, ids=[c.id for c in GOLDEN])
def test_search_top_window_is_from_the_golden_document(client: Client, case: GoldenCase) -> None:
    answer = client.search(case.query, top_k=5)
    assert answer.windows, "no window"
    top = answer.windows[0]
    assert top.doc_id == case.doc_id, [w.doc_id for w in answer.windows]
    assert any(
        w.doc_id == case.doc_id and normalized(case.text) in normalized(w.text) for w in answer.windows
    ), f"no window of {case.doc_id} holds {case.text!r}"


def test_search_windows_carry_exact_citation_ranges(client: Client) -> None:
    case = GOLDEN[0]
    answer = client.search(case.query, top_k=3, timings=True)
    assert answer.timings_ms is not None and "total" in answer.timings_ms
    assert answer.reranker == "learned:shipped"
    indexed = client.document(case.doc_id)
    for window in answer.windows:
        assert window.title and window.revision >= 1 and window.tokens > 0
        assert window.char_end - window.char_start == len(window.text)
        assert window.matches, "a window without its matched sentences"
        for match in window.matches:
            offset = match.char_start - window.char_start
            assert window.text[offset : offset + len(match.sentence)] == match.sentence
            assert window.char_start <= match.char_start < match.char_end <= window.char_end
        # Reranked by default (the learned ranker): the rank score is the rerank score.
        assert window.scores.rerank is not None and window.score == window.scores.rerank
        assert window.doc_id in window.citation and f"revision {window.revision}" in window.citation
    top = answer.windows[0]
    assert top.revision == indexed.revision


def test_windows_carry_source_offsets_links_and_a_relevance_a_bot_can_abstain_on(client: Client) -> None:
    case = GOLDEN[0]
    answer = client.search(case.query, top_k=3)
    for window in answer.windows:
        assert window.source_start is not None and window.source_end is not None
        assert window.source_start < window.source_end
        assert 0.0 <= window.scores.relevance <= 1.0 and window.scores.similarity > 0.0
        for link in window.links:
            assert window.text[link.start : link.end] == link.text and link.url
    best = max(w.scores.relevance for w in answer.windows)
    # Nothing is as relevant as the best window: a floor above it leaves none, and says so.
    empty = client.search(case.query, top_k=3, min_relevance=min(1.0, best + 1e-3))
    assert empty.windows == [] and empty.short == "min_relevance"


def test_document_reports_the_last_revision_and_unknown_ids_raise_not_found(client: Client) -> None:
    answering = {case.doc_id for case in GOLDEN}
    for doc_id, revision in final_revisions().items():
        info = client.document(doc_id)
        assert info.doc_id == doc_id
        assert info.revision >= revision and not info.deleted
        assert info.sentence_count == sum(s.sentences for s in info.sections)
        # (The open-source page ends as front matter alone: indexed, with no sentence.)
        assert info.sentence_count > 0 or doc_id not in answering
    with pytest.raises(NotFoundError) as raised:
        client.document("clients-python/no-such-document")
    assert raised.value.status_code == 404 and raised.value.code == "not_found"
    assert raised.value.message == 'document "clients-python/no-such-document" is not indexed'


def test_read_your_writes_send_event_then_search_with_min_revision(client: Client, casement_url: str) -> None:
    doc_id = f"clients-python/badges-{uuid.uuid4().hex[:8]}"
    first = client.send_event(
        {
            "type": "upsert",
            "doc_id": doc_id,
            "revision": 1,
            "title": "Visitor badges",
            "format": "markdown",
            "content": "# Visitor badges\n\nThe quokka clerk prints visitor badges at the lobby kiosk. "
            "Badges expire at midnight.",
            "url": "https://wiki.example/badges",
            "metadata": {"team": "facilities"},
        }
    )
    assert first.status == "applied" and first.indexed
    assert first.doc_id == doc_id and first.revision == 1 and first.sentences["embedded"] >= 1

    answer = client.search("Where does the quokka clerk print visitor badges?", min_revision={doc_id: 1})
    top = answer.windows[0]
    assert (top.doc_id, top.revision, top.url) == (doc_id, 1, "https://wiki.example/badges")
    assert "quokka clerk prints visitor badges" in top.text

    # Revision 2, with the search asked first: it waits on the server until the edit is in.
    second_event = {
        "type": "upsert",
        "doc_id": doc_id,
        "revision": 2,
        "title": "Visitor badges",
        "format": "markdown",
        "content": "# Visitor badges\n\nThe quokka clerk prints visitor badges at the lobby kiosk. "
        "Badges expire at noon on Fridays.",
    }
    with Client(casement_url) as writer, ThreadPoolExecutor(max_workers=1) as pool:
        searching = pool.submit(
            client.search, "When do quokka clerk visitor badges expire?", doc_ids=[doc_id],
            min_revision={doc_id: 2},
        )  # fmt: skip
        second = writer.send_event(second_event)
        answer = searching.result(timeout=30)
    assert second.status == "applied" and second.revision == 2
    assert [w.revision for w in answer.windows] == [2] * len(answer.windows)
    assert "noon on Fridays" in answer.windows[0].text

    # A repeat of an indexed revision changes nothing.
    repeat = client.send_event(second_event)
    assert repeat.status == "stale" and repeat.indexed_revision == 2 and not repeat.indexed


def test_min_revision_not_reached_raises_revision_not_indexed_with_the_servers_message(client: Client) -> None:
    case = GOLDEN[0]
    indexed = client.document(case.doc_id).revision
    with pytest.raises(RevisionNotIndexedError) as raised:
        client.search(case.query, min_revision={case.doc_id: indexed + 1000})
    error = raised.value
    assert (error.status_code, error.code) == (409, "revision_not_indexed")
    assert error.doc_id == case.doc_id and error.indexed_revision == indexed
    assert error.message == (
        f"document {case.doc_id} is indexed at revision {indexed} (asked for at least {indexed + 1000})"
    )
    assert error.attempts == 1, "a 409 already waited on the server: not retried"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": "leave", "top_k": 0}, "top_k = 0 must be between 1 and 50"),
        ({"query": "   "}, "query must not be empty"),
        ({"query": "leave", "window_radius": 99}, "window_radius = 99 is larger than the indexed radius 3"),
        ({"query": "leave", "tenant": ""}, "tenant must not be empty (leave it out for every tenant)"),
    ],
    ids=["top_k-0", "empty-query", "window-radius", "empty-tenant"],
)
def test_bad_request_raises_invalid_request_with_the_servers_message(
    client: Client, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        client.search(**arguments)  # type: ignore[arg-type]
    error = raised.value
    assert (error.status_code, error.code, error.message) == (422, "invalid_request", message)
    assert error.attempts == 1
    assert str(error) == f"422 invalid_request: {message}"


def test_metadata_filter_keeps_only_the_matching_document_and_windows_carry_its_metadata(
    client: Client, metadata_docs: MetadataDocs
) -> None:
    gardens, keys = metadata_docs.ids
    # Unfiltered, both pages answer (they share their words).
    both = client.search(metadata_docs.query, top_k=10, min_revision=metadata_docs.min_revision)
    assert {gardens, keys} <= {w.doc_id for w in both.windows}

    for doc_id in (gardens, keys):
        team = metadata_docs.metadata[doc_id]["team"]
        answer = client.search(metadata_docs.query, top_k=10, metadata={"team": team})
        assert answer.windows and {w.doc_id for w in answer.windows} == {doc_id}
        for window in answer.windows:
            # Exactly what the event carried, its keys named as window fields included:
            # those stay the window's own.
            assert window.metadata == metadata_docs.metadata[doc_id]
            assert "metadata" not in window.extra

    top = client.search(metadata_docs.query, metadata={"team": metadata_docs.metadata[gardens]["team"]}).windows[0]
    assert (top.doc_id, top.url) == (gardens, None)
    # Any of an array's values; an integer against a stored array matches one element;
    # every condition must hold.
    teams = [metadata_docs.metadata[d]["team"] for d in (gardens, keys)]
    assert {w.doc_id for w in client.search(metadata_docs.query, top_k=10, metadata={"team": teams}).windows} == {gardens, keys}
    for tier, expected in ((3, {keys}), ((1, 2), {gardens, keys}), ([4, 5], set())):
        answer = client.search(metadata_docs.query, top_k=10, metadata={"team": teams, "tier": tier})
        assert {w.doc_id for w in answer.windows} == expected, tier


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"audience": "staff"}, "metadata.audience: not a filterable key; these are: team, tier"),
        ({"team": "it", "doc_id": "x"}, "metadata.doc_id: not a filterable key; these are: team, tier"),
    ],
    ids=["undeclared-key", "one-undeclared-key"],
)
def test_metadata_filter_on_an_undeclared_key_raises_invalid_request_with_the_servers_message(
    client: Client, metadata: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        client.search("greenhouse", metadata=metadata)
    error = raised.value
    assert (error.status_code, error.code, error.message) == (422, "invalid_request", message)
    assert error.attempts == 1


def test_metadata_filter_on_a_server_without_indexed_keys_says_where_to_declare_them(
    keyed_casement_url: str,
) -> None:
    with Client(keyed_casement_url, api_key=API_KEY) as keyed:
        with pytest.raises(InvalidRequestError) as raised:
            keyed.search("keys", metadata={"team": "it"})
    assert raised.value.message == (
        "metadata.team: no metadata key can be filtered on; the operator declares them in store.indexed_metadata"
    )


def test_rejected_event_raises_event_rejected_with_the_reason(client: Client) -> None:
    with pytest.raises(EventRejectedError) as raised:
        client.send_event({"type": "upsert", "doc_id": "clients-python/no-format", "revision": 1})
    error = raised.value
    assert (error.status_code, error.code) == (422, "schema")
    assert error.message == "an upsert needs a format"
    assert isinstance(error, InvalidRequestError)


def test_api_key_is_sent_as_bearer_and_a_missing_or_wrong_key_raises_authentication_error(
    keyed_casement_url: str,
) -> None:
    for key in (None, "wrong-key"):
        with Client(keyed_casement_url, api_key=key) as anonymous:
            with pytest.raises(AuthenticationError) as raised:
                anonymous.search("badges")
            assert raised.value.status_code == 401 and raised.value.code == "unauthorized"
            assert "Authorization: Bearer" in raised.value.message
    with Client(keyed_casement_url, api_key=API_KEY) as keyed:
        sent = keyed.send_event(
            {"type": "upsert", "doc_id": "kb/keys", "revision": 1, "format": "text",
             "content": "Keys are cut at the locksmith on the second floor."}
        )  # fmt: skip
        assert sent.status == "applied"
        answer = keyed.search("Where are keys cut?", min_revision={"kb/keys": 1})
        assert answer.windows[0].doc_id == "kb/keys"
