#!/usr/bin/env python3
"""Writes deploy/k8s/prometheusrule.yaml (a Prometheus Operator PrometheusRule) from
deploy/prometheus/alerts.yml, so that Compose and Kubernetes carry the same rules.

The rule groups are copied as text, indented under `spec:`, comments included; only the
file's opening comment is replaced by the resource's header.

    python3 deploy/prometheus/to-prometheusrule.py            # (re)write the file
    python3 deploy/prometheus/to-prometheusrule.py --check    # exit 1 when it is out of date

Standard library only.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "alerts.yml"
TARGET = HERE.parent / "k8s" / "prometheusrule.yaml"

HEADER = """\
# GENERATED from deploy/prometheus/alerts.yml by deploy/prometheus/to-prometheusrule.py: edit
# that file and run the script (`make check-deploy` fails while this one is out of date).
# The comments on the rules are alerts.yml's.
#
# A Prometheus managed by the Prometheus Operator loads the PrometheusRules its
# ruleSelector matches (kube-prometheus-stack: the label `release: <its release name>`); add
# that label here, or in kustomization.yaml's `labels`.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: casement
  labels:
    app.kubernetes.io/name: casement
    app.kubernetes.io/part-of: casement
spec:
"""


def render(source_text: str) -> str:
    lines = source_text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    except StopIteration:
        raise SystemExit(f"{SOURCE}: no top-level `groups:` line") from None
    body = [("  " + line) if line.strip() else "" for line in lines[start:]]
    return HEADER + "\n".join(body) + "\n"


def main() -> int:
    wanted = render(SOURCE.read_text())
    if sys.argv[1:] == ["--check"]:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != wanted:
            print(
                f"{TARGET.relative_to(HERE.parent.parent)} is out of date with alerts.yml: "
                "run python3 deploy/prometheus/to-prometheusrule.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if sys.argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    TARGET.write_text(wanted)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
