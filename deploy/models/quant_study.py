"""Measurements behind model.int8-static.onnx (issue #16): batch independence, parity with fp32,
speed and SQuAD retrieval, for any set of embedding models with onnxruntime (2 threads).

Reads evaluation data from ../shared/data (CASEMENT_DATA, default /work/shared/data): SciFact
(CC BY-NC, evaluation only), the 18F handbook sample and SQuAD v1.1 dev; and the reference
vectors from ../shared/models/reference. Nothing here is used at provisioning time.

Usage (with the models venv, ~/.cache/casement/models/venv/bin/python):
  quant_study.py [--squad-questions N] [--speed-sentences N] MODEL.onnx...   (first = fp32 baseline)
Prints, per model: max(1 - cos) alone vs inside a batch of 32 (200 probes), mean/min cosine to
the reference vectors and to the first model over 2,000 sentences, sentences/s at batch 32
(inputs sorted by length; batches interleaved across models so machine load hits all alike;
median of 3) with the ratio to the first model, and SQuAD R@1/R@5/MRR@10 (dense, every
sentence of the 48 dev articles with its title as context; a hit is a sentence of the gold
paragraph overlapping an answer span; questions sampled with seed 16).
"""
import argparse
import gzip, json, os, random, re, statistics, time
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer
M = os.path.join(os.environ.get("CASEMENT_MODELS_DIR") or os.path.expanduser("~/.cache/casement/models"), "all-MiniLM-L6-v2")
D = os.environ.get("CASEMENT_DATA", "/work/shared/data")
TOK = Tokenizer.from_file(f"{M}/tokenizer.json"); TOK.no_padding(); TOK.enable_truncation(256)
SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])")

def session(path, threads=2):
    o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.log_severity_level = 3
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])

def run_batch(sess, encs):
    width = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), width), dtype=np.int64); mask = np.zeros_like(ids)
    for r, e in enumerate(encs):
        ids[r, :len(e.ids)] = e.ids; mask[r, :len(e.ids)] = 1
    h = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    p = (h * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
    return p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)

def embed(sess, texts, batch=32, sort=True, encs=None):
    encs = encs or TOK.encode_batch(texts)
    order = sorted(range(len(texts)), key=lambda i: -len(encs[i].ids)) if sort else list(range(len(texts)))
    out = np.zeros((len(texts), 384), dtype=np.float32)
    for s in range(0, len(order), batch):
        chunk = order[s:s + batch]
        out[chunk] = run_batch(sess, [encs[i] for i in chunk])
    return out

def reference():
    rows = [json.loads(l) for l in open(os.path.join(os.path.dirname(D.rstrip("/")), "models/reference/all-MiniLM-L6-v2.reference.jsonl"))]
    return [r["text"] for r in rows], np.array([r["embedding"] for r in rows], dtype=np.float32)

def scifact_inputs(n=2000, seed=1):
    docs = [json.loads(l) for l in gzip.open(f"{D}/scifact/corpus.jsonl.gz", "rt")]
    rng = random.Random(seed); rng.shuffle(docs)
    out = []
    for d in docs:
        for s in d["sentences"]:
            out.append(f"{d['title']}\n{s}")
            if len(out) >= n: return out

def md_clean(text):
    text = re.sub(r"^---\n.*?\n---\n?", "", text, flags=re.S).replace("\r\n", "\n")
    text = re.sub(r"<[^>]+>", "", text); text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)

def handbook_inputs(n=2000, seed=2):
    latest = {}
    for line in open(f"{D}/revisions/18f-handbook/sample.jsonl"):
        r = json.loads(line)
        if r["change"] != "delete" and r["content"] and r["title"]:
            latest[r["doc_id"]] = r
    out = []
    for k in sorted(latest):
        r = latest[k]; heading = None
        for block in re.split(r"\n\s*\n", md_clean(r["content"])):
            block = block.strip()
            m = re.match(r"^(#+)\s*(.*)", block)
            if m and "\n" not in block: heading = m.group(2).strip(); continue
            block = " ".join(re.sub(r"[*_`]", "", block).split())
            ctx = r["title"] if not heading else f"{r['title']} > {heading}"
            out += [f"{ctx}\n{s}" for s in SPLIT.split(block) if len(s) >= 20]
    out = sorted(set(out)); random.Random(seed).shuffle(out)
    return out[:n]

