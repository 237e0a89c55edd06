#!/usr/bin/env python3
"""Renders deploy/kubernetes (the base and every overlay) with `kubectl kustomize` and checks it.

- Built-in kinds are validated against the Kubernetes schemas (kubernetes-validate, strict).
- KEDA ScaledObjects, Strimzi KafkaTopics and Prometheus Operator PrometheusRules are checked
  against the fields PushHub relies on.
- Rules across manifests: every Deployment has readiness and liveness probes on
  /health/ready and /health/live and a grace period above the graceful shutdown; every
  autoscaler and disruption budget names a Deployment that exists.

Prints one line per problem and exits 1 if there is any.
"""
import pathlib, subprocess, sys

import jsonschema
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.31"
# The manifests' directory: the first argument, else the project's deploy/kubernetes.
ROOT = pathlib.Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"

CUSTOM = {
    "ScaledObject": {
        "type": "object",
        "required": ["apiVersion", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "keda.sh/v1alpha1"},
            "spec": {
                "type": "object",
                "required": ["scaleTargetRef", "triggers"],
                "properties": {
                    "scaleTargetRef": {"type": "object", "required": ["name"]},
                    "minReplicaCount": {"type": "integer", "minimum": 0},
                    "maxReplicaCount": {"type": "integer", "minimum": 1},
                    "triggers": {
                        "type": "array", "minItems": 1,
                        "items": {
                            "type": "object", "required": ["type", "metadata"],
                            "properties": {
                                "type": {"const": "kafka"},
                                "metadata": {
                                    "type": "object",
                                    "required": ["bootstrapServers", "consumerGroup", "topic", "lagThreshold"],
                                    "additionalProperties": {"type": "string"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "PrometheusRule": {
        "type": "object",
        "required": ["apiVersion", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "spec": {"type": "object", "required": ["groups"], "properties": {"groups": {
                "type": "array", "minItems": 1,
                "items": {"type": "object", "required": ["name", "rules"], "properties": {"rules": {
                    "type": "array", "minItems": 1,
                    "items": {"type": "object", "required": ["expr"], "oneOf": [{"required": ["alert"]}, {"required": ["record"]}]},
                }}},
            }}},
        },
    },
    "KafkaTopic": {
        "type": "object",
        "required": ["apiVersion", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "kafka.strimzi.io/v1beta2"},
            "metadata": {"type": "object", "required": ["name", "labels"],
                         "properties": {"labels": {"type": "object", "required": ["strimzi.io/cluster"]}}},
            "spec": {"type": "object", "required": ["partitions", "replicas"],
                     "properties": {"partitions": {"type": "integer", "minimum": 1}, "replicas": {"type": "integer", "minimum": 1},
                                    "config": {"type": "object", "additionalProperties": {"type": "string"}}}},
        },
    },
}


def render(directory):
    result = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True)
    if result.returncode != 0:
        return None, result.stderr.strip()
    return [d for d in yaml.safe_load_all(result.stdout) if d], None


def check(directory):
    problems = []
    documents, error = render(directory)
    if documents is None:
        return [f"{directory}: kustomize failed: {error}"]
    where = lambda d: f"{directory.relative_to(ROOT)}: {d.get('kind')}/{d.get('metadata', {}).get('name')}"
    deployments = {d["metadata"]["name"]: d for d in documents if d.get("kind") == "Deployment"}
    for document in documents:
        kind = document.get("kind")
        if kind in CUSTOM:
            for error in jsonschema.Draft202012Validator(CUSTOM[kind]).iter_errors(document):
                problems.append(f"{where(document)}: {'.'.join(map(str, error.path))}: {error.message}")
            continue
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{where(document)}: no schema for this kind")
        except kubernetes_validate.ValidationError as error:
            problems.append(f"{where(document)}: {error.message}")
    for name, deployment in deployments.items():
        spec = deployment["spec"]["template"]["spec"]
        if spec.get("terminationGracePeriodSeconds", 30) < 45:
            problems.append(f"Deployment/{name}: terminationGracePeriodSeconds must exceed the graceful shutdown (45 s or more)")
        for container in spec["containers"]:
            for probe, path in [("readinessProbe", "/health/ready"), ("livenessProbe", "/health/live")]:
                if container.get(probe, {}).get("httpGet", {}).get("path") != path:
                    problems.append(f"Deployment/{name}: {probe} must GET {path}")
    for document in documents:
        kind, name = document.get("kind"), document["metadata"]["name"]
        if kind in ("HorizontalPodAutoscaler", "ScaledObject") and document["spec"]["scaleTargetRef"]["name"] not in deployments:
            problems.append(f"{kind}/{name}: scales {document['spec']['scaleTargetRef']['name']}, which is not a Deployment here")
        if kind == "PodDisruptionBudget":
            selector = document["spec"]["selector"]["matchLabels"]
            if not any(all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items()) for d in deployments.values()):
                problems.append(f"PodDisruptionBudget/{name}: selects no Deployment")
    for process in ["pushhub-ingress", "pushhub-dispatcher"] + [f"pushhub-{p}-worker" for p in ("apns", "fcm", "wns", "webpush", "hms", "adm", "xiaomi", "baidu")]:
        if process not in deployments:
            problems.append(f"{directory.relative_to(ROOT)}: no Deployment {process}")
    return problems


def main():
    directories = [ROOT / "base"] + sorted(p for p in (ROOT / "overlays").iterdir() if p.is_dir())
    problems = [problem for directory in directories for problem in check(directory)]
    for problem in problems:
        print(problem)
    if not problems:
        print(f"ok: {', '.join(str(d.relative_to(ROOT)) for d in directories)}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
