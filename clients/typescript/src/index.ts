/**
 * `@casement/client`: a typed client for Casement's HTTP API.
 *
 * ```ts
 * import { CasementClient, citation } from "@casement/client";
 * const casement = new CasementClient({ baseUrl: "http://127.0.0.1:8080" });
 * const { windows } = await casement.search("How do I reset my VPN token?", { top_k: 3 });
 * ```
 */

export { CasementClient, DEFAULT_BASE_URL, DEFAULT_TIMEOUT_MS, VERSION, citation } from "./client.js";
export type { CallOptions, CasementClientOptions } from "./client.js";
export { CasementError } from "./errors.js";
export type { CasementErrorInit, CasementErrorKind } from "./errors.js";
export { DEFAULT_RETRY, RETRY_STATUSES, backoffDelayMs, parseRetryAfter, retryDelayMs } from "./retry.js";
export type { RetryPolicy } from "./retry.js";
export type * from "./types.js";
/** The generated types, whole: `paths`, `components`, `operations`. */
export type { components, operations, paths } from "./schema.js";
