/** examples/bot.ts (quoted whole in README.md) against the running server. */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";

import { API_KEY, SERVER_URL, goldenCases, liveClient, normalized, sampleIndexed } from "./helpers.js";

const packageDir = dirname(process.env["CASEMENT_TEST_PACKAGE_JSON"] ?? "");

test("the READMEs quote the examples as they are", () => {
  for (const [readme, example] of [
    ["README.md", "bot.ts"],
    ["../../README.md", "quickstart.ts"],
  ] as const) {
    const code = readFileSync(join(packageDir, "examples", example), "utf8");
    const text = readFileSync(join(packageDir, readme), "utf8");
    assert.ok(text.includes("```ts\n" + code + "```"), `${readme} no longer quotes examples/${example} whole`);
  }
});

test("examples/quickstart.ts prints a prompt and its citations", async () => {
  await sampleIndexed(liveClient());
  process.env["CASEMENT_URL"] = SERVER_URL();
  process.env["CASEMENT_API_KEY"] = API_KEY();
  const printed: unknown[] = [];
  const log = console.log;
  console.log = (...args: unknown[]) => void printed.push(...args);
  try {
    await import("../examples/quickstart.js");
  } finally {
    console.log = log;
  }
  const [text] = printed;
  assert.equal(typeof text, "string");
  assert.match(String(text), /^Answer from the numbered sources only[\s\S]*\[1\] Changing your name › [\s\S]*business days/);
  assert.match(String(text), /\n\[1\] Changing your name › .*\(doc 18f-handbook:_pages\/how-we-work\/changing-your-name, revision \d+/);
});

test("examples/bot.ts: a prompt with numbered, cited windows; then an edit it reads back", async () => {
  await sampleIndexed(liveClient());
  // The example's client reads these, as a bot's would.
  process.env["CASEMENT_URL"] = SERVER_URL();
  process.env["CASEMENT_API_KEY"] = API_KEY();
  const { buildPrompt, saveAndAsk } = await import("../examples/bot.js");

  const golden = goldenCases()[0]!;
  const { prompt, sources, windows } = await buildPrompt(golden.query);
  assert.ok(windows.length > 0 && windows.length <= 4);
  assert.ok(prompt.startsWith("Answer the question from the numbered sources only"));
  assert.ok(prompt.endsWith(`Question: ${golden.query}`));
  assert.ok(normalized(prompt).includes(normalized(golden.text)), prompt);
  assert.match(sources[0] ?? "", /^\[1\] .* \(doc 18f-handbook:.*, revision \d+, characters \d+\.\.\d+/);
  assert.ok(windows.reduce((sum, window) => sum + window.tokens, 0) <= 1500);

  const docId = `clients-typescript/parking-${randomUUID().slice(0, 8)}`;
  const asked = await saveAndAsk(
    {
      docId,
      revision: 3,
      title: "Parking",
      markdown: "# Parking\n\n## Bicycles\n\nThe heron rack behind building C holds forty bicycles.",
    },
    "Where is the heron bicycle rack?",
  );
  assert.equal(asked.outcome.status, "applied");
  assert.equal(asked.windows[0]?.doc_id, docId);
  assert.ok(asked.prompt.includes("[1] Parking › Parking › Bicycles\nThe heron rack behind building C"), asked.prompt);
});
