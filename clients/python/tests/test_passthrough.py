"""Fields a newer server adds reach the caller, through the client and both retrievers,
instead of being dropped; window `metadata` is read (and `{}` from an older server without
it); search parameters go as the server expects them."""

from __future__ import annotations

from conftest import Reply, ScriptedServer, window_json
from llama_index.core.schema import TextNode

from casement_client import Client
from casement_client.langchain import CasementRetriever as LangChainRetriever
from casement_client.llamaindex import CasementRetriever as LlamaIndexRetriever

NEWER = Reply(
    200,
    {
        "windows": [
            window_json(
                metadata={"team": "it", "audience": ["staff"]},
                section_id="9f2c",
                scores={"fused": 0.4, "rerank": 0.9, "dense": 0.7},
            )
        ],
        "reranker": "learned",
        "query_id": "q-123",
    },
)


def test_unknown_fields_pass_through_the_client_and_both_retrievers(scripted: ScriptedServer) -> None:
    scripted.replies = [NEWER]
    with Client(scripted.url) as client:
        answer = client.search("vpn", rerank=True)
        window = answer.windows[0]
        assert window.extra == {"section_id": "9f2c"}
        assert window.metadata == {"team": "it", "audience": ["staff"]}
        assert window.scores.extra == {"dense": 0.7}
        assert window.score == 0.9, "the reranker's score orders a reranked window"
        assert answer.extra == {"query_id": "q-123"} and answer.reranker == "learned"
        assert scripted.requests[0].body == {"query": "vpn", "rerank": True}

        doc = LangChainRetriever(client=client).invoke("vpn")[0]
        assert doc.metadata["metadata"] == {"team": "it", "audience": ["staff"]}
        assert doc.metadata["section_id"] == "9f2c" and doc.metadata["rerank_score"] == 0.9

        node = LlamaIndexRetriever(client).retrieve("vpn")[0].node
        assert isinstance(node, TextNode)
        assert node.metadata["metadata"] == {"team": "it", "audience": ["staff"]}
        assert node.metadata["section_id"] == "9f2c"


def test_a_window_without_metadata_has_an_empty_one(scripted: ScriptedServer) -> None:
    older = window_json()
    assert "metadata" not in older
    scripted.replies = [Reply(200, {"windows": [older], "reranker": None})]
    with Client(scripted.url) as client:
        window = client.search("vpn").windows[0]
        assert window.metadata == {} and window.extra == {}
        assert LangChainRetriever(client=client).invoke("vpn")[0].metadata["metadata"] == {}


def test_metadata_filter_goes_as_json_arrays_from_the_client_and_both_retrievers(scripted: ScriptedServer) -> None:
    scripted.replies = [Reply(200, {"windows": [], "reranker": None})]
    with Client(scripted.url) as client:
        client.search("vpn", metadata={"team": "it", "tier": (1, 2), "public": True})
        client.search("vpn", metadata={})
        retriever = LangChainRetriever(client=client, metadata_filter={"team": ["it", "ops"]})
        retriever.invoke("vpn")
        retriever.invoke("vpn", metadata_filter={"tier": 3})
        LlamaIndexRetriever(client, metadata_filter={"team": "it"}).retrieve("vpn")
    assert [r.body.get("metadata") for r in scripted.requests] == [
        {"team": "it", "tier": [1, 2], "public": True},
        None,
        {"team": ["it", "ops"]},
        {"tier": 3},
        {"team": "it"},
    ]


def test_none_parameters_are_left_out_of_the_request(scripted: ScriptedServer) -> None:
    scripted.replies = [Reply(200, {"windows": [], "reranker": None})]
    with Client(scripted.url, api_key="k-1") as client:
        client.search("vpn")
        client.search(
            "vpn", top_k=2, tenant="acme", doc_ids=["a"], rerank=False, window_radius=1,
            min_revision={"a": 3}, token_budget=512, metadata={"team": "it"},
        )  # fmt: skip
    assert scripted.requests[0].body == {"query": "vpn"}
    assert scripted.requests[1].body == {
        "query": "vpn", "top_k": 2, "tenant": "acme", "doc_ids": ["a"], "rerank": False,
        "window_radius": 1, "min_revision": {"a": 3}, "token_budget": 512, "metadata": {"team": "it"},
    }  # fmt: skip
    assert scripted.requests[0].headers["authorization"] == "Bearer k-1"


def test_a_window_cites_the_exact_revision_when_the_source_gives_it(scripted: ScriptedServer) -> None:
    oldid = "https://wiki.example/w/index.php?oldid=7"
    scripted.replies = [Reply(200, {"windows": [window_json(revision_url=oldid)], "reranker": None})]
    with Client(scripted.url) as client:
        window = client.search("vpn").windows[0]
        assert window.revision_url == oldid and window.extra == {}
        assert window.citation.endswith(f"https://wiki.example/kb/vpn, {oldid})"), window.citation
        metadata = LangChainRetriever(client=client).invoke("vpn")[0].metadata
        assert metadata["revision_url"] == oldid and metadata["url"] == "https://wiki.example/kb/vpn"
