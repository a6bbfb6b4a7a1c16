import { CasementClient, CasementError, citation, type EventRequest } from "@casement/client";

// $CASEMENT_URL (default http://127.0.0.1:8080) and $CASEMENT_API_KEY, unless given here.
const casement = new CasementClient({ timeoutMs: 15_000, maxRetries: 3 });

/** A prompt for your LLM: the windows that answer the question, numbered for citing. */
export async function buildPrompt(question: string, minRevision?: Record<string, number>) {
  const { windows } = await casement.search(question, {
    top_k: 4,
    token_budget: 1500, // the room left in your prompt, in (estimated) tokens
    ...(minRevision ? { min_revision: minRevision } : {}),
  });
  const sources = windows.map((window, i) => `[${i + 1}] ${citation(window)}`);
  const context = windows
    .map((window, i) => `[${i + 1}] ${[window.title, ...window.section_path].join(" › ")}\n${window.text}`)
    .join("\n\n");
  const prompt =
    "Answer the question from the numbered sources only, citing them as [n]. " +
    "If they do not answer it, say you do not know.\n\n" +
    `${context}\n\nQuestion: ${question}`;
  return { prompt, sources, windows };
}

/** A page saved in the wiki, then a question that must see it (read-your-writes). */
export async function saveAndAsk(page: { docId: string; revision: number; title: string; markdown: string }, question: string) {
  const event: EventRequest = {
    type: "upsert", // or "delete"; revisions only go up: an older or repeated one is "stale"
    doc_id: page.docId,
    revision: page.revision,
    title: page.title,
    format: "markdown", // or html, text, wikitext
    content: page.markdown,
  };
  const outcome = await casement.postEvent(event); // applied | deleted | stale | accepted
  try {
    return { outcome, ...(await buildPrompt(question, { [page.docId]: page.revision })) };
  } catch (error) {
    if (error instanceof CasementError && error.status === 409) {
      // Not indexed within the server's wait: error.docId is at error.indexedRevision.
      console.warn(`${error.docId} is still at revision ${error.indexedRevision}`);
    }
    throw error;
  }
}
