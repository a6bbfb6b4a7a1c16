/**
 * `CasementClient`: a small typed client over Casement's HTTP API (the all-in-one
 * `casement run` or `casement-query`). Its types are the generated ones (`./types.ts`
 * names them from `./schema.ts`); it needs nothing but a global `fetch` (Node >= 20,
 * Deno, Bun, browsers).
 */

import { CasementError } from "./errors.js";
import { DEFAULT_RETRY, RETRY_STATUSES, parseRetryAfter, retryDelayMs, sleep, type RetryPolicy } from "./retry.js";
import type {
  DocumentInfo,
  DocumentQuery,
  EventAnswer,
  EventRequest,
  SearchParams,
  SearchRequest,
  SearchResponse,
  Window,
} from "./types.js";

export const VERSION = "0.1.0";
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
/** Milliseconds per attempt. Above the server's own waits: `min_revision`
 * (`limits.max_wait_ms`, 5 s) and the webhook's (`sources.webhook.wait_ms`, 10 s). */
export const DEFAULT_TIMEOUT_MS = 30_000;

export interface CasementClientOptions extends Partial<RetryPolicy> {
  /** Default `$CASEMENT_URL` (where `process.env` exists), else `http://127.0.0.1:8080`. */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <apiKey>`. Default `$CASEMENT_API_KEY`, else none. */
  apiKey?: string;
  /** Milliseconds for one attempt, answer body included (default 30,000). */
  timeoutMs?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** A `fetch` to use instead of the global one (a proxy agent, a test double). */
  fetch?: typeof fetch;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call, its retries and their waits (the promise rejects with its reason). */
  signal?: AbortSignal;
}

interface Request {
  method: "GET" | "POST";
  path: string;
  query?: Record<string, string | undefined> | undefined;
  body?: unknown;
  signal?: AbortSignal | undefined;
}

function environment(name: string): string | undefined {
  const process = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const value = process?.env?.[name];
  return value === "" ? undefined : value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export class CasementClient {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly retry: Readonly<RetryPolicy>;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;

  constructor(options: CasementClientOptions = {}) {
    const baseUrl = options.baseUrl ?? environment("CASEMENT_URL") ?? DEFAULT_BASE_URL;
    new URL(baseUrl); // throws a TypeError on a malformed URL, here rather than on every call
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retry = Object.freeze({
      maxRetries: options.maxRetries ?? DEFAULT_RETRY.maxRetries,
      backoffMs: options.backoffMs ?? DEFAULT_RETRY.backoffMs,
      maxBackoffMs: options.maxBackoffMs ?? DEFAULT_RETRY.maxBackoffMs,
      maxRetryAfterMs: options.maxRetryAfterMs ?? DEFAULT_RETRY.maxRetryAfterMs,
    });
    for (const [name, value] of Object.entries({ timeoutMs: this.timeoutMs, ...this.retry })) {
      if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be a number >= 0, not ${value}`);
    }
    if (this.timeoutMs === 0) throw new RangeError("timeoutMs must be above 0");
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#headers = { accept: "application/json", "user-agent": `casement-client-typescript/${VERSION}` };
    for (const [name, value] of Object.entries(options.headers ?? {})) this.#headers[name.toLowerCase()] = value;
    const apiKey = options.apiKey ?? environment("CASEMENT_API_KEY");
    // The server checks `Authorization: Bearer <key>` (services/query/src/http.rs).
    if (apiKey) this.#headers["authorization"] = `Bearer ${apiKey}`;
  }

  /**
   * `POST /v1/search`: the windows that answer the query, best first, each with its
   * citation (document, section path, revision, character range, matched sentences).
   *
   * `min_revision: {doc_id: revision}` reads your writes: the server waits (up to its
   * `limits.max_wait_ms`) until each document is indexed at least at that revision, else
   * throws a `CasementError` with status 409, `docId` and `indexedRevision`.
   *
   * `metadata: {key: value}` keeps the documents whose change event's `metadata` has every
   * value given (or one of an array's); its keys must be among the server's
   * `store.indexed_metadata`, else a 422 `invalid_request` naming them. Each window
   * carries its document's `metadata` (`{}` when none).
   *
   * @example client.search("How do I reset my VPN token?", { top_k: 3 })
   * @example client.search({ query: "VPN token", min_revision: { "it/vpn": 42 } })
   * @example client.search("VPN token", { metadata: { team: "it", tier: [1, 2] } })
   */
  search(request: SearchRequest, options?: CallOptions): Promise<SearchResponse>;
  search(query: string, params?: SearchParams, options?: CallOptions): Promise<SearchResponse>;
  search(
    first: SearchRequest | string,
    second?: SearchParams | CallOptions,
    third?: CallOptions,
  ): Promise<SearchResponse> {
    let request: SearchRequest;
    let options: CallOptions | undefined;
    if (typeof first === "string") {
      request = { ...(second as SearchParams | undefined), query: first };
      options = third;
    } else {
      request = first;
      options = second as CallOptions | undefined;
    }
    if (!isPlainObject(request)) throw new TypeError("search takes a query string or a SearchRequest object");
    return this.#call<SearchResponse>({ method: "POST", path: "/v1/search", body: request, signal: options?.signal });
  }

  /** `GET /v1/documents/{doc_id}`: the indexed revision, tombstone, sentence count and
   * sections (404 `not_found` when the index never held it). */
  document(docId: string, query: DocumentQuery & CallOptions = {}): Promise<DocumentInfo> {
    if (typeof docId !== "string" || docId === "") throw new TypeError("docId must be a non-empty string");
    // Ids may hold `/` (the route takes the rest of the path); everything else that is not
    // URL-safe is escaped.
    const path = `/v1/documents/${encodeURIComponent(docId).replace(/%(2F|3A|40)/gi, (escaped) => decodeURIComponent(escaped))}`;
    const { signal, ...params } = query;
    return this.#call<DocumentInfo>({ method: "GET", path, query: params, signal });
  }

  /**
   * `POST /v1/events` (the all-in-one's webhook): index one change event (native, see
   * `shared/events/schema/native-event.schema.json`; CloudEvents, Debezium or MediaWiki
   * `page_change`) and return its outcome: `applied`, `deleted`, `stale` (not newer than
   * the indexed revision: nothing changed) or `accepted` (still in the pipeline, journaled).
   *
   * Retried like every call: revisions are fenced on the server, so a repeat of an event
   * that did arrive answers `stale` and changes nothing. A rejected event throws a
   * `CasementError` with `rejected` set and `code` the reason (`schema`, `not_json`, ...).
   */
  postEvent(event: EventRequest, options?: CallOptions): Promise<EventAnswer> {
    if (!isPlainObject(event)) throw new TypeError("an event is a JSON object");
    return this.#call<EventAnswer>({ method: "POST", path: "/v1/events", body: event, signal: options?.signal });
  }

  /** `GET /healthz` answers 200 (the process is up). Never throws, never retries. */
  healthz(options?: CallOptions): Promise<boolean> {
    return this.#probe("/healthz", options?.signal);
  }

  /** `GET /readyz` answers 200 (models loaded, store reachable). Never throws, never retries. */
  readyz(options?: CallOptions): Promise<boolean> {
    return this.#probe("/readyz", options?.signal);
  }

  toString(): string {
    return `CasementClient(${this.baseUrl})`;
  }

  async #probe(path: string, signal: AbortSignal | undefined): Promise<boolean> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    try {
      const response = await this.#fetch(this.baseUrl + path, {
        headers: this.#headers,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      await response.arrayBuffer();
      return response.status === 200;
    } catch {
      return false;
    }
  }

  async #call<T>(request: Request): Promise<T> {
    const { method, signal } = request;
    let url = this.baseUrl + request.path;
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(request.query ?? {})) if (value !== undefined) query.set(name, value);
    const search = query.toString();
    if (search) url += `?${search}`;
    const headers = { ...this.#headers };
    let body: string | undefined;
    if (request.body !== undefined) {
      body = JSON.stringify(request.body);
      headers["content-type"] = "application/json";
    }
    for (let attempt = 1; ; attempt++) {
      const timeout = AbortSignal.timeout(this.timeoutMs);
      let status: number;
      let text: string;
      let retryAfter: string | null;
      try {
        const init: RequestInit = { method, headers, signal: signal ? AbortSignal.any([signal, timeout]) : timeout };
        if (body !== undefined) init.body = body;
        const response = await this.#fetch(url, init);
        status = response.status;
        retryAfter = response.headers.get("retry-after");
        text = await response.text();
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        if (timeout.aborted) {
          throw new CasementError({
            kind: "timeout",
            method,
            url,
            serverMessage: `no answer within ${this.timeoutMs} ms`,
            attempts: attempt,
            cause: error,
          });
        }
        // A refused, reset or dropped connection: the request did not reach the handler or
        // its answer was lost; repeating it is safe (see retry.ts).
        const delay = retryDelayMs(this.retry, attempt, undefined);
        if (delay === undefined) {
          throw new CasementError({
            kind: "network",
            method,
            url,
            serverMessage: describe(error),
            attempts: attempt,
            cause: error,
          });
        }
        await sleep(delay, signal);
        continue;
      }
      const retryAfterSeconds = parseRetryAfter(retryAfter);
      if (RETRY_STATUSES.has(status)) {
        const delay = retryDelayMs(this.retry, attempt, retryAfterSeconds);
        if (delay !== undefined) {
          await sleep(delay, signal);
          continue;
        }
      }
      if (status >= 400) throw CasementError.fromResponse(method, url, status, text, attempt, retryAfterSeconds);
      try {
        return JSON.parse(text) as T;
      } catch (error) {
        throw new CasementError({
          kind: "invalid_response",
          method,
          url,
          status,
          serverMessage: `answer is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
          body: text,
          attempts: attempt,
          cause: error,
        });
      }
    }
  }
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch's "fetch failed" hides the reason (ECONNREFUSED, ...) in `cause`.
  const cause = error.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return `${error.message}: ${typeof code === "string" ? `${code} ` : ""}${cause.message}`.trim();
  }
  return error.message;
}

/**
 * A human-readable citation of a window, as the Python client's `Window.citation`:
 * `title › sections (doc <id>, revision <n>, characters <start>..<end>[, <url>][, <revision_url>])`.
 */
export function citation(window: Window): string {
  const place = [window.title, ...window.section_path].filter((part) => part).join(" › ");
  let where = `doc ${window.doc_id}, revision ${window.revision}, characters ${window.char_start}..${window.char_end}`;
  if (window.url) where += `, ${window.url}`;
  if (window.revision_url) where += `, ${window.revision_url}`;
  return place ? `${place} (${where})` : `(${where})`;
}
