#!/usr/bin/env python3
"""Checks docs/openapi.yaml, and compares it with the routes the router registers.

usage: check-openapi.py [--spec PATH] [--full] [ROUTES_FILE | -]

1. The document: `openapi: 3.1.x`; `info` with `title` and `version`; `paths` whose keys
   start with `/`; every operation has a non-empty `responses` whose keys are status codes
   (`200`, `4XX`) or `default`; every `{param}` of a path template is declared as a required
   path parameter of each of its operations (and no path parameter is declared that the
   template lacks); operationIds are unique; every `$ref` resolves within the document.
   With --full, openapi-spec-validator (when installed) validates the document as well.

2. The routes: a list of `METHOD /path/{param}` lines, from ROUTES_FILE, or from stdin
   when ROUTES_FILE is `-`, or absent with something piped in (an empty stdin without
   ROUTES_FILE means no list: only the document is checked). Blank lines and lines
   starting with `#` are ignored; a query string is ignored. Path parameters compare by
   position, not name: `{id}`, `{registrationId}` and Hummingbird's `:id` are all equal.
   Names every listed route the document lacks, and every documented path and method that
   is not in the list.

Exits 0 when everything agrees, 1 when the document is invalid or the lists differ, 2 on
usage errors (unreadable files, YAML that does not parse, malformed route lines).
"""
import argparse
import pathlib
import re
import sys

import yaml

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
STATUS_KEY = re.compile(r"^(?:[1-5][0-9][0-9]|[1-5]XX|default)$")
TEMPLATE_PARAM = re.compile(r"\{([^{}/]+)\}")


class UsageError(Exception):
    pass


# --- The document -----------------------------------------------------------------------------


def resolve_pointer(document, ref):
    """The node a local `$ref` names, or raises KeyError saying why it does not resolve."""
    if not ref.startswith("#"):
        raise KeyError(f"{ref}: only references within the document are supported")
    fragment = ref[1:]
    if fragment == "":
        return document
    if not fragment.startswith("/"):
        raise KeyError(f"{ref}: not a JSON pointer")
    node = document
    for raw in fragment[1:].split("/"):
        token = raw.replace("%25", "%").replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise KeyError(f"{ref}: nothing at {token!r}")
    return node


