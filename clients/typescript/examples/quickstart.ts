import { CasementClient, citation } from "@casement/client";

const casement = new CasementClient(); // $CASEMENT_URL (default http://127.0.0.1:8080), $CASEMENT_API_KEY
const question = "How long does a name change take in GSA systems?";
const { windows } = await casement.search(question, { top_k: 4, token_budget: 1500 });
const prompt =
  "Answer from the numbered sources only, citing them as [n].\n\n" +
  windows.map((w, i) => `[${i + 1}] ${[w.title, ...w.section_path].join(" › ")}\n${w.text}`).join("\n\n") +
  `\n\nQuestion: ${question}`;
const sources = windows.map((w, i) => `[${i + 1}] ${citation(w)}`); // title › sections (doc, revision, characters)
console.log(`${prompt}\n\n${sources.join("\n")}`);
