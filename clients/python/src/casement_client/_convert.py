"""A window as the flat metadata that LangChain documents and LlamaIndex nodes carry."""

from __future__ import annotations

from typing import Any

from ._models import Window

#: Metadata keys an LLM sees with the text (LlamaIndex ``MetadataMode.LLM``); the others
#: (scores, ranges, matches) are for code, not for the prompt.
LLM_METADATA_KEYS = ("title", "section_path", "url")


def window_metadata(window: Window) -> dict[str, Any]:
    """``doc_id``, ``title``, ``url``, ``revision_url`` (the exact revision's address, when
    the source gives one), ``tenant``, ``section_path``, ``revision``, the
    window's character range (``char_start``, ``char_end``), ``score`` (the rank score),
    ``fused_score``, ``rerank_score``, ``matches`` (the matched sentences with their
    ranges), ``tokens``, ``citation``, ``source`` (the url, else the doc id), ``metadata``
    (the document's event metadata, ``{}`` when none), and every field the server sent
    that this client does not know.

    The event metadata stays one object under ``"metadata"`` (``["metadata"]["team"]``),
    not merged into the top level: its keys are the CMS's, free-form, and merged they could
    shadow Casement's own (``doc_id``, ``url``, ``source``, ``score``, ...) that citations
    and LangChain/LlamaIndex tooling read; a prefix would rename every key users know from
    their events. Nested, it reads as the event wrote it and as the search filter takes it.
    LangChain's ``Document.metadata`` is any JSON-like dict; LlamaIndex wants flat metadata
    only to write nodes to a vector store, which retrieved windows are not for
    (``matches``, ``section_path`` are not flat either), and its retriever keeps this out
    of the LLM's and the embedder's text."""
    metadata: dict[str, Any] = {
        "doc_id": window.doc_id,
        "title": window.title,
        "url": window.url,
        "revision_url": window.revision_url,
        "tenant": window.tenant,
        "section_path": list(window.section_path),
        "revision": window.revision,
        "char_start": window.char_start,
        "char_end": window.char_end,
        "score": window.score,
        "fused_score": window.scores.fused,
        "rerank_score": window.scores.rerank,
        "matches": [
            {
                "sentence": m.sentence,
                "char_start": m.char_start,
                "char_end": m.char_end,
                "score": m.score,
            }
            for m in window.matches
        ],
        "tokens": window.tokens,
        "citation": window.citation,
        "source": window.url or window.doc_id,
        "metadata": dict(window.metadata),
    }
    for key, value in window.extra.items():
        metadata.setdefault(key, value)
    return metadata


def window_id(window: Window) -> str:
    """A stable id for one window of one revision: ``[tenant/]doc_id@revision:start-end``."""
    tenant = f"{window.tenant}/" if window.tenant else ""
    return f"{tenant}{window.doc_id}@{window.revision}:{window.char_start}-{window.char_end}"