def deref(document, node, seen=()):
    """Follows `$ref` chains to the node they end at."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            raise KeyError(f"{ref}: reference cycle")
        seen = seen + (ref,)
        node = resolve_pointer(document, ref)
    return node


def check_refs(document, node, where, errors):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref is not None:
            if not isinstance(ref, str):
                errors.append(f"{where}/$ref: not a string")
            else:
                try:
                    resolve_pointer(document, ref)
                except KeyError as error:
                    errors.append(f"{where}: $ref {error.args[0]}")
        for key, value in node.items():
            check_refs(document, value, f"{where}/{key}", errors)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            check_refs(document, value, f"{where}/{index}", errors)


def declared_path_parameters(document, parameters, where, errors):
    names = []
    for index, parameter in enumerate(parameters or []):
        try:
            parameter = deref(document, parameter)
        except KeyError:
            continue  # reported by check_refs
        if not isinstance(parameter, dict):
            errors.append(f"{where}/parameters/{index}: not an object")
            continue
        if parameter.get("in") == "path":
            names.append(parameter.get("name"))
            if parameter.get("required") is not True:
                errors.append(f"{where}: path parameter {parameter.get('name')!r} must be required: true")
    return names


def check_document(document):
    errors = []
    if not isinstance(document, dict):
        return ["the document is not a mapping"]
    version = document.get("openapi")
    if not isinstance(version, str) or not re.fullmatch(r"3\.1\.\d+", version):
        errors.append(f"openapi: must be 3.1.x (a string), not {version!r}")
    info = document.get("info")
    if not isinstance(info, dict) or not isinstance(info.get("title"), str) or not isinstance(info.get("version"), str):
        errors.append("info: needs a title and a version (strings)")
    paths = document.get("paths")
    if not isinstance(paths, dict) or not paths:
        errors.append("paths: missing or empty")
        paths = {}
    operation_ids = {}
    for path, item in paths.items():
        where = f"paths[{path}]"
        if not isinstance(path, str) or not path.startswith("/"):
            errors.append(f"{where}: a path must start with /")
            continue
        if not isinstance(item, dict):
            errors.append(f"{where}: not an object")
            continue
        template_names = TEMPLATE_PARAM.findall(path)
        if len(set(template_names)) != len(template_names):
            errors.append(f"{where}: a path parameter name is repeated")
        common = declared_path_parameters(document, item.get("parameters"), where, errors)
        operations = [m for m in METHODS if m in item]
        if not operations:
            errors.append(f"{where}: no operations")
        for method in operations:
            operation = item[method]
            at = f"{where}.{method}"
            if not isinstance(operation, dict):
                errors.append(f"{at}: not an object")
                continue
            responses = operation.get("responses")
            if not isinstance(responses, dict) or not responses:
                errors.append(f"{at}: no responses")
            else:
                for code in responses:
                    if not isinstance(code, str) or not STATUS_KEY.match(code):
                        errors.append(f"{at}/responses: {code!r} is not a status code (quote it) or default")
            own = declared_path_parameters(document, operation.get("parameters"), at, errors)
            declared = set(common) | set(own)
            for name in template_names:
                if name not in declared:
                    errors.append(f"{at}: path parameter {{{name}}} is not declared")
            for name in sorted(declared - set(template_names), key=str):
                errors.append(f"{at}: declares path parameter {name!r}, which the path lacks")
            operation_id = operation.get("operationId")
            if operation_id is not None:
                if operation_id in operation_ids:
                    errors.append(f"{at}: operationId {operation_id!r} is also used by {operation_ids[operation_id]}")
                operation_ids[operation_id] = at
    check_refs(document, document, "#", errors)
    return errors


def full_validation(document):
    try:
        from openapi_spec_validator import validate
    except ImportError:
        print("note: openapi-spec-validator is not installed; --full checks skipped", file=sys.stderr)
        return []
    try:
        validate(document)
    except Exception as error:  # the validator's own error types vary by version
        return [f"openapi-spec-validator: {error}".splitlines()[0]]
    return []


# --- The routes -------------------------------------------------------------------------------


def normalise_path(path):
    """`/a/{x}/b/:y` -> `/a/{}/b/{}`: parameters by position, not by name."""
    path = path.split("?", 1)[0].strip()
    segments = [s for s in path.split("/") if s != ""]
    out = []
    for segment in segments:
        if segment.startswith(":") and len(segment) > 1:
            out.append("{}")
        else:
            out.append(TEMPLATE_PARAM.sub("{}", segment))
    return "/" + "/".join(out)


def parse_routes(lines, source):
    routes = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        if len(parts) != 2 or not parts[1].startswith("/"):
            raise UsageError(f"{source}:{number}: expected 'METHOD /path', not {text!r}")
        method, path = parts[0].upper(), parts[1]
        if method.lower() not in METHODS:
            raise UsageError(f"{source}:{number}: unknown method {parts[0]!r}")
        routes.setdefault((method, normalise_path(path)), f"{method} {path}")
    return routes


def documented_routes(document):
    routes = {}
    errors = []
    for path, item in (document.get("paths") or {}).items():
        if not isinstance(path, str) or not isinstance(item, dict):
            continue
        for method in METHODS:
            if method in item:
                key = (method.upper(), normalise_path(path))
                if key in routes:
                    errors.append(f"{method.upper()} {path} and {routes[key]} are the same route")
                routes.setdefault(key, f"{method.upper()} {path}")
    return routes, errors


# --- Main -------------------------------------------------------------------------------------


def main(argv):
    default_spec = pathlib.Path(__file__).resolve().parent.parent / "docs" / "openapi.yaml"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=str(default_spec), help="the OpenAPI document (default: docs/openapi.yaml)")
    parser.add_argument("--full", action="store_true", help="also validate with openapi-spec-validator when installed")
    parser.add_argument("routes", nargs="?", help="file of 'METHOD /path' lines, or - for stdin")
    args = parser.parse_args(argv)

    try:
        text = pathlib.Path(args.spec).read_text(encoding="utf-8")
    except OSError as error:
        print(f"{args.spec}: cannot be read: {error}", file=sys.stderr)
        return 2
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        print(f"{args.spec}: not valid YAML: {error}", file=sys.stderr)
        return 2

    failed = False
    errors = check_document(document)
    if args.full and not errors:
        errors += full_validation(document)
    for error in errors:
        print(f"{args.spec}: {error}")
    failed |= bool(errors)
    if not errors:
        print(f"{args.spec}: well-formed OpenAPI {document.get('openapi')}")

    lines = None
    try:
        if args.routes and args.routes != "-":
            lines = pathlib.Path(args.routes).read_text(encoding="utf-8").splitlines()
            source = args.routes
        elif args.routes == "-" or not sys.stdin.isatty():
            lines = sys.stdin.read().splitlines()
            source = "stdin"
            if args.routes is None and not any(line.strip() for line in lines):
                lines = None  # nothing piped in (e.g. stdin is /dev/null): no list given
        if lines is not None:
            listed = parse_routes(lines, source)
    except OSError as error:
        print(f"{args.routes}: cannot be read: {error}", file=sys.stderr)
        return 2
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2

    if lines is not None and isinstance(document, dict):
        documented, duplicates = documented_routes(document)
        for duplicate in duplicates:
            print(f"{args.spec}: {duplicate}")
        missing = [listed[key] for key in sorted(listed) if key not in documented]
        extra = [documented[key] for key in sorted(documented) if key not in listed]
        for route in missing:
            print(f"missing from the document: {route}")
        for route in extra:
            print(f"documented but not served: {route}")
        failed |= bool(missing or extra or duplicates)
        if not (missing or extra or duplicates):
            print(f"the document and the {len(listed)} routes agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
