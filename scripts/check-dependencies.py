#!/usr/bin/env python3
"""Checks the package graph: the targets that run apart from the ingress must not link it.

Reads `swift package dump-package` (or the JSON file given) and follows each target's
dependencies on other targets of this package, transitively. Exits 1 naming every target that
reaches a module it must not.
"""
import json
import os
import subprocess
import sys

# target: modules it must not reach, and why.
RULES = {
    "PushWorker": ({"PushIngress", "PushStore", "PushDispatcher"}, "workers read pushhub.yaml and Kafka only"),
    "PushAPNsWorkerMain": ({"PushIngress", "PushStore", "PushDispatcher"}, "a worker executable"),
    "PushFCMWorkerMain": ({"PushIngress", "PushStore", "PushDispatcher"}, "a worker executable"),
    "PushWNSWorkerMain": ({"PushIngress", "PushStore", "PushDispatcher"}, "a worker executable"),
    "PushWebPushWorkerMain": ({"PushIngress", "PushStore", "PushDispatcher"}, "a worker executable"),
    "PushSimulator": ({"PushIngress", "PushStore", "PushKafka"}, "the simulators are PNSs, not PushHub"),
    "PushDispatcher": ({"PushIngress"}, "the dispatcher reads the store, not the ingress"),
    "PushDispatcherMain": ({"PushIngress"}, "the dispatcher's executable"),
    "PushConfiguration": ({"PushIngress", "PushStore", "PushKafka", "PushProviders"}, "configuration depends on the model only"),
    "PushModel": ({"PushIngress", "PushStore", "PushKafka", "PushProviders", "PushConfiguration"}, "the model has no I/O"),
    "PushProviders": ({"PushIngress", "PushStore", "PushKafka"}, "PNS clients know nothing of Kafka or the store"),
}


def local_dependencies(target):
    names = []
    for dependency in target.get("dependencies", []):
        for kind in ("byName", "target"):
            if kind in dependency and dependency[kind]:
                names.append(dependency[kind][0])
    return names


def main():
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as handle:
            package = json.load(handle)
    else:
        package = json.loads(subprocess.run([os.environ.get("SWIFT", "swift"), "package", "dump-package"], check=True, capture_output=True, text=True).stdout)
    targets = {target["name"]: target for target in package["targets"]}
    graph = {name: [d for d in local_dependencies(target) if d in targets] for name, target in targets.items()}

    def reach(name):
        seen, stack = set(), [name]
        while stack:
            for dependency in graph[stack.pop()]:
                if dependency not in seen:
                    seen.add(dependency)
                    stack.append(dependency)
        return seen

    problems = []
    for name, (forbidden, why) in RULES.items():
        if name not in targets:
            problems.append(f"{name}: no such target")
            continue
        bad = reach(name) & forbidden
        if bad:
            problems.append(f"{name} reaches {', '.join(sorted(bad))} ({why})")
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"ok: {len(RULES)} targets checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
