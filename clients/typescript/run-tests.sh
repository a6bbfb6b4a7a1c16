#!/usr/bin/env bash
# The TypeScript client's checks, against a real `casement run` on the bundled sample
# ($CASEMENT_BIN, default the workspace's target/debug/casement, then target/release):
#   1. start it (webhook on, one operator API key, metadata keys team and tier filterable)
#      on a free port in a temporary data dir;
#   2. drift check: generate the types from its GET /openapi.json with openapi-typescript
#      and fail if they differ from src/schema.ts (`--regenerate` writes them instead);
#   3. tsc, strict, over src/, tests/ and examples/ (and the package build, src/ alone, no Node types);
#   4. node's test runner over the compiled tests, against that server and scripted ones.
# `--provision-only` installs node and the pinned tools and stops (`make test` runs it beside
# the build).
#
# The pinned devDependencies (package-lock.json) are installed with `npm ci` into
# ${CASEMENT_TOOLS_DIR:-~/.cache/casement/tools}/typescript-client, outside the checkout,
# again only when package.json or package-lock.json change (a marker holds their hash).
# Other arguments go to `node --test` (e.g. `--test-name-pattern retries`).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
TOOLS_DIR="${CASEMENT_TOOLS_DIR:-$HOME/.cache/casement/tools}"
TOOLS="$TOOLS_DIR/typescript-client"
MARKER="$TOOLS/casement-client.sha256"
START_TIMEOUT="${CASEMENT_TEST_START_TIMEOUT:-300}"
API_KEY="clients-typescript-test-key-0123456789"
# The event metadata keys searches may filter on (store.indexed_metadata, a TOML value).
# It only sets the served document's SearchRequest.metadata maxProperties, which
# openapi-typescript does not carry into src/schema.ts: the drift check is unaffected.
INDEXED_METADATA='["team", "tier"]'

log() { echo "[typescript-client] $*"; }
fail() { echo "[typescript-client] error: $*" >&2; exit 1; }

regenerate=0
provision_only=0
node_args=()
for arg in "$@"; do
  case "$arg" in
    --regenerate) regenerate=1 ;;
    --provision-only) provision_only=1 ;;
    *) node_args+=("$arg") ;;
  esac
done

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  # Debian's packages (node 20 on bookworm's successors), as the machine's other tools.
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    log "installing Debian's nodejs and npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >/dev/null; } \
      || fail "could not install nodejs and npm with apt-get"
  else
    fail "node (>= 20) and npm are needed (Debian: apt-get install nodejs npm)"
  fi
fi
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || fail "node >= 20 is needed (global fetch, AbortSignal.any, node --test); this is $(node --version)"

# --- the pinned tools ------------------------------------------------------------------
want="$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$want" && -x "$TOOLS/node_modules/.bin/tsc" ]]; then
  log "tools ready in $TOOLS"
