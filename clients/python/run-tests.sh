#!/usr/bin/env bash
# The Python client's checks: mypy (strict) over src/, then pytest against a real
# `casement run` (tests/conftest.py starts it on the bundled sample; $CASEMENT_BIN, default
# the workspace's target/debug/casement).
#
# The virtualenv lives in ${CASEMENT_TOOLS_DIR:-~/.cache/casement/tools}/python-client, with
# the exact versions of requirements-test.txt and this package installed editable with its
# [langchain] and [llamaindex] extras. It is made again only when the pins, pyproject.toml
# or this checkout's path change (a marker holds their hash), so a second run goes straight
# to the checks. Arguments go to pytest (e.g. `-k retries -x`); `--provision-only` makes the
# virtualenv and stops (`make test` runs it beside the build).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOOLS_DIR="${CASEMENT_TOOLS_DIR:-$HOME/.cache/casement/tools}"
VENV="$TOOLS_DIR/python-client"
MARKER="$VENV/casement-client.sha256"
PYTHON="${PYTHON:-python3}"

want="$( { cat "$HERE/requirements-test.txt" "$HERE/pyproject.toml"; echo "$HERE"; } | sha256sum | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && -f "$MARKER" && "$(cat "$MARKER")" == "$want" ]]; then
  echo "[python-client] virtualenv ready in $VENV"
else
  if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "[python-client] error: the test virtualenv needs Python >= 3.11 (langchain-core 1.x); $PYTHON is older" >&2
    exit 1
  fi
  echo "[python-client] installing requirements-test.txt into $VENV"
  rm -rf "$VENV"
  mkdir -p "$TOOLS_DIR"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$HERE/requirements-test.txt"
  # The build backend (hatchling) is pinned above: no isolated build env, nothing unpinned.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
    -e "${HERE}[langchain,llamaindex]"
  "$VENV/bin/python" -m pip check
  echo "$want" > "$MARKER"
fi

[[ "${1:-}" != --provision-only ]] || exit 0
cd "$HERE"
# Caches stay out of the checkout.
export MYPY_CACHE_DIR="$VENV/mypy-cache"
export PYTHONDONTWRITEBYTECODE=1
echo "[python-client] mypy --strict src/"
"$VENV/bin/python" -m mypy
echo "[python-client] pytest"
exec "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
