"""The raw embedding model's latency on single questions, the floor under the query
service's search latency (issue 17, point 5): SQuAD dev questions embedded one at a time,
as a search embeds its query, with onnxruntime and the provisioned model files, for each
(model file, threads) pair. Prints medians and p95 in ms.

Usage (after `make models`; SQuAD from ../shared/data):
  ~/.cache/casement/models/venv/bin/python deploy/models/query_latency.py \
      ../shared/data/squad/dev-v1.1.json [QUESTIONS]
"""

import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

MODELS = os.path.join(
    os.environ.get("CASEMENT_MODELS_DIR", os.path.expanduser("~/.cache/casement/models")),
    "all-MiniLM-L6-v2",
)
WARMUP = 50


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def main():
    squad = json.load(open(sys.argv[1]))
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    questions = [
        qa["question"]
        for article in squad["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ][:count]
    tokenizer = Tokenizer.from_file(os.path.join(MODELS, "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    ids = [np.array([tokenizer.encode(q).ids], dtype=np.int64) for q in questions]
    lengths = [x.shape[1] for x in ids]
    print(f"{len(ids)} questions, tokens p50 {percentile(lengths, 0.5)} p95 {percentile(lengths, 0.95)}")
    for model, threads in [("model.onnx", 1), ("model.onnx", 2), ("model.int8.onnx", 1)]:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(
            os.path.join(MODELS, model), options, providers=["CPUExecutionProvider"]
        )
        names = {i.name for i in session.get_inputs()}
        times = []
        for i, x in enumerate(ids[:WARMUP] + ids):
            feed = {"input_ids": x, "attention_mask": np.ones_like(x)}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(x)
            started = time.perf_counter()
            session.run(None, feed)
            if i >= WARMUP:
                times.append((time.perf_counter() - started) * 1000)
        print(
            f"{model} threads={threads}: p50 {percentile(times, 0.5):.2f} ms, "
            f"p95 {percentile(times, 0.95):.2f} ms"
        )


if __name__ == "__main__":
    main()
