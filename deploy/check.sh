#!/usr/bin/env bash
# Validates deploy/ with real tools from the package registries (`make check-deploy`): the
# Dockerfile, the Compose file, the Kubernetes manifests, the systemd unit, the Prometheus
# configuration and alert rules (with their unit tests), the Grafana provisioning. Docker
# itself cannot run on the development machines: nothing here builds or starts a container.
#
# Installs what it needs when missing, pinned, into $CASEMENT_TOOLS_DIR/deploy (default
# ~/.cache/casement/tools/deploy); a marker per tool set makes the next run skip the install:
#   venv/   PyPI: hadolint, check-jsonschema (+ the Compose spec schema), kubernetes-validate,
#           yamllint, shellcheck (deploy/check/requirements.txt)
#   node/   npm: dclint, @kubernetes-models/prometheus-operator (deploy/check/package-lock.json)
#   prometheus/  promtool, extracted from Debian's `prometheus` package (apt-get download +
#           dpkg-deb: no service is installed or started, no root needed once apt's lists
#           are there); a promtool already on PATH is used instead.
# systemd-analyze is used where present (Debian's systemd package).
#
# The services' settings in Compose and Kubernetes are also run through each binary's own
# `check-config` when built binaries exist ($CASEMENT_BIN_DIR, default target/release).
#
# Every check runs; the script prints one line per check and exits 1 if any failed.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
TOOLS_DIR="${CASEMENT_TOOLS_DIR:-$HOME/.cache/casement/tools}/deploy"
BIN_DIR="${CASEMENT_BIN_DIR:-$ROOT/target/release}"
# Debian 12's prometheus; any Debian revision of it (security updates change the revision).
PROMETHEUS_UPSTREAM="2.42.0"
NODE_MIN_MAJOR=20

say() { echo "[deploy] $*"; }
die() { echo "[deploy] error: $*" >&2; exit 1; }
sha() { sha256sum "$@" | sha256sum | cut -c1-16; }

# --- tools ------------------------------------------------------------------------------

