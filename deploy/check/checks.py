#!/usr/bin/env python3
"""Checks of deploy/ that no off-the-shelf validator makes, run by deploy/check.sh in its
tools virtualenv (PyYAML). Each subcommand prints what it checked and exits 1 on a problem.

  metrics ALERTS DOCS              every casement_* metric in the rules is listed in docs/metrics.md
  prometheusrule PRULE ALERTS OUT  the PrometheusRule carries alerts.yml's groups; writes them
                                   to OUT as a rule file (for promtool check rules)
  kustomization DIR                its resources exist, and every manifest of DIR is listed
  compose-mounts COMPOSE           the files and folders the Compose file bind-mounts exist
  configs BIN_DIR DOCKERFILE COMPOSE K8S_DIR
                                   each Casement service's settings in Compose and Kubernetes
                                   (environment, the ConfigMap's TOML files, the image's ENV)
                                   pass that binary's own `check-config`
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

BINARIES = {"casement", "casement-indexer", "casement-query"}
# A value for each variable a workload takes from a Secret (check-config must parse it).
SECRET_PLACEHOLDERS = {
    "AUTH__KEYS": '[{token = "check-deploy-placeholder-token"}]',
}


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def load_all(path):
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


# --- metrics -----------------------------------------------------------------------------

HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def documented_metrics(docs):
    names = set(re.findall(r"^\| `(casement_[a-z0-9_]+)` \|", Path(docs).read_text(), re.M))
    if not names:
        fail(f"{docs}: no metric table rows found")
    return names


def rule_expressions(groups):
    for group in groups:
        for rule in group.get("rules", []):
            yield rule.get("alert") or rule.get("record"), rule["expr"]


def cmd_metrics(alerts, docs):
    known = documented_metrics(docs)
    groups = load_all(alerts)[0]["groups"]
    recorded = {rule["record"] for g in groups for rule in g["rules"] if "record" in rule}
    unknown = []
    used = set()
    for name, expr in rule_expressions(groups):
        # Metric names, not recording rules (`job:casement_...`), label values or strings.
        stripped = re.sub(r'"[^"]*"', '""', expr)
        for metric in re.findall(r"(?<![\w:])casement_[a-z0-9_]+", stripped):
            base = metric
            for suffix in HISTOGRAM_SUFFIXES:
                if metric.endswith(suffix) and metric[: -len(suffix)] in known:
                    base = metric[: -len(suffix)]
            if base in known:
                used.add(base)
            else:
                unknown.append(f"{name}: {metric}")
        for record in re.findall(r"[a-z_]+:[a-z0-9_:]+", stripped):
            if record not in recorded:
                unknown.append(f"{name}: recording rule {record} is not defined")
    if unknown:
        fail("not listed in " + docs + ":\n  " + "\n  ".join(unknown))
    print(f"{len(used)} metrics used by the rules, all listed in {docs}: {', '.join(sorted(used))}")


# --- PrometheusRule ----------------------------------------------------------------------


def cmd_prometheusrule(prule, alerts, out):
    docs = load_all(prule)
    if len(docs) != 1 or docs[0].get("kind") != "PrometheusRule":
        fail(f"{prule}: expected one PrometheusRule")
    groups = docs[0]["spec"]["groups"]
    if groups != load_all(alerts)[0]["groups"]:
        fail(f"{prule}: spec.groups differ from {alerts}")
    Path(out).write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    rules = sum(len(g["rules"]) for g in groups)
    print(f"{prule}: {len(groups)} groups, {rules} rules, equal to {alerts}")


# --- kustomization -----------------------------------------------------------------------


def cmd_kustomization(directory):
    directory = Path(directory)
    resources = load_all(directory / "kustomization.yaml")[0]["resources"]
    missing = [r for r in resources if not (directory / r).is_file()]
    manifests = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    unlisted = sorted(manifests - set(resources))
    if missing or unlisted:
        fail(f"{directory}/kustomization.yaml: missing files {missing}, manifests not listed {unlisted}")
    print(f"{directory}/kustomization.yaml: {len(resources)} resources, all present")


# --- Compose mounts ----------------------------------------------------------------------


def cmd_compose_mounts(compose):
    compose = Path(compose)
    spec = load_all(compose)[0]
    checked, missing = 0, []
    for name, service in spec["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")):
                checked += 1
                if not (compose.parent / source).exists():
                    missing.append(f"{name}: {source}")
        build = service.get("build")
        if build:
            context = compose.parent / build["context"]
            checked += 1
            if not (context / build.get("dockerfile", "Dockerfile")).is_file():
                missing.append(f"{name}: build {build}")
    if missing:
        fail(f"{compose}: missing " + ", ".join(missing))
    print(f"{compose}: {checked} bind mounts and build contexts present")


# --- configs through check-config --------------------------------------------------------


def image_env(dockerfile):
    """The ENV of the Dockerfile's last stage (the runtime image)."""
    text = Path(dockerfile).read_text().replace("\\\n", " ")
    stage = text.split("\nFROM ")[-1]
    env = {}
    for line in stage.splitlines():
        if line.startswith("ENV "):
            for key, value in re.findall(r"(\w+)=(\S+)", line[4:]):
                env[key] = value
    return env


