#!/usr/bin/env bash
# `make dist`: the three binaries (profile `dist`: no debug info) and the provisioned models
# as one archive, target/dist/casement-VERSION-TRIPLE.tar.gz, with SHA256SUMS inside and a
# .sha256 beside it; then unpacks it into a temporary directory and runs `casement run` from
# there on the bundled sample, with an empty HOME and no Python on PATH, until it answers a
# search (DIST_SMOKE=0 skips that).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[dist] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
triple=$(rustc -vV | sed -n 's/^host: //p')
[ -n "$version" ] && [ -n "$triple" ] || die "cannot read the version or the host triple"
name="casement-$version-$triple"
out=target/dist
stage="$out/$name"
models="${CASEMENT_MODELS_DIR:-$HOME/.cache/casement/models}"

python3 deploy/models/provision.py
started=$(date +%s)
cargo build --profile dist --locked -p casement -p casement-indexer -p casement-query
say "built in $(( $(date +%s) - started )) s"

rm -rf "$stage" "$out/$name.tar.gz" "$out/$name.tar.gz.sha256"
mkdir -p "$stage/bin" "$stage/models/all-MiniLM-L6-v2" "$stage/models/onnxruntime" \
  "$stage/config" "$stage/dashboards" "$stage/prometheus"
for bin in casement casement-indexer casement-query; do
  cp "$out/$bin" "$stage/bin/"
done
# What the binaries load (every `embedder.precision`), with the model's licence; not the
# safetensors weights the ONNX graph was built from, nor the provisioning virtualenv.
for f in tokenizer.json config.json model.onnx model.int8.onnx model.int8-static.onnx LICENSE NOTICE; do
  [ -f "$models/all-MiniLM-L6-v2/$f" ] || die "$models/all-MiniLM-L6-v2/$f is missing (make models)"
  cp "$models/all-MiniLM-L6-v2/$f" "$stage/models/all-MiniLM-L6-v2/"
done
cp "$models"/onnxruntime/libonnxruntime.so.* "$stage/models/onnxruntime/"
cp "$models/manifest.json" "$stage/models/"
cp deploy/*.example.toml "$stage/config/"
cp dashboards/casement.json "$stage/dashboards/"
cp deploy/prometheus/alerts.yml "$stage/prometheus/"
cp deploy/dist/README.txt "$stage/"
cp README.md ARCHITECTURE.md "$stage/"
cp -r docs "$stage/docs"   # the README's links point into docs/
(cd "$stage" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum) > "$out/SHA256SUMS"
mv "$out/SHA256SUMS" "$stage/SHA256SUMS"
tar -C "$out" -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")

size() { stat -c %s "$1"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
for bin in casement casement-indexer casement-query; do
  say "bin/$bin: $(mib "$(size "$stage/bin/$bin")") (release profile: $(
    [ -f "target/release/$bin" ] && mib "$(size "target/release/$bin")" || echo "not built"))"
done
say "archive $out/$name.tar.gz: $(mib "$(size "$out/$name.tar.gz")"), $(wc -l < "$stage/SHA256SUMS") files in SHA256SUMS"

[ "${DIST_SMOKE:-1}" = 0 ] && exit 0
# The archive on its own: unpacked elsewhere, no models cache (HOME is empty), no Python.
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
tar -C "$tmp" -xzf "$out/$name.tar.gz"
(cd "$tmp/$name" && sha256sum --quiet -c SHA256SUMS) || die "SHA256SUMS does not match"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$tmp/home" "$tmp/data"
env -i HOME="$tmp/home" PATH=/usr/bin:/bin \
  CASEMENT__LISTEN="127.0.0.1:$port" CASEMENT__DATA_DIR="$tmp/data" \
  "$tmp/$name/bin/casement" run > "$tmp/run.log" 2>&1 &
pid=$!
env -i PATH=/usr/bin:/bin sh -c 'command -v python3' >/dev/null 2>&1 \
  && say "note: /usr/bin has a python3; the archive does not use it (no Python in its files)"
deadline=$(( $(date +%s) + 300 ))
until curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/run.log" >&2; die "casement run exited"; }
  [ "$(date +%s)" -lt "$deadline" ] || { cat "$tmp/run.log" >&2; die "not ready in 300 s"; }
  sleep 1
done
answer=$(curl -fsS "http://127.0.0.1:$port/v1/search" -H 'content-type: application/json' \
  -d '{"query": "How long does a name change take?", "top_k": 1}')
case "$answer" in
  *'"windows":[{'*) say "smoke test passed: casement run from the unpacked archive answered a search" ;;
  *) die "unexpected answer: $answer" ;;
esac
