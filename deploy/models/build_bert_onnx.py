"""Builds an ONNX graph of a BERT encoder (e.g. sentence-transformers/all-MiniLM-L6-v2) from
its safetensors weights and config.json, with numpy and onnx only (no torch).

Inputs: input_ids, attention_mask, token_type_ids (int64, [batch, seq]).
Output: last_hidden_state (float32, [batch, seq, hidden]).
The graph is the standard post-LayerNorm BERT encoder with exact (erf) GELU. Pooling and
normalisation are done by the caller (Casement's embedder), as sentence-transformers does.

Usage: build_bert_onnx.py MODEL_DIR OUTPUT.onnx [--classifier-head]
  --classifier-head appends an *untrained* (random, seeded) linear head on the [CLS] token
  giving one logit per input: a cross-encoder-shaped graph that tests reranker plumbing.
"""

import json
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def load_safetensors(path):
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        data = f.read()
    dtypes = {"F32": np.float32, "I64": np.int64, "F16": np.float16}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        tensors[name.removeprefix("bert.")] = array.astype(np.float32) if array.dtype == np.float16 else array
    return tensors


class Graph:
    def __init__(self):
        self.nodes, self.initializers, self.counter = [], [], 0

    def name(self, prefix):
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def const(self, array, prefix="c"):
        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, prefix=None, **attrs):
        out = self.name(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x, weight, bias):
        # torch Linear stores [out, in]; MatMul wants [in, out].
        y = self.op("MatMul", [x, self.const(np.ascontiguousarray(weight.T), "w")])
        return self.op("Add", [y, self.const(bias, "b")])

    def layer_norm(self, x, weight, bias, eps):
        return self.op(
            "LayerNormalization", [x, self.const(weight, "ln_w"), self.const(bias, "ln_b")], axis=-1, epsilon=eps
        )


def build(model_dir, output, classifier_head=False):
    config = json.load(open(f"{model_dir}/config.json"))
    weights = load_safetensors(f"{model_dir}/model.safetensors")
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    g = Graph()

    # Embeddings: word + position + token type, then LayerNorm.
    words = g.op("Gather", [g.const(weights["embeddings.word_embeddings.weight"]), "input_ids"], axis=0)
    shape = g.op("Shape", ["input_ids"])
    seq_len = g.op("Gather", [shape, g.const(np.array(1, dtype=np.int64))], axis=0)
    positions = g.op("Range", [g.const(np.array(0, dtype=np.int64)), seq_len, g.const(np.array(1, dtype=np.int64))])
    pos_emb = g.op("Gather", [g.const(weights["embeddings.position_embeddings.weight"]), positions], axis=0)
    type_emb = g.op("Gather", [g.const(weights["embeddings.token_type_embeddings.weight"]), "token_type_ids"], axis=0)
    x = g.op("Add", [g.op("Add", [words, pos_emb]), type_emb])
    x = g.layer_norm(x, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"], eps)

    # Additive attention mask [batch, 1, 1, seq]: 0 where attended, a large negative elsewhere.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inverted = g.op("Sub", [g.const(np.array(1.0, dtype=np.float32)), mask])
    additive = g.op("Mul", [inverted, g.const(np.array(np.finfo(np.float32).min, dtype=np.float32))])
    additive = g.op("Unsqueeze", [additive, g.const(np.array([1, 2], dtype=np.int64))])

    split_heads = g.const(np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_heads = g.const(np.array([0, 0, hidden], dtype=np.int64))
    scale = g.const(np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        def heads_of(name, perm):
            y = g.linear(x, weights[p + f"attention.self.{name}.weight"], weights[p + f"attention.self.{name}.bias"])
            return g.op("Transpose", [g.op("Reshape", [y, split_heads])], perm=perm)
        q = heads_of("query", [0, 2, 1, 3])
        k = heads_of("key", [0, 2, 3, 1])
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), additive])
        probs = g.op("Softmax", [scores], axis=-1)
        context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, merge_heads])
        attn = g.linear(context, weights[p + "attention.output.dense.weight"], weights[p + "attention.output.dense.bias"])
        x = g.layer_norm(
            g.op("Add", [attn, x]),
            weights[p + "attention.output.LayerNorm.weight"],
            weights[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        h = g.linear(x, weights[p + "intermediate.dense.weight"], weights[p + "intermediate.dense.bias"])
        # GELU, exact: 0.5 * h * (1 + erf(h / sqrt(2)))
        erf = g.op("Erf", [g.op("Mul", [h, g.const(np.array(1 / np.sqrt(2), dtype=np.float32))])])
        h = g.op("Mul", [g.op("Mul", [h, g.const(np.array(0.5, dtype=np.float32))]), g.op("Add", [erf, g.const(np.array(1.0, dtype=np.float32))])])
        out = g.linear(h, weights[p + "output.dense.weight"], weights[p + "output.dense.bias"])
        x = g.layer_norm(g.op("Add", [out, x]), weights[p + "output.LayerNorm.weight"], weights[p + "output.LayerNorm.bias"], eps)

    batch_seq = ["batch", "sequence"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, batch_seq) for n in ("input_ids", "attention_mask", "token_type_ids")]
    if classifier_head:
        cls = g.op("Gather", [x, g.const(np.array(0, dtype=np.int64))], axis=1)
        rng = np.random.default_rng(20261122)
        w = (rng.standard_normal((1, hidden)) * 0.05).astype(np.float32)
        logits = g.linear(cls, w, np.zeros(1, dtype=np.float32))
        g.nodes.append(helper.make_node("Identity", [logits], ["logits"]))
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]
    else:
        g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
        outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])]
    graph = helper.make_graph(g.nodes, "bert_encoder", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="casement")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, output)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    build(args[0], args[1], classifier_head="--classifier-head" in sys.argv)
