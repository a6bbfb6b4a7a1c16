/**
 * Names for the API's types, every one taken from the generated `schema.ts` (by path,
 * method and status, so a renamed component does not break them); none is declared by
 * hand. Wire field names are the server's (`doc_id`, `top_k`, `min_revision`, ...).
 */

import type { paths } from "./schema.js";

/** The JSON body of a request body or a response object of the generated `paths`. */
export type JsonBody<T> = T extends { content: { "application/json": infer Body } } ? Body : never;

type Search = paths["/v1/search"]["post"];
type GetDocument = paths["/v1/documents/{doc_id}"]["get"];
type PostEvent = paths["/v1/events"]["post"];

/** `POST /v1/search` request: `query` and the optional `top_k`, `tenant`, `doc_ids`,
 * `rerank`, `window_radius`, `min_revision`, `token_budget`, `timings`, `metadata`,
 * `min_relevance`. */
export type SearchRequest = JsonBody<NonNullable<Search["requestBody"]>>;
/** Everything of a search but the query. */
export type SearchParams = Omit<SearchRequest, "query">;
/** `POST /v1/search` answer: the windows in final order, the reranker, the timings. */
export type SearchResponse = JsonBody<Search["responses"][200]>;
/** One cited window: text, document, section path, revision, character range, matches, scores. */
export type Window = SearchResponse["windows"][number];
/** A matched sentence of a window, with its character range in the document. */
export type Match = Window["matches"][number];
/** A window's scores: `fused` (retrieval), `rerank` (null unless reranked),
 * `similarity` and the calibrated `relevance` (0 to 1, comparable across questions). */
export type Scores = Window["scores"];
/** A link inside a window's text: its text, target and characters in the text. */
export type Link = Window["links"][number];
/** Read-your-writes: `{doc_id: revision}` the search waits for (`SearchRequest.min_revision`). */
export type MinRevision = NonNullable<SearchRequest["min_revision"]>;
/** `{key: value}` conditions on the documents' event metadata, all required: a string,
 * integer or boolean, or an array of strings or of integers (any of them). Keys must be
 * among the server's `store.indexed_metadata`, else a 422 (`SearchRequest.metadata`). */
export type MetadataFilter = NonNullable<SearchRequest["metadata"]>;

/** `GET /v1/documents/{doc_id}` answer: indexed revision, tombstone, sections. */
export type DocumentInfo = JsonBody<GetDocument["responses"][200]>;
/** The query parameters of `GET /v1/documents/{doc_id}` (`tenant`). */
export type DocumentQuery = NonNullable<GetDocument["parameters"]["query"]>;

/** `POST /v1/events` request: one change event (native, CloudEvents, Debezium, MediaWiki). */
export type EventRequest = JsonBody<NonNullable<PostEvent["requestBody"]>>;
/** `POST /v1/events` answer (200 or 202): `applied`, `deleted`, `stale` or `accepted`. */
export type EventAnswer = JsonBody<PostEvent["responses"][200]>;
/** `EventAnswer.status`. */
export type EventStatus = EventAnswer["status"];

/** The body of an error answer: `{"error": {"code", "message", ...}}`. */
export type ErrorBody = JsonBody<Search["responses"][422]>;
/** `ErrorBody.error.code`: `invalid_request`, `not_found`, `revision_not_indexed`, ... */
export type ErrorCode = ErrorBody["error"]["code"];
