"""Builds the statically quantised int8 embedding model (model.int8-static.onnx) from the fp32
graph of build_bert_onnx.py, for `make models` (deploy/models/provision.py).

Why: dynamic quantisation (model.int8.onnx) computes each activation scale from the batch at
hand, so a sentence's vector depends on the sentences it is batched with (cosine down to ~0.96
between "alone" and "in a batch of 32"). Here every activation scale is fixed once, from a
calibration sample that ships in the repo (calibration.tsv), so a vector depends only on its
own text (max 1 - cosine alone vs in a batch ~1e-8, like fp32).

Recipe (chosen in issue #16, see deploy/models/quant_study.py for the measurements):
- onnxruntime.quantization.quantize_static, QDQ format, MinMax calibration over calibration.tsv
  (inputs embedded as the indexer does, "CONTEXT\\nSENTENCE"; batches of 32 in file order,
  padded to the longest in the batch, truncated at 256 tokens).
- Only the weight MatMuls are quantised; their outputs stay float, so ONNX Runtime runs them
  as MatMulIntegerToFloat (QuantizeLinear on the input with a fixed scale, int8 GEMM, bias
  and everything else in fp32: Softmax, LayerNorm, GELU, the attention score MatMuls).
- uint8 activations, int8 per-channel weights with reduce_range (7-bit): the u8s8 kernels of
  AVX2 CPUs without VNNI saturate otherwise (see provision.py on model.int8.onnx).
- The FFN input projections (intermediate.dense, [hidden, intermediate]) stay fp32: their
  input (the post-LayerNorm hidden state) has outlier channels that a per-tensor static scale
  cannot cover; quantising them costs most of the accuracy (mean cosine to fp32 0.987 -> 0.993
  when they are left out).

Deterministic: same inputs and machine give a byte-identical file (the calibration runs the fp32
graph with ONNX Runtime, so another CPU may round the calibrated ranges differently in the last
bit; provision.py records the sha256 it got).

Usage: quantize_static.py MODEL.onnx TOKENIZER.json CALIBRATION.tsv OUTPUT.onnx
"""

import logging
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from tokenizers import Tokenizer

MAX_TOKENS = 256
BATCH = 32


def calibration_texts(path):
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            context, sentence = line.split("\t", 1)
            texts.append(f"{context}\n{sentence}" if context else sentence)
    return texts


class Reader(CalibrationDataReader):
    def __init__(self, tokenizer_path, calibration_path):
        tokenizer = Tokenizer.from_file(tokenizer_path)
        tokenizer.no_padding()  # the shipped tokenizer.json pads and truncates at 128
        tokenizer.enable_truncation(MAX_TOKENS)
        encodings = tokenizer.encode_batch(calibration_texts(calibration_path))
        self.batches = []
        for start in range(0, len(encodings), BATCH):
            chunk = encodings[start:start + BATCH]
            width = max(len(e.ids) for e in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, e in enumerate(chunk):
                ids[row, :len(e.ids)] = e.ids
                mask[row, :len(e.ids)] = 1
            self.batches.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        self.rewind()

    def get_next(self):
        return next(self.iterator, None)

    def rewind(self):
        self.iterator = iter(self.batches)


def build(model_path, tokenizer_path, calibration_path, output):
    model = onnx.load(model_path)
    weights = {i.name: numpy_helper.to_array(i).shape for i in model.graph.initializer}
    # build_bert_onnx.py leaves nodes unnamed; nodes_to_exclude needs names (stable: by position).
    for index, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"
    exclude = []
    for node in model.graph.node:
        if node.op_type != "MatMul":
            continue
        shape = weights.get(node.input[1])
        if shape is None:
            exclude.append(node.name)  # attention: activation x activation
        elif len(shape) == 2 and shape[0] < shape[1]:
            exclude.append(node.name)  # FFN input projection [hidden, intermediate]
    with tempfile.TemporaryDirectory() as tmp:
        named = os.path.join(tmp, "named.onnx")
        onnx.save(model, named)
        quantize_static(
            named,
            output,
            Reader(tokenizer_path, calibration_path),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=exclude,
            per_channel=True,
            reduce_range=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            extra_options={"OpTypesToExcludeOutputQuantization": ["MatMul"], "CalibMovingAverage": False},
        )


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.ERROR)  # not its advice on pre-processing
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    build(*sys.argv[1:])
