/**
 * Compile-time checks: the client's types are the generated ones, and misuse does not
 * type-check (each `@ts-expect-error` fails tsc when the line below it stops being an
 * error). The functions are never called; the test only makes the file a test.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  CasementClient,
  CasementError,
  type DocumentInfo,
  type ErrorCode,
  type EventAnswer,
  type Match,
  type MetadataFilter,
  type SearchRequest,
  type SearchResponse,
  type Window,
  type components,
  type paths,
} from "../src/index.js";

/** `true` only when `A` and `B` are the same type. */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const same = <A, B>(proof: Same<A, B>): Same<A, B> => proof;

export async function typedUse(client: CasementClient): Promise<void> {
  same<SearchRequest, components["schemas"]["SearchRequest"]>(true);
  same<SearchResponse, paths["/v1/search"]["post"]["responses"][200]["content"]["application/json"]>(true);
  same<Window, components["schemas"]["Window"]>(true);
  same<Match, components["schemas"]["Match"]>(true);
  same<DocumentInfo, components["schemas"]["Document"]>(true);
  same<EventAnswer, components["schemas"]["EventAnswer"]>(true);

  const answer = await client.search("vpn", { top_k: 3, min_revision: { "it/vpn": 42 }, token_budget: 512 });
  const window = answer.windows[0];
  if (window) {
    const range: [number, number] = [window.char_start, window.char_end];
    const url: string | null = window.url;
    const rerank: number | null = window.scores.rerank;
    void [range, url, rerank];
  }
  const filtered = await client.search("vpn", { metadata: { team: "it", tier: [1, 2], public: true, labels: ["a"] } });
  const metadata: Record<string, unknown> | undefined = filtered.windows[0]?.metadata;
  const filter: MetadataFilter = { team: ["it", "ops"] };
  void [metadata, filter];
  const code: ErrorCode = "revision_not_indexed";
  void code;

  // @ts-expect-error: the query is required
  await client.search({ top_k: 3 });
  // @ts-expect-error: wire names are the server's (top_k), not camelCase
  await client.search("vpn", { topK: 3 });
  // @ts-expect-error: min_revision maps document ids to revision numbers
  await client.search({ query: "vpn", min_revision: { "it/vpn": "42" } });
  // @ts-expect-error: a metadata condition is a string, number, boolean or an array of strings or of numbers
  await client.search("vpn", { metadata: { team: { name: "it" } } });
  // @ts-expect-error: the metadata filter is an object of conditions
  await client.search("vpn", { metadata: ["team"] });
  // @ts-expect-error: the query is a string
  await client.search({ query: 42 });
  // @ts-expect-error: no such field on a window
  void answer.windows[0]?.score;
  // @ts-expect-error: the document's tenant goes as a query parameter named tenant
  await client.document("kb/a", { tenantId: "t" });
  const info = await client.document("kb/a");
  // @ts-expect-error: revision is a number
  const revision: string = info.revision;
  void revision;
}

test("the client's types are the generated ones (checked by tsc)", () => {
  assert.equal(typeof typedUse, "function");
  assert.ok(new CasementError({ kind: "network", method: "GET", url: "u", serverMessage: "m", attempts: 1 }) instanceof Error);
});
