#!/usr/bin/env bash
# Runs each fuzz target (or those named) for FUZZ_SECONDS (default 600) with cargo-fuzz on
# the nightly toolchain, from a seed corpus made of the bundled sample's pages and, when
# ../shared/data is there, the real event payloads. A crash is copied into
# fuzz/regressions/<target>/ (replayed by `make test` from then on) and the run fails.
# Installs cargo-fuzz from crates.io when missing. Prints per target: runs, coverage, time.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
SECONDS_EACH="${FUZZ_SECONDS:-600}"
DATA="${CASEMENT_SHARED_DATA:-$REPO/../shared/data}"
TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  TARGETS=(extract_and_segment decode_event diff_pair)
fi

command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
rustup toolchain list | grep -q '^nightly' || { echo "fuzz: the nightly toolchain is needed (rustup toolchain install nightly)" >&2; exit 1; }

# Seeds: 40 sample pages in each format (first byte: format and window radius), pairs of
# consecutive revisions of one page for the differ, and every event payload.
python3 - "$REPO" "$DATA" "$HERE/corpus" <<'PY'
import json, os, sys
repo, data, out = sys.argv[1:4]
pages = {}
with open(os.path.join(repo, "sample/18f-handbook/revisions.jsonl")) as log:
    lines = log.read().splitlines()
for d in ("extract_and_segment", "decode_event", "diff_pair"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
previous = {}
for n, line in enumerate(lines[:400]):
    event = json.loads(line)
    content = (event.get("content") or "").encode()
    if n < 40:
        for fmt in range(4):
            open(os.path.join(out, "extract_and_segment", f"page-{n}-{fmt}"), "wb").write(bytes([0x30 | fmt]) + content)
    open(os.path.join(out, "decode_event", f"line-{n}"), "wb").write(line.encode())
    doc = event["doc_id"]
    if doc in previous and content:
        open(os.path.join(out, "diff_pair", f"pair-{n}"), "wb").write(bytes([0x30]) + previous[doc] + b"\xff" + bytes([0x30]) + content)
    previous[doc] = content
events = os.path.join(data, "events")
for root, _, files in os.walk(events):
    for f in files:
        if f.endswith(".json"):
            body = open(os.path.join(root, f), "rb").read()
            open(os.path.join(out, "decode_event", f"event-{f}"), "wb").write(body)
PY

cd "$HERE"
mkdir -p target
failed=0
for target in "${TARGETS[@]}"; do
  echo "[fuzz] $target for ${SECONDS_EACH} s"
  rm -rf "artifacts/$target"
  if ! cargo +nightly fuzz run -O "$target" "corpus/$target" -- \
      -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      2> "target/$target.log"; then
    failed=1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)' "target/$target.log" || true
  tail -n 3 "target/$target.log" | grep -E 'cov:|Done' || true
  for crash in artifacts/"$target"/*; do
    [[ -f "$crash" ]] || continue
    cp "$crash" "regressions/$target/"
    echo "[fuzz] $target: $(basename "$crash") kept in fuzz/regressions/$target/ (see fuzz/target/$target.log)" >&2
    failed=1
  done
done
exit "$failed"