install_python_tools() {
  local venv="$TOOLS_DIR/venv" marker="$TOOLS_DIR/venv/casement-deploy.txt"
  local want
  want="$(sha deploy/check/requirements.txt)"
  if [[ -x "$venv/bin/python" && -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
    return
  fi
  say "installing the PyPI validators (deploy/check/requirements.txt) into $venv"
  rm -rf "$venv"
  mkdir -p "$TOOLS_DIR"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    -r deploy/check/requirements.txt
  echo "$want" > "$marker"
}

install_node_tools() {
  local dir="$TOOLS_DIR/node" marker="$TOOLS_DIR/node/casement-deploy.txt"
  local want major
  if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
    die "node and npm are needed (dclint, the Prometheus Operator schemas): Node >= $NODE_MIN_MAJOR"
  fi
  major="$(node -p 'process.versions.node.split(".")[0]')"
  (( major >= NODE_MIN_MAJOR )) || die "Node $(node --version) is too old: dclint needs >= $NODE_MIN_MAJOR"
  want="$(sha deploy/check/package.json deploy/check/package-lock.json)"
  if [[ -d "$dir/node_modules" && -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
    return
  fi
  say "installing the npm validators (deploy/check/package-lock.json) into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp deploy/check/package.json deploy/check/package-lock.json "$dir/"
  # The engines warnings of @kubernetes-models (Node >= 22 declared; it runs on 20) are noise.
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error > /dev/null)
  echo "$want" > "$marker"
}

install_promtool() {
  if command -v promtool > /dev/null; then
    PROMTOOL="$(command -v promtool)"
    return
  fi
  local dir="$TOOLS_DIR/prometheus" policy candidate tmp
  PROMTOOL="$dir/usr/bin/promtool"
  if [[ -x "$PROMTOOL" && "$(cat "$dir/casement-deploy.txt" 2>/dev/null)" == "$PROMETHEUS_UPSTREAM"+* ]]; then
    return
  fi
  command -v apt-get > /dev/null || die "promtool not found and no apt-get to fetch Debian's prometheus package"
  policy="$(apt-cache policy prometheus 2> /dev/null || true)"
  if [[ "$policy" != *"Candidate: $PROMETHEUS_UPSTREAM+"* ]]; then
    [[ "$(id -u)" == 0 ]] || die "apt's package lists have no prometheus $PROMETHEUS_UPSTREAM: run apt-get update (as root)"
    say "apt-get update (the package lists have no prometheus $PROMETHEUS_UPSTREAM)"
    apt-get update -qq
    policy="$(apt-cache policy prometheus 2> /dev/null || true)"
  fi
  candidate="$(awk '/Candidate:/ {print $2}' <<< "$policy")"
  [[ "$candidate" == "$PROMETHEUS_UPSTREAM"+* ]] \
    || die "Debian offers prometheus '$candidate', not $PROMETHEUS_UPSTREAM (Debian 12): update PROMETHEUS_UPSTREAM in $0 and check the rules with it"
  say "fetching promtool from Debian's prometheus $candidate into $dir"
  tmp="$(mktemp -d)"
  chmod 0755 "$tmp"
  [[ "$(id -u)" != 0 ]] || chown _apt "$tmp" 2> /dev/null || true   # apt downloads as _apt
  (cd "$tmp" && apt-get download -qq "prometheus=$candidate") || die "apt-get download prometheus=$candidate failed"
  rm -rf "$dir"
  mkdir -p "$dir"
  dpkg-deb -x "$tmp"/prometheus_*.deb "$dir"
  rm -rf "$tmp"
  echo "$candidate" > "$dir/casement-deploy.txt"
}

started=$(date +%s)
install_python_tools
install_node_tools
install_promtool
VENV="$TOOLS_DIR/venv/bin"
NODE_DIR="$TOOLS_DIR/node"
cp deploy/check/crds.mjs "$NODE_DIR/crds.mjs"
SYSTEMD_ANALYZE="$(command -v systemd-analyze || true)"

versions=(
  "promtool $("$PROMTOOL" --version 2>&1 | head -1 | awk '{print $3}')"
  "hadolint $("$VENV/hadolint" --version | awk '{print $NF}')"
  "shellcheck $("$VENV/shellcheck" --version | awk '/^version:/ {print $2}')"
  "check-jsonschema $("$VENV/check-jsonschema" --version | awk '{print $NF}')"
  "kubernetes-validate $("$VENV/kubernetes-validate" --version | awk '{print $NF}')"
  "yamllint $("$VENV/yamllint" --version | awk '{print $NF}')"
  "dclint $(node "$NODE_DIR/node_modules/dclint/bin/dclint.cjs" --version)"
  "@kubernetes-models/prometheus-operator $(node -p "require('$NODE_DIR/node_modules/@kubernetes-models/prometheus-operator/package.json').version")"
  "node $(node --version)"
)
[[ -n "$SYSTEMD_ANALYZE" ]] && versions+=("systemd-analyze $("$SYSTEMD_ANALYZE" --version | head -1 | awk '{print $2}')")
joined="$(IFS=,; echo "${versions[*]}")"
say "tools ready in $(( $(date +%s) - started )) s: ${joined//,/, }"

# --- checks -----------------------------------------------------------------------------

FAILED=()
SKIPPED=()
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# check NAME COMMAND...: runs it, prints ok or FAIL with its output (indented).
check() {
  local name="$1"
  shift
  local out t0 t1
  t0=$(date +%s%N)
  if out="$("$@" 2>&1)"; then
    t1=$(date +%s%N)
    printf '[deploy] ok    %-58s %5.1f s\n' "$name" "$(( (t1 - t0) / 1000000 ))e-3"
  else
    t1=$(date +%s%N)
    printf '[deploy] FAIL  %-58s %5.1f s\n' "$name" "$(( (t1 - t0) / 1000000 ))e-3"
    printf '%s\n' "$out" | sed 's/^/    /'
    FAILED+=("$name")
  fi
}
skip() {
  printf '[deploy] skip  %s: %s\n' "$1" "$2"
  SKIPPED+=("$1")
}

YAML_FILES=(deploy/docker-compose.yml deploy/prometheus deploy/grafana deploy/k8s deploy/check/dclint.yml deploy/check/yamllint.yml)
K8S_BUILTIN=(deploy/k8s/configmap.yaml deploy/k8s/indexer.yaml deploy/k8s/query.yaml deploy/k8s/casement.yaml deploy/k8s/examples/secret.yaml)
K8S_CRDS=(deploy/k8s/servicemonitor.yaml deploy/k8s/prometheusrule.yaml)

check "yamllint: every YAML file of deploy/" \
  "$VENV/yamllint" --strict -c deploy/check/yamllint.yml "${YAML_FILES[@]}"
check "shellcheck: check.sh, dist.sh, docker/healthcheck.sh, the clients' run-tests.sh" \
  "$VENV/shellcheck" deploy/check.sh deploy/dist.sh deploy/docker/healthcheck.sh \
  clients/python/run-tests.sh clients/typescript/run-tests.sh fuzz/run.sh

# Prometheus
check "promtool check rules: prometheus/alerts.yml" \
  "$PROMTOOL" check rules deploy/prometheus/alerts.yml
check "promtool test rules: prometheus/alerts.test.yml" \
  "$PROMTOOL" test rules deploy/prometheus/alerts.test.yml
check "promtool check config: prometheus/prometheus.yml" \
  "$PROMTOOL" check config deploy/prometheus/prometheus.yml
check "rule metrics are listed in docs/metrics.md" \
  "$VENV/python" deploy/check/checks.py metrics deploy/prometheus/alerts.yml docs/metrics.md

# Docker
check "hadolint: Dockerfile" \
  "$VENV/hadolint" --no-color deploy/Dockerfile
check "compose-spec schema: docker-compose.yml" \
  "$VENV/check-jsonschema" --builtin-schema vendor.compose-spec deploy/docker-compose.yml
check "dclint: docker-compose.yml" \
  node "$NODE_DIR/node_modules/dclint/bin/dclint.cjs" deploy/docker-compose.yml \
  --no-color -c deploy/check/dclint.yml --max-warnings 0
check "compose bind mounts and build context exist" \
  "$VENV/python" deploy/check/checks.py compose-mounts deploy/docker-compose.yml

# Kubernetes
check "kubernetes-validate --strict (1.37 schemas): k8s/" \
  "$VENV/kubernetes-validate" --strict --quiet "${K8S_BUILTIN[@]}"
check "Prometheus Operator CRD schemas: k8s/ monitors, rules" \
  node "$NODE_DIR/crds.mjs" "${K8S_CRDS[@]}"
check "prometheusrule.yaml generated from alerts.yml" \
  python3 deploy/prometheus/to-prometheusrule.py --check
check "prometheusrule.yaml groups equal alerts.yml's" \
  "$VENV/python" deploy/check/checks.py prometheusrule deploy/k8s/prometheusrule.yaml \
  deploy/prometheus/alerts.yml "$WORK/prometheusrule-groups.yml"
check "promtool check rules: prometheusrule.yaml's groups" \
  "$PROMTOOL" check rules "$WORK/prometheusrule-groups.yml"
check "kustomization.yaml lists every manifest" \
  "$VENV/python" deploy/check/checks.py kustomization deploy/k8s

# The services' own config loaders
if [[ -x "$BIN_DIR/casement" && -x "$BIN_DIR/casement-indexer" && -x "$BIN_DIR/casement-query" ]]; then
  check "check-config: Compose environment, ConfigMap TOML" \
    "$VENV/python" deploy/check/checks.py configs "$BIN_DIR" deploy/Dockerfile \
    deploy/docker-compose.yml deploy/k8s
else
  skip "check-config of the Compose and Kubernetes settings" \
    "no built binaries in $BIN_DIR (cargo build --release -p casement -p casement-indexer -p casement-query, or set CASEMENT_BIN_DIR)"
fi

# systemd
verify_unit() {
  # A root with the system's units and a stand-in for the binary, so that `verify` checks the
  # unit, not this machine's /usr/local/bin. Any message is a failure (verify exits 0 on
  # unknown keys and bad values).
  local root="$WORK/systemd-root" out
  mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd"
  cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
  printf '#!/bin/sh\n' > "$root/usr/local/bin/casement"
  chmod +x "$root/usr/local/bin/casement"
  cp deploy/systemd/casement.service "$root/etc/systemd/system/"
  out="$("$SYSTEMD_ANALYZE" verify --man=no --root="$root" casement.service 2>&1)" || { echo "$out"; return 1; }
  [[ -z "$out" ]] || { echo "$out"; return 1; }
  # Exposure level (0 safest, 10 unprotected; --threshold counts tenths): fail above 3.0.
  "$SYSTEMD_ANALYZE" security --offline=yes --root="$root" --threshold=30 casement.service | tail -1
}
if [[ -n "$SYSTEMD_ANALYZE" && -d /usr/lib/systemd/system ]]; then
  check "systemd-analyze verify + security: casement.service" verify_unit
else
  skip "systemd-analyze verify of systemd/casement.service" "systemd-analyze not installed"
fi

total=$(( $(date +%s) - started ))
if (( ${#FAILED[@]} > 0 )); then
  say "${#FAILED[@]} check(s) failed in $total s: $(IFS=';'; echo "${FAILED[*]}")"
  exit 1
fi
say "all checks passed in $total s${SKIPPED[*]:+ (${#SKIPPED[@]} skipped)}"
say "not run here: docker build, docker compose up, kubectl apply (no Docker engine or cluster)"
