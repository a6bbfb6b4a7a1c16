/** The client against the real `casement run` on the bundled sample that run-tests.sh started. */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { before, describe, test } from "node:test";

import {
  CasementClient,
  CasementError,
  citation,
  type EventRequest,
  type SearchRequest,
  type SearchResponse,
} from "../src/index.js";
import { SERVER_URL, closedPort, finalRevisions, goldenCases, liveClient, normalized, sampleIndexed } from "./helpers.js";

const client = liveClient();

before(async () => {
  await sampleIndexed(client);
});

test("healthz and readyz are true on the server, false on a closed port", async () => {
  assert.equal(await client.healthz(), true);
  assert.equal(await client.readyz(), true);
  const nobody = new CasementClient({ baseUrl: `http://127.0.0.1:${await closedPort()}`, maxRetries: 5 });
  assert.equal(await nobody.healthz(), false);
  assert.equal(await nobody.readyz(), false);
});

describe("search over the sample's golden set", () => {
  for (const golden of goldenCases()) {
    test(`${golden.id}: the top window is from ${golden.doc_id} and a window holds the answer`, async () => {
      const answer = await client.search(golden.query, { top_k: 5 });
      const top = answer.windows[0];
      assert.ok(top, "no window");
      assert.equal(top.doc_id, golden.doc_id, JSON.stringify(answer.windows.map((w) => w.doc_id)));
      assert.ok(
        answer.windows.some((w) => w.doc_id === golden.doc_id && normalized(w.text).includes(normalized(golden.text))),
        `no window of ${golden.doc_id} holds ${JSON.stringify(golden.text)}`,
      );
    });
  }
});

test("windows carry exact citation ranges; document() of a hit reports its revision", async () => {
  const golden = goldenCases()[0]!;
  const request: SearchRequest = { query: golden.query, top_k: 3, timings: true };
  const answer: SearchResponse = await client.search(request);
  assert.ok(answer.timings_ms && answer.timings_ms.total >= 0);
  assert.equal(answer.reranker, "learned:shipped", "the learned ranker orders answers by default");
  assert.ok(answer.windows.length > 0 && answer.windows.length <= 3);
  for (const window of answer.windows) {
    assert.ok(window.title && window.revision >= 1 && window.tokens > 0);
    assert.equal(window.char_end - window.char_start, [...window.text].length);
    assert.ok(window.matches.length > 0, "a window without its matched sentences");
    for (const match of window.matches) {
      const offset = match.char_start - window.char_start;
      assert.equal([...window.text].slice(offset, offset + [...match.sentence].length).join(""), match.sentence);
      assert.ok(window.char_start <= match.char_start && match.char_start < match.char_end);
      assert.ok(match.char_end <= window.char_end);
    }
    assert.equal(typeof window.scores.rerank, "number", "reranked by default: each window has its rerank score");
    const cited = citation(window);
    assert.ok(cited.includes(`doc ${window.doc_id}, revision ${window.revision}`), cited);
  }
  const top = answer.windows[0]!;
  const indexed = await client.document(top.doc_id);
  assert.equal(indexed.doc_id, top.doc_id);
  assert.equal(indexed.revision, top.revision);
  assert.equal(indexed.deleted, false);
  assert.equal(indexed.sentence_count, indexed.sections.reduce((sum, section) => sum + section.sentences, 0));
});

test("document() reports every live page at its last revision; an unknown id is a 404 CasementError", async () => {
  for (const [docId, revision] of finalRevisions()) {
    const info = await client.document(docId);
    assert.equal(info.doc_id, docId);
    assert.ok(info.revision >= revision && !info.deleted);
  }
  const error = await client.document("clients-typescript/no-such-document").then(
    () => assert.fail("no error"),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof CasementError);
  assert.equal(error.status, 404);
  assert.equal(error.code, "not_found");
  assert.equal(error.serverMessage, 'document "clients-typescript/no-such-document" is not indexed');
  assert.equal(error.attempts, 1);
});

