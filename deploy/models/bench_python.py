"""Python baseline for `make bench-embed`: the same model files, sentences, threads and
batch sizes as the Rust benchmark, run the way sentence-transformers does (sort by length,
pad to the longest in the batch, mean pooling, L2 normalisation) with onnxruntime and HF
tokenizers. Prints one JSON object.

Usage: bench_python.py MODEL.onnx TOKENIZER.json SENTENCES.json THREADS BATCH REPEATS
"""

import json
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def main():
    model, tokenizer_path, sentences_path, threads, batch, repeats = sys.argv[1:7]
    threads, batch, repeats = int(threads), int(batch), int(repeats)
    sentences = json.load(open(sentences_path))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)

    def embed(texts):
        encodings = tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = [None] * len(texts)
        tokens = 0
        for start in range(0, len(order), batch):
            chunk = order[start:start + batch]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
                tokens += n
            hidden = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(chunk):
                out[i] = pooled[row]
        return out, tokens

    embed(sentences[:64])  # warm-up
    rates, token_rates = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        _, tokens = embed(sentences)
        elapsed = time.perf_counter() - started
        rates.append(len(sentences) / elapsed)
        token_rates.append(tokens / elapsed)
    print(json.dumps({"sentences_per_s": statistics.median(rates), "tokens_per_s": statistics.median(token_rates)}))


if __name__ == "__main__":
    main()