def interpolate(value):
    """Compose's ${VAR:-default} / ${VAR-default} / ${VAR}, as if VAR were unset."""
    value = str(value)
    value = re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", value)
    value = re.sub(r"\$\{\w+\}", "", value)
    return value


def check_config(bin_dir, binary, env, label, config_file=None):
    path = Path(bin_dir) / binary
    cmd = [str(path)] + (["--config", str(config_file)] if config_file else []) + ["check-config"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CASEMENT")}
    result = subprocess.run(cmd, env={**clean, **env}, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        return f"{label}: {binary} check-config failed: {result.stderr.strip()}"
    print(f"ok    {label}: {binary} check-config" + (f" --config {config_file.name}" if config_file else ""))
    return None


def compose_workloads(compose):
    spec = load_all(compose)[0]
    for name, service in spec["services"].items():
        command = service.get("command") or []
        if command and command[0] in BINARIES:
            env = {k: interpolate(v) for k, v in (service.get("environment") or {}).items()}
            yield f"{compose}: service {name}", command[0], env


def k8s_workloads(directory):
    configmaps = {}
    workloads = []
    for path in sorted(Path(directory).glob("*.yaml")):
        for doc in load_all(path):
            if doc.get("kind") == "ConfigMap":
                configmaps[doc["metadata"]["name"]] = doc.get("data", {})
            elif doc.get("kind") in ("Deployment", "StatefulSet"):
                workloads.append((path, doc))
    for path, doc in workloads:
        pod = doc["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in pod["containers"]:
            args = container.get("args") or container.get("command") or []
            if not args or args[0] not in BINARIES:
                continue
            mounts = {}
            for mount in container.get("volumeMounts", []):
                volume = volumes.get(mount["name"], {})
                if "configMap" in volume:
                    name = volume["configMap"]["name"]
                    if name not in configmaps:
                        fail(f"{path}: ConfigMap {name} is not among the manifests")
                    mounts[mount["mountPath"].rstrip("/")] = configmaps[name]
            env = {}
            for var in container.get("env", []):
                if "value" in var:
                    env[var["name"]] = var["value"]
                elif "secretKeyRef" in var.get("valueFrom", {}):
                    placeholder = next(
                        (v for suffix, v in SECRET_PLACEHOLDERS.items() if var["name"].endswith(suffix)),
                        "check-deploy-placeholder",
                    )
                    env[var["name"]] = placeholder
            label = f"{path}: {doc['kind']} {doc['metadata']['name']}"
            yield label, args[0], env, mounts


def cmd_configs(bin_dir, dockerfile, compose, k8s_dir):
    missing = [b for b in sorted(BINARIES) if not (Path(bin_dir) / b).is_file()]
    if missing:
        fail(f"{bin_dir}: no {', '.join(missing)}")
    base = image_env(dockerfile)
    problems = []
    for label, binary, env in compose_workloads(compose):
        problems.append(check_config(bin_dir, binary, {**base, **env}, label))
    with tempfile.TemporaryDirectory() as tmp:
        for label, binary, env, mounts in k8s_workloads(k8s_dir):
            env = {**base, **env}
            config_file = None
            for key, value in list(env.items()):
                if not key.endswith("_CONFIG"):
                    continue
                for mount_path, files in mounts.items():
                    if value.startswith(mount_path + "/"):
                        name = value[len(mount_path) + 1 :]
                        if name not in files:
                            problems.append(f"{label}: {key}={value}, but the ConfigMap has no {name}")
                            continue
                        config_file = Path(tmp) / f"{binary}-{name}"
                        config_file.write_text(files[name])
                        del env[key]
            problems.append(check_config(bin_dir, binary, env, label, config_file))
    problems = [p for p in problems if p]
    if problems:
        fail("\n  ".join(problems))


def main(argv):
    commands = {
        "metrics": (cmd_metrics, 2),
        "prometheusrule": (cmd_prometheusrule, 3),
        "kustomization": (cmd_kustomization, 1),
        "compose-mounts": (cmd_compose_mounts, 1),
        "configs": (cmd_configs, 4),
    }
    if not argv or argv[0] not in commands or len(argv) - 1 != commands[argv[0]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    function, _ = commands[argv[0]]
    function(*argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