test("read your writes: postEvent a native upsert, then search with min_revision sees it; a repeat is stale", async () => {
  const docId = `clients-typescript/badges-${randomUUID().slice(0, 8)}`;
  const event: EventRequest = {
    type: "upsert",
    doc_id: docId,
    revision: 1,
    title: "Visitor badges",
    format: "markdown",
    content: "# Visitor badges\n\nThe quokka clerk prints visitor badges at the lobby kiosk. Badges expire at midnight.",
    url: "https://wiki.example/badges",
    metadata: { team: "facilities" },
  };
  const first = await client.postEvent(event);
  assert.equal(first.status, "applied");
  assert.equal(first.doc_id, docId);
  assert.equal(first.revision, 1);
  assert.ok((first.sentences?.embedded ?? 0) >= 1, JSON.stringify(first));

  const answer = await client.search({
    query: "Where does the quokka clerk print visitor badges?",
    min_revision: { [docId]: 1 },
  });
  const top = answer.windows[0];
  assert.ok(top);
  assert.deepEqual([top.doc_id, top.revision, top.url], [docId, 1, "https://wiki.example/badges"]);
  assert.ok(top.text.includes("quokka clerk prints visitor badges"));

  // Revision 2, with the search asked first: the server holds it until the edit is in.
  const second: EventRequest = {
    type: "upsert",
    doc_id: docId,
    revision: 2,
    title: "Visitor badges",
    format: "markdown",
    content: "# Visitor badges\n\nThe quokka clerk prints visitor badges at the lobby kiosk. Badges expire at noon on Fridays.",
  };
  const searching = client.search("When do quokka clerk visitor badges expire?", {
    doc_ids: [docId],
    min_revision: { [docId]: 2 },
  });
  const applied = await liveClient().postEvent(second);
  const waited = await searching;
  assert.equal(applied.status, "applied");
  assert.deepEqual(
    waited.windows.map((w) => w.revision),
    waited.windows.map(() => 2),
  );
  assert.ok(waited.windows[0]?.text.includes("noon on Fridays"));

  // Why retrying postEvent is safe: revisions are fenced, a repeat changes nothing.
  const repeat = await client.postEvent(second);
  assert.equal(repeat.status, "stale");
  assert.equal(repeat.indexed_revision, 2);
});

test("a metadata filter keeps only the document posted with that metadata; its windows carry it", async () => {
  const run = randomUUID().slice(0, 8);
  const pages: [string, string, Record<string, unknown>][] = [
    [
      `clients-typescript/greenhouse-${run}`,
      "The pelican gardener waters the rooftop greenhouse every Tuesday morning. Seedlings wait in the cold frame until May.",
      { team: `gardens-${run}`, tier: 1, labels: ["plants", "roof"], doc_id: "not-the-doc-id" },
    ],
    [
      `clients-typescript/greenhouse-keys-${run}`,
      "The pelican gardener keeps the rooftop greenhouse keys at the security desk. Sign them out every Tuesday morning.",
      { team: `security-${run}`, tier: [2, 3] },
    ],
  ];
  for (const [docId, text, metadata] of pages) {
    const event: EventRequest = { type: "upsert", doc_id: docId, revision: 1, format: "text", content: text, metadata };
    const sent = await client.postEvent(event);
    assert.ok(sent.status === "applied" || sent.status === "accepted", JSON.stringify(sent));
  }
  const [[gardens, , gardensMetadata], [keys, , keysMetadata]] = pages as [typeof pages[0], typeof pages[0]];
  const query = "When does the pelican gardener water the rooftop greenhouse?";
  const docs = (answer: SearchResponse) => new Set(answer.windows.map((w) => w.doc_id));

  // Unfiltered, both answer (they share their words).
  const both = await client.search(query, { top_k: 10, min_revision: { [gardens]: 1, [keys]: 1 } });
  assert.ok(docs(both).has(gardens) && docs(both).has(keys), JSON.stringify([...docs(both)]));

  for (const [docId, , metadata] of pages) {
    const answer = await client.search(query, { top_k: 10, metadata: { team: metadata["team"] as string } });
    assert.deepEqual(docs(answer), new Set([docId]));
    for (const window of answer.windows) assert.deepEqual(window.metadata, metadata);
  }
  // Any of an array's values; an integer matches one element of a stored array; all keys must hold.
  const teams = [gardensMetadata["team"] as string, keysMetadata["team"] as string];
  assert.deepEqual(docs(await client.search({ query, top_k: 10, metadata: { team: teams } })), new Set([gardens, keys]));
  assert.deepEqual(docs(await client.search({ query, top_k: 10, metadata: { team: teams, tier: 3 } })), new Set([keys]));
  assert.deepEqual(docs(await client.search({ query, top_k: 10, metadata: { team: teams, tier: [4, 5] } })), new Set());
  // The event's doc_id key is the metadata's, not the window's.
  const top = (await client.search(query, { metadata: { team: teams[0]! } })).windows[0];
  assert.equal(top?.doc_id, gardens);
});

