/**
 * When to retry a request, and how long to wait first (as the Python client does).
 *
 * Retried: 429 and 503 answers (waiting at least what their `Retry-After` says) and
 * network failures (refused, reset or dropped connections). Not retried: every other
 * status (a 4xx fails again; a 409 already waited on the server) and a timeout (the server
 * may still be working on it; a retry would double its load). Every call of this API is
 * safe to repeat: searches and document reads are reads, and events are fenced by revision
 * on the server, so an event posted twice is applied once (the repeat answers `stale`).
 *
 * Backoff is exponential with full jitter: before retry `n` (1-based) wait a uniform
 * random time in `[0, min(maxBackoffMs, backoffMs * 2 ** (n - 1))]`.
 */

export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 503]);

export interface RetryPolicy {
  /** Retries after the first attempt (0: never retry). */
  maxRetries: number;
  /** Milliseconds; the cap of the first backoff, doubled for each later one. */
  backoffMs: number;
  /** Milliseconds; no backoff is longer. */
  maxBackoffMs: number;
  /** Milliseconds; a `Retry-After` longer than this is not waited for: the error is thrown. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  maxRetries: 3,
  backoffMs: 500,
  maxBackoffMs: 8_000,
  maxRetryAfterMs: 60_000,
});

/** Milliseconds to wait before retry number `retry` (1-based) without a `Retry-After`. */
export function backoffDelayMs(policy: RetryPolicy, retry: number, random: () => number = Math.random): number {
  const cap = Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** (retry - 1));
  return random() * cap;
}

/**
 * Milliseconds to wait before retry `retry` (1-based), or `undefined`: do not retry (the
 * retries are used up, or the server asks for a longer wait than `maxRetryAfterMs`).
 */
export function retryDelayMs(
  policy: RetryPolicy,
  retry: number,
  retryAfterSeconds: number | undefined,
  random: () => number = Math.random,
): number | undefined {
  if (retry > policy.maxRetries) return undefined;
  if (retryAfterSeconds === undefined) return backoffDelayMs(policy, retry, random);
  const asked = retryAfterSeconds * 1000;
  if (asked > policy.maxRetryAfterMs) return undefined;
  // At least what the server asked, plus a little jitter so that clients told the same
  // Retry-After do not all come back in the same instant.
  return asked + random() * (Math.min(policy.backoffMs, 1000) / 4);
}

/** `Retry-After` as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  if (!/[a-z]/i.test(trimmed)) return undefined;
  const when = Date.parse(trimmed);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, (when - now) / 1000);
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
