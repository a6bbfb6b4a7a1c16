"""The wire format of Casement's HTTP API, as typed Python values.

Mirrors ``services/query/src/api.rs`` (searches, documents, errors) and the all-in-one's
``POST /v1/events`` answers. Every answer type keeps the fields it does not know in
``extra``, so a newer server's additions reach the caller instead of being dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional, Sequence, TypedDict, Union

JsonObject = Mapping[str, Any]

#: One condition of a search's ``metadata`` filter: a string, integer or boolean, or a
#: non-empty list (at most 100) of strings or of integers, any of which matches.
MetadataValue = Union[str, int, bool, Sequence[str], Sequence[int]]
#: ``SearchRequest.metadata``: ``{key: value}``, every condition required. Keys must be
#: among the server's ``store.indexed_metadata`` (else :class:`InvalidRequestError`, 422).
MetadataFilter = Mapping[str, MetadataValue]


def _extra(data: JsonObject, known: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key not in known}


def _metadata_json(metadata: MetadataFilter) -> dict[str, Any]:
    # Tuples and other sequences go as JSON arrays; what the server does not take (a float,
    # an empty or mixed list, ...) is left for its 422, which names the key.
    return {
        key: list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
        for key, value in metadata.items()
    }


@dataclass(frozen=True)
class SearchRequest:
    """``POST /v1/search``. ``None`` (and an empty ``doc_ids``/``min_revision``/``metadata``)
    leaves the field out, so the server's configured default applies."""

    query: str
    top_k: Optional[int] = None
    tenant: Optional[str] = None
    doc_ids: Optional[list[str]] = None
    rerank: Optional[bool] = None
    window_radius: Optional[int] = None
    #: Read-your-writes: ``{doc_id: revision}``; the server waits (``limits.max_wait_ms``)
    #: until each document is indexed at least at that revision, else answers 409.
    min_revision: Optional[Mapping[str, int]] = None
    #: Most estimated tokens in all windows together (the room left in the prompt).
    token_budget: Optional[int] = None
    #: Per-stage timings in the answer (``SearchResponse.timings_ms``).
    timings: bool = False
    #: Only documents whose event ``metadata`` has, for every key, the value given (or one
    #: of a list's; a document whose value is a list matches when one element does):
    #: ``{"team": "it", "tier": [1, 2]}``. Keys must be among the server's
    #: ``store.indexed_metadata``; another raises :class:`InvalidRequestError` (422).
    metadata: Optional[MetadataFilter] = None
    #: Leave out windows whose calibrated ``scores.relevance`` is below this (0 to 1); an
    #: answer with none left (``SearchResponse.short == "min_relevance"``) is "I don't know".
    min_relevance: Optional[float] = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"query": self.query}
        for name in ("top_k", "tenant", "rerank", "window_radius", "token_budget", "min_relevance"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.doc_ids:
            body["doc_ids"] = list(self.doc_ids)
        if self.min_revision:
            body["min_revision"] = dict(self.min_revision)
        if self.timings:
            body["timings"] = True
        if self.metadata:
            body["metadata"] = _metadata_json(self.metadata)
        return body


@dataclass(frozen=True)
class Match:
    """A sentence of the window that matched the query (for highlighting)."""

    sentence: str
    #: Character range (Unicode code points) of the sentence in the document.
    char_start: int
    char_end: int
    #: The sentence hit's fused (reciprocal rank fusion) score.
    score: float
    extra: dict[str, Any] = field(default_factory=dict)
    #: Characters of the content as it was submitted that produced the sentence (``None``
    #: from an index written before these were kept, or an older server).
    source_start: Optional[int] = None
    source_end: Optional[int] = None

    _KNOWN = frozenset({"sentence", "char_start", "char_end", "score", "source_start", "source_end"})

    @classmethod
    def from_json(cls, data: JsonObject) -> Match:
        return cls(
            sentence=data["sentence"],
            char_start=data["char_start"],
            char_end=data["char_end"],
            score=data["score"],
            extra=_extra(data, cls._KNOWN),
            source_start=data.get("source_start"),
            source_end=data.get("source_end"),
        )


@dataclass(frozen=True)
class Link:
    """A link inside a window's text, with where it points (relative targets resolved
    against the document's url)."""

    text: str
    url: str
    #: Characters (Unicode code points) of the link's text in the window's ``text``.
    start: int
    end: int

    @classmethod
    def from_json(cls, data: JsonObject) -> Link:
        return cls(text=data["text"], url=data["url"], start=data["start"], end=data["end"])


@dataclass(frozen=True)
class Scores:
    #: Best fused score among the window's matched sentences.
    fused: float
    #: The reranker's score, when the window was reranked.
    rerank: Optional[float] = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Cosine similarity of the question and the window's closest matched sentence.
    similarity: float = 0.0
    #: Calibrated probability (0 to 1) that the window answers the question: comparable
    #: across questions, unlike ``fused`` (0 from an older server).
    relevance: float = 0.0

    _KNOWN = frozenset({"fused", "rerank", "similarity", "relevance"})

    @classmethod
    def from_json(cls, data: JsonObject) -> Scores:
        return cls(
            fused=data["fused"],
            rerank=data.get("rerank"),
            extra=_extra(data, cls._KNOWN),
            similarity=data.get("similarity", 0.0),
            relevance=data.get("relevance", 0.0),
        )


@dataclass(frozen=True)
class Window:
    """One answer window: a run of sentences around the hits, with what a citation needs."""

    doc_id: str
    title: str
    url: Optional[str]
    tenant: Optional[str]
    #: Headings from the top of the document down to the window's section.
    section_path: list[str]
    #: The document revision these sentences were indexed from.
    revision: int
    text: str
    #: Character range (Unicode code points) of ``text`` in the document.
    char_start: int
    char_end: int
    matches: list[Match]
    scores: Scores
    #: Estimated tokens of ``text``.
    tokens: int
    #: Fields this client does not know yet (a newer server's), as the server sent them.
    extra: dict[str, Any] = field(default_factory=dict)
    #: The document's metadata, as its change event gave it (``{}`` when it had none, or
    #: from a server older than metadata).
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Characters of the content as it was submitted that produced the window: slicing
    #: the submitted page with them gives the span (``None`` when not known).
    source_start: Optional[int] = None
    source_end: Optional[int] = None
    #: Links inside ``text``.
    links: list[Link] = field(default_factory=list)
    #: The address of the exact revision the window was read from, when its source gives
    #: one (a wiki's ``index.php?oldid=N``); ``url`` is the page's.
    revision_url: Optional[str] = None

    _KNOWN = frozenset(
        {
            "doc_id", "title", "url", "tenant", "section_path", "revision", "text",
            "char_start", "char_end", "matches", "scores", "tokens", "metadata",
            "source_start", "source_end", "links", "revision_url",
        }
    )  # fmt: skip

    @classmethod
    def from_json(cls, data: JsonObject) -> Window:
        metadata = data.get("metadata")
        return cls(
            doc_id=data["doc_id"],
            title=data.get("title", ""),
            url=data.get("url"),
            tenant=data.get("tenant"),
            section_path=list(data.get("section_path", [])),
            revision=data["revision"],
            text=data["text"],
            char_start=data["char_start"],
            char_end=data["char_end"],
            matches=[Match.from_json(m) for m in data.get("matches", [])],
            scores=Scores.from_json(data.get("scores", {"fused": 0.0})),
            tokens=data.get("tokens", 0),
            extra=_extra(data, cls._KNOWN),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
            source_start=data.get("source_start"),
            source_end=data.get("source_end"),
            links=[Link.from_json(link) for link in data.get("links", [])],
            revision_url=data.get("revision_url"),
        )

    @property
    def score(self) -> float:
        """The score the window was ordered by: the reranker's when it ran, else fused."""
        return self.scores.rerank if self.scores.rerank is not None else self.scores.fused

    @property
    def citation(self) -> str:
        """A human-readable citation: title › sections (doc, revision, characters, the
        page's url and the revision's own, when known)."""
        place = " › ".join(part for part in [self.title, *self.section_path] if part)
        where = (
            f"doc {self.doc_id}, revision {self.revision}, "
            f"characters {self.char_start}..{self.char_end}"
        )
        if self.url:
            where += f", {self.url}"
        if self.revision_url:
            where += f", {self.revision_url}"
        return f"{place} ({where})" if place else f"({where})"


@dataclass(frozen=True)
class SearchResponse:
    #: Windows in final order (reranked when ``reranker`` is set).
    windows: list[Window]
    #: The reranker that ordered the windows, if any.
    reranker: Optional[str] = None
    #: Milliseconds per stage, when the request asked for ``timings``.
    timings_ms: Optional[dict[str, float]] = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Why fewer than ``top_k`` windows came back, when they did: ``no_more_matches``,
    #: ``token_budget``, ``min_relevance`` (the index's "I don't know"), ``search_limit``.
    short: Optional[str] = None

    _KNOWN = frozenset({"windows", "reranker", "timings_ms", "short"})

    @classmethod
    def from_json(cls, data: JsonObject) -> SearchResponse:
        timings = data.get("timings_ms")
        return cls(
            windows=[Window.from_json(w) for w in data.get("windows", [])],
            reranker=data.get("reranker"),
            timings_ms=dict(timings) if timings is not None else None,
            extra=_extra(data, cls._KNOWN),
            short=data.get("short"),
        )


@dataclass(frozen=True)
class Section:
    section_id: str
    path: list[str]
    sentences: int
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = frozenset({"section_id", "path", "sentences"})

    @classmethod
    def from_json(cls, data: JsonObject) -> Section:
        return cls(
            section_id=data["section_id"],
            path=list(data.get("path", [])),
            sentences=data.get("sentences", 0),
            extra=_extra(data, cls._KNOWN),
        )


@dataclass(frozen=True)
class DocumentInfo:
    """``GET /v1/documents/{doc_id}``: what the index holds of a document."""

    doc_id: str
    revision: int
    #: A tombstone: the document was deleted at ``revision``.
    deleted: bool
    title: str
    url: Optional[str]
    tenant: Optional[str]
    sentence_count: int
    sections: list[Section]
    extra: dict[str, Any] = field(default_factory=dict)
    #: The indexed revision's own address, when its source gives one.
    revision_url: Optional[str] = None

    _KNOWN = frozenset(
        {
            "doc_id", "revision", "deleted", "title", "url", "tenant", "sentence_count",
            "sections", "revision_url",
        }
    )  # fmt: skip

    @classmethod
    def from_json(cls, data: JsonObject) -> DocumentInfo:
        return cls(
            doc_id=data["doc_id"],
            revision=data["revision"],
            deleted=data.get("deleted", False),
            title=data.get("title", ""),
            url=data.get("url"),
            tenant=data.get("tenant"),
            sentence_count=data.get("sentence_count", 0),
            sections=[Section.from_json(s) for s in data.get("sections", [])],
            extra=_extra(data, cls._KNOWN),
            revision_url=data.get("revision_url"),
        )


EventStatus = Literal["applied", "deleted", "stale", "accepted"]


@dataclass(frozen=True)
class EventResult:
    """The all-in-one's answer to ``POST /v1/events`` (a rejected event raises
    :class:`~casement_client.EventRejectedError` instead)."""

    #: ``applied``/``deleted``: indexed; ``stale``: not newer than the indexed revision,
    #: nothing changed; ``accepted``: still in the pipeline after the server's wait, kept
    #: in its journal and applied later (search with ``min_revision`` to wait for it).
    status: str
    doc_id: Optional[str] = None
    revision: Optional[int] = None
    #: Sentence decisions: ``embedded``, ``reused``, ``payload_updated``, ``deleted``,
    #: ``unchanged``.
    sentences: dict[str, int] = field(default_factory=dict)
    #: With ``stale``: the revision the index holds.
    indexed_revision: Optional[int] = None
    message: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = frozenset(
        {"status", "doc_id", "revision", "sentences", "indexed_revision", "message"}
    )

    @classmethod
    def from_json(cls, data: JsonObject) -> EventResult:
        return cls(
            status=data.get("status", ""),
            doc_id=data.get("doc_id"),
            revision=data.get("revision"),
            sentences=dict(data.get("sentences") or {}),
            indexed_revision=data.get("indexed_revision"),
            message=data.get("message"),
            extra=_extra(data, cls._KNOWN),
        )

    @property
    def indexed(self) -> bool:
        """The event is in the index now (applied or deleted)."""
        return self.status in ("applied", "deleted")


class _NativeEventKeys(TypedDict):
    type: Literal["upsert", "delete"]
    doc_id: str
    #: Comparable per document: a newer revision has a larger number.
    revision: int


class NativeEvent(_NativeEventKeys, total=False):
    """A native change event (``shared/events/schema/native-event.schema.json``).

    ``format`` and ``content`` are required for an ``upsert``."""

    title: str
    format: Literal["markdown", "html", "text", "wikitext"]
    content: str
    tenant: str
    url: str
    #: Free-form JSON object, returned on every window of the document (``Window.metadata``);
    #: searches filter on the keys the server lists in ``store.indexed_metadata``. A
    #: revision that changes only the metadata rewrites payloads without re-embedding.
    metadata: Mapping[str, Any]
    #: RFC 3339 time of the change at the source.
    event_time: str


#: What ``send_event`` takes: a native event, or any other format the all-in-one decodes
#: (CloudEvents, Debezium, MediaWiki ``page_change``) as a JSON object.
Event = Union[NativeEvent, Mapping[str, Any]]
