/**
 * What the tests share: the running all-in-one that run-tests.sh started (its URL and API
 * key in the environment), the bundled sample's golden set and final revisions, and a
 * scripted HTTP server for what a healthy server never does (503, 429, drops, silence).
 */

import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

import { CasementClient, CasementError, type CasementClientOptions } from "../src/index.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`$${name} is not set: run the tests with clients/typescript/run-tests.sh`);
  return value;
}

export const SERVER_URL = (): string => required("CASEMENT_TEST_URL");
export const API_KEY = (): string => required("CASEMENT_TEST_API_KEY");
const SAMPLE = (): string => required("CASEMENT_TEST_SAMPLE");
const START_TIMEOUT_MS = Number(process.env["CASEMENT_TEST_START_TIMEOUT"] ?? "300") * 1000;

export function liveClient(options: CasementClientOptions = {}): CasementClient {
  return new CasementClient({ baseUrl: SERVER_URL(), apiKey: API_KEY(), ...options });
}

export interface GoldenCase {
  id: string;
  query: string;
  doc_id: string;
  text: string;
}

function jsonLines(file: string): unknown[] {
  return readFileSync(join(SAMPLE(), file), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as unknown);
}

export function goldenCases(): GoldenCase[] {
  return jsonLines("golden.jsonl") as GoldenCase[];
}

/** The revision each live document of the sample ends at. */
export function finalRevisions(): Map<string, number> {
  const last = new Map<string, { revision: number; change: string }>();
  for (const event of jsonLines("revisions.jsonl") as { doc_id: string; revision: number; change: string }[]) {
    last.set(event.doc_id, { revision: event.revision, change: event.change });
  }
  return new Map([...last].filter(([, { change }]) => change !== "delete").map(([id, { revision }]) => [id, revision]));
}

export function normalized(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(" ").toLowerCase();
}

/** Waits until every live page of the sample is indexed at its last revision. */
export async function sampleIndexed(client: CasementClient): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (const [docId, revision] of finalRevisions()) {
    for (;;) {
      try {
        if ((await client.document(docId)).revision >= revision) break;
      } catch (error) {
        if (!(error instanceof CasementError && error.status === 404)) throw error;
      }
      if (Date.now() > deadline) throw new Error(`${docId} not indexed at revision ${revision} in time`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

// --- a scripted HTTP server -------------------------------------------------------------

export interface Reply {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Destroy the connection without answering. */
  drop?: boolean;
  /** Send this text as it is (text/plain) instead of `body` as JSON. */
  raw?: string;
  /** Never answer (until the server closes). */
  hang?: boolean;
}

export interface Recorded {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: unknown;
  at: number;
}

/** Answers requests with `replies` in turn (the last one again once they run out) and
 * records every request. */
export class ScriptedServer {
  readonly requests: Recorded[] = [];
  url = "";
  readonly #server: Server;

  constructor(readonly replies: Reply[]) {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        this.requests.push({
          method: request.method ?? "",
          path: request.url ?? "",
          headers: request.headers,
          body: raw ? (JSON.parse(raw) as unknown) : undefined,
          at: performance.now(),
        });
        const reply = this.replies[Math.min(this.requests.length, this.replies.length) - 1] ?? {};
        if (reply.drop) {
          request.socket.destroy();
          return;
        }
        if (reply.hang) return;
        const payload = reply.raw ?? JSON.stringify(reply.body ?? {});
        const type = reply.raw === undefined ? "application/json" : "text/plain";
        response.writeHead(reply.status ?? 200, { "content-type": type, ...reply.headers });
        response.end(payload);
      });
    });
  }

  static async start(replies: Reply[]): Promise<ScriptedServer> {
    const server = new ScriptedServer(replies);
    await new Promise<void>((resolve) => server.#server.listen(0, "127.0.0.1", resolve));
    server.url = `http://127.0.0.1:${(server.#server.address() as AddressInfo).port}`;
    return server;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** A port nothing listens on (bound, then closed). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A window as the server sends it (services/query/src/api.rs, WindowAnswer). */
export function windowJson(text = "Reset the token in the portal."): Record<string, unknown> {
  return {
    doc_id: "kb/vpn",
    title: "VPN",
    url: "https://wiki.example/kb/vpn",
    tenant: null,
    section_path: ["Tokens"],
    revision: 7,
    text,
    char_start: 10,
    char_end: 10 + text.length,
    matches: [{ sentence: text, char_start: 10, char_end: 10 + text.length, score: 0.5 }],
    scores: { fused: 0.5, rerank: null },
    tokens: 8,
  };
}