else
  log "npm ci (package-lock.json) into $TOOLS"
  rm -rf "$TOOLS"
  mkdir -p "$TOOLS"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$TOOLS/"
  (cd "$TOOLS" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$want" > "$MARKER"
fi
[[ "$provision_only" == 0 ]] || exit 0
TSC="$TOOLS/node_modules/.bin/tsc"
OPENAPI_TS="$TOOLS/node_modules/.bin/openapi-typescript"
TYPE_ROOTS="$TOOLS/node_modules/@types"

# --- the server ------------------------------------------------------------------------
BIN="${CASEMENT_BIN:-}"
if [[ -z "$BIN" ]]; then
  BIN="$REPO_ROOT/target/debug/casement"
  [[ -x "$BIN" || ! -x "$REPO_ROOT/target/release/casement" ]] || BIN="$REPO_ROOT/target/release/casement"
fi
[[ -x "$BIN" ]] || fail "no casement binary at $BIN: build it (cargo build -p casement) or set CASEMENT_BIN"
[[ "$BIN" == /* ]] || BIN="$PWD/$BIN"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/casement-typescript.XXXXXX")"
server_pid=""
# shellcheck disable=SC2317,SC2329  # (called from the EXIT trap)
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
# shellcheck disable=SC2317,SC2329  # (the EXIT trap)
cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT
server_failed() {
  echo "[typescript-client] error: $* ($BIN); its log:" >&2
  tail -n 40 "$WORK/casement.log" >&2 || true
  exit 1
}

port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });')"
URL="http://127.0.0.1:$port"
mkdir -p "$WORK/data"
printf '[[auth.keys]]\ntoken = "%s"\n' "$API_KEY" > "$WORK/casement.toml"
# The server's settings are its defaults but for these: no CASEMENT__* of the caller's.
clean_env=(-u CASEMENT_CONFIG -u CASEMENT_API_KEY)
while IFS= read -r name; do
  clean_env+=(-u "$name")
done < <(compgen -e | grep '^CASEMENT__' || true)
log "starting $BIN run (the bundled sample) on $URL"
started=$SECONDS
(
  cd "$WORK"
  exec env "${clean_env[@]}" CASEMENT__LISTEN="127.0.0.1:$port" CASEMENT__DATA_DIR="$WORK/data" \
    CASEMENT__SOURCES__WEBHOOK__ENABLED=true CASEMENT__STORE__INDEXED_METADATA="$INDEXED_METADATA" \
    "$BIN" --config "$WORK/casement.toml" run
) > "$WORK/casement.log" 2>&1 &
server_pid=$!

# `node -e` below: fetch is global; exit 0 on a 200 (printing the body with --print-body).
fetch_ok='const [url, print] = process.argv.slice(1);
fetch(url).then(async (r) => { const body = await r.text(); if (r.status !== 200) process.exit(1);
  if (print) process.stdout.write(body); }, () => process.exit(1));'
deadline=$((started + START_TIMEOUT))
until node -e "$fetch_ok" "$URL/readyz"; do
  kill -0 "$server_pid" 2>/dev/null || server_failed "casement exited before /readyz"
  ((SECONDS < deadline)) || server_failed "no /readyz in $START_TIMEOUT s"
  sleep 0.2
done
log "ready after $((SECONDS - started)) s"

# --- drift check of the generated types -------------------------------------------------
node -e "$fetch_ok" "$URL/openapi.json" print > "$WORK/openapi.json" || server_failed "GET /openapi.json failed"
{
  cat <<'EOF'
// GENERATED FILE, do not edit: the types of Casement's HTTP API, made by openapi-typescript
// (the version pinned in package.json) from GET /openapi.json of the all-in-one
// (`casement run` with its default settings, webhook on). Regenerate after an API change
// with `clients/typescript/run-tests.sh --regenerate` (or `npm run generate`), which starts
// the server, writes this file and runs the checks; run-tests.sh fails while it differs.
EOF
  "$OPENAPI_TS" "$WORK/openapi.json" 2> "$WORK/openapi-typescript.log" \
    || { cat "$WORK/openapi-typescript.log" >&2; fail "openapi-typescript failed on $URL/openapi.json"; }
} > "$WORK/schema.ts"
if cmp -s "$WORK/schema.ts" "$HERE/src/schema.ts"; then
  log "src/schema.ts matches the served /openapi.json"
elif ((regenerate)); then
  cp "$WORK/schema.ts" "$HERE/src/schema.ts"
  log "src/schema.ts regenerated from $URL/openapi.json"
else
  diff -u "$HERE/src/schema.ts" "$WORK/schema.ts" | head -n 80 >&2 || true
  fail "src/schema.ts differs from what openapi-typescript makes of the served /openapi.json (diff above, first 80 lines): the API or the pinned openapi-typescript changed. Run clients/typescript/run-tests.sh --regenerate, fix src/ if it no longer type-checks, and commit src/schema.ts"
fi

# --- type checks and the compiled tests --------------------------------------------------
cd "$HERE"
log "tsc --noEmit (strict) over src/, tests/ and examples/"
"$TSC" --noEmit -p . --typeRoots "$TYPE_ROOTS"
log "tsc -p tsconfig.build.json (the package: src/ alone, no Node types)"
"$TSC" -p tsconfig.build.json --outDir "$WORK/dist"
"$TSC" -p . --noEmit false --outDir "$WORK/build" --typeRoots "$TYPE_ROOTS"
# The compiled examples import "@casement/client": a package importing itself by name.
echo '{"name": "@casement/client", "type": "module", "exports": {".": "./src/index.js"}}' > "$WORK/build/package.json"

log "node --test"
status=0
CASEMENT_TEST_URL="$URL" CASEMENT_TEST_API_KEY="$API_KEY" \
  CASEMENT_TEST_SAMPLE="$REPO_ROOT/sample/18f-handbook" CASEMENT_TEST_START_TIMEOUT="$START_TIMEOUT" \
  CASEMENT_TEST_PACKAGE_JSON="$HERE/package.json" \
  node --test --test-reporter=spec ${node_args[@]+"${node_args[@]}"} "$WORK"/build/tests/*.test.js || status=$?
if ((status != 0)) && ! kill -0 "$server_pid" 2>/dev/null; then
  server_failed "casement exited during the tests"
fi
exit "$status"
