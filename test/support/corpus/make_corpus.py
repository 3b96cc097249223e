"""Builds test/support/real_world_schemas.json from the generators' outputs, with calls for each.

Usage: python make_corpus.py pydantic.json zod.json mcp.json > ../real_world_schemas.json
(the provider-check venv's python: it has jsonschema). Each entry: {name, source, schema, args}.
`args` are calls the original schema accepts: only the required properties, and every property,
each made from the schema's own types, enums, bounds and defaults and checked with jsonschema in
the schema's dialect (its `$schema`; 2020-12 without one, as Pydantic and MCP mean; Draft 4 for
the OpenAPI 3.0-derived ones, whose boolean `exclusiveMinimum` is Draft 4's).
"""

import json
import re
import sys

from jsonschema import Draft4Validator, Draft202012Validator
from jsonschema.validators import validator_for

# OpenAPI 3.0-derived tools (as generated from specs): `nullable`, boolean exclusive bounds.
OPENAPI = [
    {"name": "openapi_list_pets", "schema": {"type": "object", "properties": {
        "limit": {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 100},
        "tag": {"type": "string", "nullable": True}}}},
    {"name": "openapi_create_order", "schema": {"type": "object", "required": ["petId", "quantity"], "properties": {
        "petId": {"type": "integer", "format": "int64"},
        "quantity": {"type": "integer", "format": "int32", "minimum": 1},
        "shipDate": {"type": "string", "format": "date-time", "nullable": True},
        "status": {"type": "string", "enum": ["placed", "approved", "delivered"]},
        "complete": {"type": "boolean", "default": False}}}},
    {"name": "openapi_price_range", "schema": {"type": "object", "required": ["min"], "properties": {
        "min": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        "max": {"type": "number", "maximum": 1000, "exclusiveMaximum": True, "nullable": True}}}},
    {"name": "openapi_update_user", "schema": {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "string", "format": "uuid"},
        "nickname": {"type": "string", "maxLength": 32, "nullable": True},
        "address": {"type": "object", "nullable": True, "properties": {
            "line1": {"type": "string"}, "country": {"type": "string", "minLength": 2, "maxLength": 2}}}}}},
    {"name": "openapi_search", "schema": {"type": "object", "properties": {
        "q": {"type": "string"}, "page": {"type": "integer", "minimum": 1, "default": 1},
        "sort": {"type": "string", "enum": ["asc", "desc"], "default": "asc"}}}},
]


def resolve(root, ref):
    node = root
    for part in ref.lstrip("#/").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


STRINGS = {"date-time": "2026-01-02T03:04:05Z", "date": "2026-01-02", "uuid": "123e4567-e89b-12d3-a456-426614174000",
           "uri": "https://example.com/a", "email": "a@example.com", "time": "03:04:05Z", "binary": "ZGF0YQ==",
           "int64": "1", "decimal": "1.5"}


def sample(s, root, full, depth=0):
    if s is True or s == {} or depth > 6:
        return "x"
    if "$ref" in s:
        return sample(resolve(root, s["$ref"]), root, full, depth + 1)
    if "const" in s:
        return s["const"]
    if "enum" in s:
        return s["enum"][0]
    if "default" in s and not full:
        return s["default"]
    for key in ("anyOf", "oneOf"):
        if key in s:
            return sample(s[key][0], root, full, depth + 1)
    if "allOf" in s:
        merged = {}
        for part in s["allOf"]:
            part = resolve(root, part["$ref"]) if "$ref" in part else part
            for k, v in part.items():
                merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) else v
        return sample(merged, root, full, depth + 1)
    t = s.get("type", "object" if "properties" in s else "string")
    if isinstance(t, list):
        t = [x for x in t if x != "null"][0]
    if t == "object":
        props = s.get("properties", {})
        names = props if full else s.get("required", [])
        out = {n: sample(props.get(n, {}), root, full, depth + 1) for n in names}
        if not props and isinstance(s.get("additionalProperties"), dict):
            out["k"] = sample(s["additionalProperties"], root, full, depth + 1)
        return out
    if t == "array":
        tuple_ = s.get("prefixItems", s.get("items") if isinstance(s.get("items"), list) else None)
        if tuple_ is not None:
            return [sample(x, root, full, depth + 1) for x in tuple_]
        n = max(s.get("minItems", 1 if full else 0), 1 if full else 0)
        return [sample(s.get("items", {}), root, full, depth + 1) for _ in range(n)]
    if t in ("integer", "number"):
        lo = s.get("minimum", 0)
        ex = s.get("exclusiveMinimum")
        if ex is True or (ex is not None and not isinstance(ex, bool) and ex >= lo):
            lo = (s.get("minimum", 0) if ex is True else ex) + (1 if t == "integer" else 0.5)
        v = lo if lo > 0 else (s.get("multipleOf", 1) if t == "integer" else 0.5)
        if "exclusiveMaximum" in s and not isinstance(s["exclusiveMaximum"], bool) and v >= s["exclusiveMaximum"]:
            v = s["exclusiveMaximum"] / 2
        if "multipleOf" in s:
            m = s["multipleOf"]
            v = -(-v // m) * m
        return int(v) if t == "integer" else v
    if t == "boolean":
        return True
    if t == "null":
        return None
    if "format" in s and s["format"] in STRINGS:
        return STRINGS[s["format"]]
    if "pattern" in s:
        return {"^[A-Z]+$": "AB", "^[a-z0-9-]+$": "a-b", "^\\p{L}+$": "abc"}.get(s["pattern"], "ab")
    return "ab" if s.get("minLength", 0) <= 2 else "a" * s["minLength"]


def python_readable(s):
    """The schema without the patterns Python's `re` cannot compile (zod 4's `\\p{L}`): checked
    by the tests' own validator instead."""
    if isinstance(s, list):
        return [python_readable(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {k: python_readable(v) for k, v in s.items()}
    if isinstance(out.get("pattern"), str):
        try:
            re.compile(out["pattern"])
        except re.error:
            del out["pattern"]
    return out


def main():
    entries = []
    for path in sys.argv[1:]:
        entries.extend(json.load(open(path)))
    entries.extend({**e, "source": "OpenAPI 3.0 (hand-derived)"} for e in OPENAPI)
    out = []
    for e in entries:
        s = e["schema"]
        default = Draft4Validator if e["name"].startswith("openapi_") else Draft202012Validator
        v = validator_for(s, default=default)(python_readable(s))
        args = []
        for full in (False, True):
            a = sample(s, s, full)
            if a not in args and v.is_valid(a):
                args.append(a)
        # An open object takes keys it does not list: a call a model may send (MCP servers,
        # Pydantic models without extra="forbid").
        if args and isinstance(args[-1], dict):
            extra = {**args[-1], "extra_key": "x"}
            if v.is_valid(extra):
                args.append(extra)
        if not args:
            print(f"no valid call for {e['name']}", file=sys.stderr)
        out.append({"name": e["name"], "source": e["source"], "schema": s, "args": args})
    json.dump(out, sys.stdout, indent=None, separators=(",", ":"), sort_keys=True)


main()