def squad():
    """Sentences (with title context) and questions of all 48 SQuAD v1.1 dev articles.
    Gold: sentence ids in the gold paragraph that overlap any answer span."""
    data = json.load(open(f"{D}/squad/dev-v1.1.json"))["data"]
    sents, inputs, questions, gold = [], [], [], []
    for a in data:
        title = a["title"].replace("_", " ")
        for p in a["paragraphs"]:
            ctx = p["context"]; spans = []; pos = 0
            parts = SPLIT.split(ctx)
            for part in parts:
                start = ctx.index(part, pos); spans.append((start, start + len(part))); pos = start + len(part)
            base = len(sents)
            for (s, e) in spans:
                sents.append((s, e)); inputs.append(f"{title}\n{ctx[s:e]}")
            for q in p["qas"]:
                g = set()
                for ans in q["answers"]:
                    a0 = ans["answer_start"]; a1 = a0 + len(ans["text"])
                    for j, (s, e) in enumerate(spans):
                        if s < a1 and a0 < e: g.add(base + j)
                questions.append(q["question"]); gold.append(g)
    return inputs, questions, gold

def retrieval(S, Q, gold):
    r1 = r5 = mrr = 0.0
    for s in range(0, len(Q), 512):
        sims = Q[s:s+512] @ S.T
        top = np.argpartition(-sims, 10, axis=1)[:, :10]
        for i in range(top.shape[0]):
            t = top[i][np.argsort(-sims[i, top[i]])]
            g = gold[s + i]
            ranks = [k for k, j in enumerate(t) if j in g]
            if ranks:
                k = ranks[0]; r1 += k < 1; r5 += k < 5; mrr += 1 / (k + 1)
    n = len(Q)
    return 100 * r1 / n, 100 * r5 / n, 100 * mrr / n


def batch_independence(sess, probes, pool, rng):
    alone = embed(sess, probes, batch=1)
    pool_encs = TOK.encode_batch(pool)
    worst = 0.0
    for i, text in enumerate(probes):
        encs = TOK.encode_batch([text]) + [pool_encs[j] for j in rng.sample(range(len(pool)), 31)]
        perm = list(range(32)); rng.shuffle(perm)
        v = run_batch(sess, [encs[j] for j in perm])[perm.index(0)]
        worst = max(worst, 1 - float(v @ alone[i]))
    return worst


def speed(sessions, data):
    encs = TOK.encode_batch(data)
    order = sorted(range(len(data)), key=lambda i: -len(encs[i].ids))
    batches = [[encs[i] for i in order[s:s + 32]] for s in range(0, len(order), 32)]
    for s in sessions:
        run_batch(s, batches[0]); run_batch(s, batches[-1])
    rates = [[] for _ in sessions]
    for rep in range(3):
        spent = [0.0] * len(sessions)
        for b, batch in enumerate(batches):
            for k in range(len(sessions)):
                j = (k + b + rep) % len(sessions)
                t0 = time.perf_counter(); run_batch(sessions[j], batch); spent[j] += time.perf_counter() - t0
        for j in range(len(sessions)):
            rates[j].append(len(data) / spent[j])
    return [statistics.median(r) for r in rates]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--squad-questions", type=int, default=2000, help="0 = skip SQuAD; 10570 = all")
    ap.add_argument("--speed-sentences", type=int, default=2000)
    args = ap.parse_args()
    sessions = [session(p) for p in args.models]
    names = [os.path.basename(p) for p in args.models]
    texts, ref = reference()
    sc, hb = scifact_inputs(args.speed_sentences), handbook_inputs(args.speed_sentences)
    probes, pool = sc[:100] + hb[:100], sc[-400:] + hb[-400:]
    base = None
    for name, s in zip(names, sessions):
        bi = batch_independence(s, probes, pool, random.Random(7))
        cr = (embed(s, texts, batch=1) * ref).sum(1)
        v = embed(s, sc + hb)
        base = v if base is None else base
        c = (v * base).sum(1)
        print(f"{name}: batch-independence max(1-cos) {bi:.2e}; reference cos mean {cr.mean():.4f} min {cr.min():.4f}; "
              f"vs {names[0]} over {len(v)} sentences mean {c.mean():.4f} min {c.min():.4f}", flush=True)
    for label, data in (("SciFact", sc), ("18F", hb)):
        rates = speed(sessions, data)
        print(f"speed {label} ({len(data)} sentences, batch 32): " +
              ", ".join(f"{n} {r:.0f}/s ({r / rates[0]:.2f}x)" for n, r in zip(names, rates)), flush=True)
    if args.squad_questions:
        inputs, questions, gold = squad()
        qi = sorted(random.Random(16).sample(range(len(questions)), min(args.squad_questions, len(questions))))
        for name, s in zip(names, sessions):
            S, Q = embed(s, inputs), embed(s, [questions[i] for i in qi])
            r1, r5, mrr = retrieval(S, Q, [gold[i] for i in qi])
            print(f"SQuAD {name}: {len(inputs)} sentences, {len(qi)} questions: R@1 {r1:.2f} R@5 {r5:.2f} MRR@10 {mrr:.2f}", flush=True)


if __name__ == "__main__":
    main()
