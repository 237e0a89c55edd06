#!/usr/bin/env python3
"""Validates JSON documents against one of PushHub's wire schemas (docs/schemas).

usage: check-json-schema.py [--expect-invalid] SCHEMA DOCUMENT...

Prints one line per document and exits 1 when any document is judged otherwise than
expected (valid by default). The shared definitions in common.v1.schema.json are resolved
from the schema's directory.
"""
import json
import pathlib
import sys

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource


def main(argv):
    expect_invalid = "--expect-invalid" in argv
    paths = [a for a in argv if a != "--expect-invalid"]
    if len(paths) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    schema_path = pathlib.Path(paths[0])
    registry = Registry()
    for candidate in schema_path.parent.glob("*.schema.json"):
        contents = json.loads(candidate.read_text())
        registry = registry.with_resource(contents["$id"], Resource.from_contents(contents))
    schema = json.loads(schema_path.read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema, registry=registry, format_checker=FormatChecker())
    unexpected = 0
    for document_path in paths[1:]:
        document = json.loads(pathlib.Path(document_path).read_text())
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
            verdict = f"invalid at {where}: {errors[0].message}"
        else:
            verdict = "valid"
        ok = bool(errors) == expect_invalid
        unexpected += 0 if ok else 1
        print(f"{'ok' if ok else 'UNEXPECTED'} {document_path}: {verdict}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
