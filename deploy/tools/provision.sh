#!/usr/bin/env bash
# Installs the test tools that come from PyPI into their own virtualenv:
#   schemathesis (API fuzzing of the query service against its OpenAPI document).
# Idempotent: a marker file records the pinned versions; a match skips the install.
# Location: $CASEMENT_TOOLS_DIR (default ~/.cache/casement/tools).
set -euo pipefail

TOOLS_DIR="${CASEMENT_TOOLS_DIR:-$HOME/.cache/casement/tools}"
VENV="$TOOLS_DIR/venv"
PINS="schemathesis==4.32.5"
MARKER="$VENV/casement-tools.txt"

if [[ -x "$VENV/bin/schemathesis" && -f "$MARKER" && "$(cat "$MARKER")" == "$PINS" ]]; then
  echo "[tools] schemathesis ready in $VENV"
  exit 0
fi
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
  echo "[tools] error: schemathesis needs Python >= 3.9 ($PYTHON)" >&2
  exit 1
fi
echo "[tools] installing $PINS into $VENV"
rm -rf "$VENV"
mkdir -p "$TOOLS_DIR"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check $PINS
echo "$PINS" > "$MARKER"
echo "[tools] schemathesis $("$VENV/bin/schemathesis" --version 2>&1 | tail -1) ready"
