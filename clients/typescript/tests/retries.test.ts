/** Retries, timeouts, errors and what goes on the wire, against scripted local servers. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { afterEach, test } from "node:test";

import {
  CasementClient,
  CasementError,
  DEFAULT_RETRY,
  VERSION,
  backoffDelayMs,
  parseRetryAfter,
  retryDelayMs,
} from "../src/index.js";
import { ScriptedServer, closedPort, windowJson, type Reply } from "./helpers.js";

const FAST = { backoffMs: 1, maxBackoffMs: 5 };
const SEARCH_OK: Reply = { status: 200, body: { windows: [windowJson()], reranker: null } };
const UNAVAILABLE: Reply = {
  status: 503,
  headers: { "retry-after": "0" },
  body: { error: { code: "unavailable", message: "the store is unavailable" } },
};

let servers: ScriptedServer[] = [];
async function scripted(...replies: Reply[]): Promise<ScriptedServer> {
  const server = await ScriptedServer.start(replies);
  servers.push(server);
  return server;
}
afterEach(async () => {
  await Promise.all(servers.map((server) => server.close()));
  servers = [];
});

async function rejection(promise: Promise<unknown>): Promise<CasementError> {
  const error = await promise.then(
    () => assert.fail("no error"),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof CasementError, String(error));
  return error;
}

test("a 503 with Retry-After: 0 is retried, then the 200 is returned", async () => {
  const server = await scripted(UNAVAILABLE, SEARCH_OK);
  const client = new CasementClient({ baseUrl: server.url, apiKey: "k", ...FAST });
  const answer = await client.search("vpn token", { top_k: 1 });
  assert.equal(answer.windows[0]?.text, "Reset the token in the portal.");
  assert.equal(server.requests.length, 2);
  assert.deepEqual(server.requests[1]?.body, { query: "vpn token", top_k: 1 });
});

test("Retry-After is waited for (at least its seconds)", async () => {
  const server = await scripted({ ...UNAVAILABLE, headers: { "retry-after": "1" } }, SEARCH_OK);
  const client = new CasementClient({ baseUrl: server.url, ...FAST });
  await client.search("vpn");
  const [first, second] = server.requests;
  assert.ok(first && second);
  assert.ok(second.at - first.at >= 950, `retried after ${second.at - first.at} ms`);
});

test("a server that always answers 429 is given up on after maxRetries, with its status and message", async () => {
  const server = await scripted({
    status: 429,
    headers: { "retry-after": "0" },
    body: { error: { code: "rate_limited", message: "slow down" } },
  });
  const client = new CasementClient({ baseUrl: server.url, maxRetries: 2, ...FAST });
  const error = await rejection(client.search("vpn"));
  assert.equal(server.requests.length, 3);
  assert.equal(error.status, 429);
  assert.equal(error.code, "rate_limited");
  assert.equal(error.serverMessage, "slow down");
  assert.equal(error.attempts, 3);
  assert.equal(error.retryAfterSeconds, 0);
  assert.equal(error.message, "429 rate_limited: slow down (after 3 attempts)");
});

test("a 429 without Retry-After backs off and retries", async () => {
  const server = await scripted({ status: 429, body: {} }, { status: 429, body: {} }, SEARCH_OK);
  const client = new CasementClient({ baseUrl: server.url, ...FAST });
  assert.equal((await client.search("vpn")).windows.length, 1);
  assert.equal(server.requests.length, 3);
});

test("a Retry-After over maxRetryAfterMs is not waited for", async () => {
  const server = await scripted({ ...UNAVAILABLE, headers: { "retry-after": "120" } });
  const client = new CasementClient({ baseUrl: server.url, ...FAST });
  const error = await rejection(client.search("vpn"));
  assert.equal(server.requests.length, 1);
  assert.equal(error.status, 503);
  assert.equal(error.retryAfterSeconds, 120);
});

test("maxRetries 0 never retries", async () => {
  const server = await scripted(UNAVAILABLE, SEARCH_OK);
  const client = new CasementClient({ baseUrl: server.url, maxRetries: 0 });
  const error = await rejection(client.search("vpn"));
  assert.equal(server.requests.length, 1);
  assert.equal(error.code, "unavailable");
});

test("a 4xx is not retried", async () => {
  const server = await scripted({ status: 422, body: { error: { code: "invalid_request", message: "no" } } }, SEARCH_OK);
  const client = new CasementClient({ baseUrl: server.url, ...FAST });
  const error = await rejection(client.search("vpn"));
  assert.equal(server.requests.length, 1);
  assert.equal(error.status, 422);
});

test("a dropped connection is retried (postEvent too: revisions are fenced)", async () => {
  const server = await scripted({ drop: true }, { status: 200, body: { status: "applied", doc_id: "kb/a", revision: 3 } });
  const client = new CasementClient({ baseUrl: server.url, ...FAST });
  const answer = await client.postEvent({ type: "delete", doc_id: "kb/a", revision: 3 });
  assert.equal(answer.status, "applied");
  assert.equal(server.requests.length, 2);
  assert.equal(server.requests[1]?.path, "/v1/events");
});

test("a refused connection is retried, then thrown as a network CasementError", async () => {
  const client = new CasementClient({ baseUrl: `http://127.0.0.1:${await closedPort()}`, maxRetries: 2, ...FAST });
  const error = await rejection(client.document("kb/a"));
  assert.equal(error.kind, "network");
  assert.equal(error.status, 0);
  assert.equal(error.attempts, 3);
  assert.match(error.message, /ECONNREFUSED/);
});

test("no answer within timeoutMs is a timeout CasementError, not retried", async () => {
  const server = await scripted({ hang: true });
  const client = new CasementClient({ baseUrl: server.url, timeoutMs: 200, ...FAST });
  const error = await rejection(client.search("vpn"));
  assert.equal(error.kind, "timeout");
  assert.equal(error.attempts, 1);
  assert.equal(server.requests.length, 1);
});

test("an abort signal stops the retries and their waits", async () => {
  const server = await scripted({ ...UNAVAILABLE, headers: { "retry-after": "30" } });
  const client = new CasementClient({ baseUrl: server.url });
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("caller gave up")), 100);
  await assert.rejects(client.search("vpn", {}, { signal: controller.signal }), /caller gave up/);
  assert.equal(server.requests.length, 1);
});

test("a 409 carries the document and revision still behind", async () => {
  const message = "document kb/a is indexed at revision 3 (asked for at least 4)";
  const server = await scripted({
    status: 409,
    body: { error: { code: "revision_not_indexed", message, doc_id: "kb/a", indexed_revision: 3 } },
  });
  const client = new CasementClient({ baseUrl: server.url, ...FAST });
  const error = await rejection(client.search({ query: "a", min_revision: { "kb/a": 4 } }));
  assert.deepEqual([error.status, error.code, error.docId, error.indexedRevision], [409, "revision_not_indexed", "kb/a", 3]);
  assert.equal(error.attempts, 1);
  assert.deepEqual(server.requests[0]?.body, { query: "a", min_revision: { "kb/a": 4 } });
});

test("a non-JSON error body becomes the message; a non-JSON 200 is invalid_response", async () => {
  const server = await scripted({ status: 502, raw: "bad gateway\n" }, { status: 200, raw: "<html>" });
  const client = new CasementClient({ baseUrl: server.url, ...FAST });
  const gateway = await rejection(client.search("vpn"));
  assert.deepEqual([gateway.status, gateway.code, gateway.serverMessage], [502, undefined, "bad gateway"]);
  assert.equal(gateway.body, "bad gateway\n");
  const invalid = await rejection(client.search("vpn"));
  assert.deepEqual([invalid.kind, invalid.status, invalid.body], ["invalid_response", 200, "<html>"]);
});

test("the fetch option replaces the global fetch", async () => {
  const seen: string[] = [];
  const client = new CasementClient({
    baseUrl: "http://casement.invalid:8080",
    fetch: async (input) => {
      seen.push(String(input));
      return new Response(JSON.stringify({ windows: [], reranker: null }), { status: 200 });
    },
  });
  assert.deepEqual((await client.search("q")).windows, []);
  assert.deepEqual(seen, ["http://casement.invalid:8080/v1/search"]);
});

test("the wire: bearer key, user-agent, JSON body, document ids with slashes and the tenant", async () => {
  const server = await scripted({
    status: 200,
    body: { doc_id: "kb/a b", revision: 1, deleted: false, title: "A", url: null, tenant: "t", sentence_count: 0, sections: [] },
  });
  const client = new CasementClient({ baseUrl: `${server.url}/`, apiKey: "secret-key", headers: { "X-Request-Id": "r1" } });
  const info = await client.document("kb/a b", { tenant: "t" });
  assert.equal(info.tenant, "t");
  const [request] = server.requests;
  assert.ok(request);
  assert.equal(request.method, "GET");
  assert.equal(request.path, "/v1/documents/kb/a%20b?tenant=t");
  assert.equal(request.headers["authorization"], "Bearer secret-key");
  assert.equal(request.headers["x-request-id"], "r1");
  assert.equal(request.headers["user-agent"], `casement-client-typescript/${VERSION}`);
  await client.search({ query: "q", doc_ids: ["kb/a"], rerank: true });
  assert.equal(server.requests[1]?.headers["content-type"], "application/json");
  assert.deepEqual(server.requests[1]?.body, { query: "q", doc_ids: ["kb/a"], rerank: true });
});

test("backoff is exponential, capped and jittered; Retry-After is seconds or an HTTP date", () => {
  const policy = { ...DEFAULT_RETRY, backoffMs: 100, maxBackoffMs: 1000 };
  assert.deepEqual([1, 2, 3, 4, 5, 6].map((retry) => backoffDelayMs(policy, retry, () => 1)), [100, 200, 400, 800, 1000, 1000]);
  assert.equal(backoffDelayMs(policy, 3, () => 0), 0);
  assert.equal(retryDelayMs(policy, 3, undefined, () => 1), 400);
  assert.equal(retryDelayMs(policy, 4, undefined), undefined, "the 4th retry is past maxRetries 3");
  assert.equal(retryDelayMs(policy, 1, 2, () => 0), 2000);
  assert.equal(retryDelayMs(policy, 1, 61), undefined, "over maxRetryAfterMs");
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("7", now), 7);
  assert.equal(parseRetryAfter(" 0 ", now), 0);
  assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), 30);
  assert.equal(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now), 0);
  assert.equal(parseRetryAfter("soon", now), undefined);
  assert.equal(parseRetryAfter("-1", now), undefined);
  assert.equal(parseRetryAfter(null, now), undefined);
});

test("the package's version is the client's", () => {
  const path = process.env["CASEMENT_TEST_PACKAGE_JSON"];
  assert.ok(path, "$CASEMENT_TEST_PACKAGE_JSON is not set: run the tests with clients/typescript/run-tests.sh");
  const pkg = JSON.parse(readFileSync(path, "utf8")) as { version: string; dependencies?: unknown };
  assert.equal(pkg.version, VERSION);
  assert.equal(pkg.dependencies, undefined, "no runtime dependencies");
});
