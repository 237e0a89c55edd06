#!/usr/bin/env python3
"""Static checks of PushHub's dashboard and alerts (make test):

- deploy/grafana/pushhub-dashboard.json against deploy/grafana/dashboard.schema.json, its panel
  ids unique and its panels inside Grafana's 24-column grid;
- every metric the dashboard and the alerts read is one PushHub serves (named in Sources/), so
  a renamed metric cannot leave a panel or an alert silently empty;
- every dashboard query parses (promtool checks them as recording rules);
- promtool check rules and promtool test rules on deploy/prometheus/alerts.yaml;
- the Kubernetes overlay's copies (a PrometheusRule, the dashboard for a ConfigMap) are what
  those two files make (`--write` makes them).
"""
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy/grafana/pushhub-dashboard.json"
SCHEMA = ROOT / "deploy/grafana/dashboard.schema.json"
ALERTS = ROOT / "deploy/prometheus/alerts.yaml"
ALERT_TESTS = ROOT / "deploy/prometheus/alerts.test.yaml"
OVERLAY = ROOT / "deploy/kubernetes/overlays/observability"
RULE_HEADER = (
    "# Made from deploy/prometheus/alerts.yaml by `python3 scripts/check-observability.py --write`;\n"
    "# edit that file, not this one.\n"
)
# Prometheus's own series, which no PushHub process serves.
PROMETHEUS_SERIES = {"up"}


def served_metrics():
    names = set()
    for path in (ROOT / "Sources").rglob("*.swift"):
        names.update(re.findall(r'"(pushhub_[a-z_]+)"', path.read_text()))
    return names


def metrics_in(expression):
    """The metric names an expression reads (a histogram's series by its base name)."""
    names = set()
    for name in re.findall(r"\b(pushhub_[a-z_]+|up)\b(?=\s*[{\[(]|\s*\)|\s*$|\s*[<>=!])", expression):
        names.add(re.sub(r"_(bucket|sum|count)$", "", name) if name.endswith(("_bucket", "_sum", "_count")) else name)
    return names


class _Literal(yaml.SafeDumper):
    """Multi-line strings (the rules' expressions) as block literals, as alerts.yaml writes them."""


_Literal.add_representer(
    str, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def overlay_files():
    """What the observability overlay must hold, made from the canonical files."""
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "pushhub", "labels": {"app.kubernetes.io/part-of": "pushhub"}},
        "spec": yaml.safe_load(ALERTS.read_text()),
    }
    return {
        OVERLAY / "prometheus-rule.yaml": RULE_HEADER + yaml.dump(rule, Dumper=_Literal, sort_keys=False, width=120),
        OVERLAY / "pushhub-dashboard.json": DASHBOARD.read_text(),
    }


def main():
    problems = []
    for path, text in overlay_files().items():
        if "--write" in sys.argv:
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            problems.append(f"{path.relative_to(ROOT)}: not what {ALERTS.relative_to(ROOT)} and {DASHBOARD.relative_to(ROOT)} make; "
                            "run python3 scripts/check-observability.py --write")
    dashboard = json.loads(DASHBOARD.read_text())
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for error in validator.iter_errors(dashboard):
        problems.append(f"{DASHBOARD.relative_to(ROOT)}: {'/'.join(map(str, error.absolute_path))}: {error.message}")
    panels = dashboard.get("panels", [])
    ids = [panel.get("id") for panel in panels]
    if len(ids) != len(set(ids)):
        problems.append(f"{DASHBOARD.relative_to(ROOT)}: panel ids repeat: {ids}")
    for panel in panels:
        grid = panel.get("gridPos", {})
        if grid.get("x", 0) + grid.get("w", 0) > 24:
            problems.append(f"{DASHBOARD.relative_to(ROOT)}: panel {panel.get('title')!r} reaches past column 24")

    served = served_metrics()
    expressions = [(f"panel {panel['title']!r}", target["expr"]) for panel in panels for target in panel.get("targets", [])]
    rules = yaml.safe_load(ALERTS.read_text())
    expressions += [(f"alert {rule['alert']}", rule["expr"]) for group in rules["groups"] for rule in group["rules"]]
    for place, expression in expressions:
        names = metrics_in(expression)
        if not names:
            problems.append(f"{place}: reads no metric: {expression}")
        for name in sorted(names - served - PROMETHEUS_SERIES):
            problems.append(f"{place}: reads {name}, which no PushHub process serves")

    # The dashboard's queries, parsed by promtool as recording rules.
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as file:
        yaml.safe_dump(
            {"groups": [{"name": "dashboard", "rules": [
                {"record": f"pushhub:dashboard:{index}", "expr": target["expr"]}
                for index, target in enumerate(t for panel in panels for t in panel.get("targets", []))
            ]}]}, file)
    for command in (
        ["promtool", "check", "rules", file.name],
        ["promtool", "check", "rules", str(ALERTS)],
        ["promtool", "test", "rules", str(ALERT_TESTS)],
    ):
        result = subprocess.run(command, capture_output=True, text=True, cwd=ALERT_TESTS.parent)
        if result.returncode != 0:
            problems.append(f"{' '.join(command)}:\n{result.stdout}{result.stderr}")
    pathlib.Path(file.name).unlink()

    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"dashboard ({len(panels)} panels, {len(expressions) - len(rules['groups'][0]['rules'])} queries) and "
          f"{len(rules['groups'][0]['rules'])} alerts: schema, metrics and promtool checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