test("a metadata filter on an undeclared key is a 422 CasementError with the server's message", async () => {
  const message = "metadata.audience: not a filterable key; these are: team, tier";
  await assert.rejects(client.search("greenhouse", { metadata: { audience: "staff" } }), (error: unknown) => {
    assert.ok(error instanceof CasementError);
    assert.equal(error.status, 422);
    assert.equal(error.code, "invalid_request");
    assert.equal(error.serverMessage, message);
    assert.equal(error.message, `422 invalid_request: ${message}`);
    assert.equal(error.attempts, 1);
    return true;
  });
});

describe("a 4xx throws a CasementError with the server's status, code and message, not retried", () => {
  const cases: [string, SearchRequest, string][] = [
    ["top_k 0", { query: "leave", top_k: 0 }, "top_k = 0 must be between 1 and 50"],
    ["empty query", { query: "   " }, "query must not be empty"],
    ["window_radius 99", { query: "leave", window_radius: 99 }, "window_radius = 99 is larger than the indexed radius 3"],
  ];
  for (const [name, request, message] of cases) {
    test(name, async () => {
      await assert.rejects(client.search(request), (error: unknown) => {
        assert.ok(error instanceof CasementError);
        assert.equal(error.kind, "http");
        assert.equal(error.status, 422);
        assert.equal(error.code, "invalid_request");
        assert.equal(error.serverMessage, message);
        assert.equal(error.message, `422 invalid_request: ${message}`);
        assert.equal(error.attempts, 1);
        assert.deepEqual(error.body, { error: { code: "invalid_request", message } });
        return true;
      });
    });
  }
});

test("a rejected event throws a CasementError with rejected set and the reason as code", async () => {
  await assert.rejects(
    client.postEvent({ type: "upsert", doc_id: "clients-typescript/no-format", revision: 1 }),
    (error: unknown) => {
      assert.ok(error instanceof CasementError);
      assert.equal(error.status, 422);
      assert.equal(error.code, "schema");
      assert.equal(error.serverMessage, "an upsert needs a format");
      assert.equal(error.rejected, true);
      return true;
    },
  );
});

test("the API key goes as a bearer token: without it or with a wrong one, 401 unauthorized", async () => {
  for (const apiKey of ["", "wrong-key"]) {
    const anonymous = new CasementClient({ baseUrl: SERVER_URL(), apiKey });
    await assert.rejects(anonymous.search("badges"), (error: unknown) => {
      assert.ok(error instanceof CasementError);
      assert.equal(error.status, 401);
      assert.equal(error.code, "unauthorized");
      assert.match(error.serverMessage, /Authorization: Bearer/);
      return true;
    });
    // Probes are open.
    assert.equal(await anonymous.readyz(), true);
  }
});
