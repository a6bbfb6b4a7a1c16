/** The one error type of this package, for error answers and for failures to get one. */

import type { ErrorCode } from "./types.js";

/**
 * - `http`: the server answered with an error status (`status`, `code`, `serverMessage`).
 * - `network`: no answer (refused, reset, dropped, DNS), also after the retries.
 * - `timeout`: no answer within `timeoutMs` (not retried: the server may still be at work).
 * - `invalid_response`: a success status whose body is not JSON.
 */
export type CasementErrorKind = "http" | "network" | "timeout" | "invalid_response";

export interface CasementErrorInit {
  kind: CasementErrorKind;
  method: string;
  url: string;
  status?: number;
  code?: string | undefined;
  serverMessage: string;
  body?: unknown;
  attempts: number;
  retryAfterSeconds?: number | undefined;
  cause?: unknown;
}

/**
 * Thrown by every method of `CasementClient` (but `healthz`/`readyz`, which never throw).
 *
 * `message` reads `"<status> <code>: <server's message>"` (e.g.
 * `422 invalid_request: top_k = 0 must be between 1 and 50`); `serverMessage` is the
 * server's `error.message` alone and `body` the whole decoded answer.
 */
export class CasementError extends Error {
  override readonly name = "CasementError";
  readonly kind: CasementErrorKind;
  /** The HTTP status; 0 when no answer came (`network`, `timeout`). */
  readonly status: number;
  /** The server's `error.code` (an `ErrorCode`, or a rejected event's reason: `schema`,
   * `not_json`, `no_content`, ...); undefined without one. */
  readonly code: ErrorCode | (string & {}) | undefined;
  /** The server's `error.message` (or the body's text, or what went wrong on the wire). */
  readonly serverMessage: string;
  /** The decoded JSON body of the answer (its text when not JSON); undefined without one. */
  readonly body: unknown;
  /** Requests made, the first included (more than one after retries). */
  readonly attempts: number;
  readonly method: string;
  readonly url: string;
  /** The last answer's `Retry-After`, in seconds (a 429 or 503 that was not retried again). */
  readonly retryAfterSeconds: number | undefined;
  /** A 409 `revision_not_indexed`: the document still behind its `min_revision`. */
  readonly docId: string | undefined;
  /** A 409 `revision_not_indexed`: the revision the index holds (0: none). */
  readonly indexedRevision: number | undefined;
  /** A 4xx of `POST /v1/events` whose body says `"status": "rejected"` (dead-lettered). */
  readonly rejected: boolean;

  constructor(init: CasementErrorInit) {
    const status = init.status ?? 0;
    const head =
      init.kind === "http"
        ? `${status}${init.code ? ` ${init.code}` : ""}`
        : `${init.method} ${init.url}: ${init.kind === "timeout" ? "timeout" : init.kind === "network" ? "network error" : `answer ${status}`}`;
    const tries = init.attempts > 1 ? ` (after ${init.attempts} attempts)` : "";
    super(`${head}: ${init.serverMessage}${tries}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.status = status;
    this.code = init.code;
    this.serverMessage = init.serverMessage;
    this.body = init.body;
    this.attempts = init.attempts;
    this.method = init.method;
    this.url = init.url;
    this.retryAfterSeconds = init.retryAfterSeconds;
    const detail = errorDetail(init.body);
    this.docId = typeof detail?.["doc_id"] === "string" ? detail["doc_id"] : undefined;
    const indexed = detail?.["indexed_revision"];
    this.indexedRevision = typeof indexed === "number" ? indexed : undefined;
    this.rejected = status >= 400 && status < 500 && isObject(init.body) && init.body["status"] === "rejected";
  }

  /** The error for an error answer, from its status and body text. */
  static fromResponse(
    method: string,
    url: string,
    status: number,
    text: string,
    attempts: number,
    retryAfterSeconds?: number,
  ): CasementError {
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON (a proxy's page): the text is the message.
    }
    const detail = errorDetail(body);
    const code = typeof detail?.["code"] === "string" ? detail["code"] : undefined;
    const given = detail?.["message"];
    const serverMessage =
      typeof given === "string" && given !== "" ? given : text.trim().slice(0, 1000) || `HTTP ${status}`;
    return new CasementError({
      kind: "http",
      method,
      url,
      status,
      code,
      serverMessage,
      body,
      attempts,
      retryAfterSeconds,
    });
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function errorDetail(body: unknown): Record<string, unknown> | undefined {
  if (!isObject(body)) return undefined;
  const error = body["error"];
  return isObject(error) ? error : undefined;
}
