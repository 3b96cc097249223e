"""Generates calls from JSON Schemas with hypothesis-jsonschema, for the fidelity check.

Reads a JSON file: a list of {id, schema, n}; prints one JSON object {id: {"calls": [...]} or
{"error": "..."}}. The same input gives the same calls (derandomized, no example database).
A schema hypothesis-jsonschema cannot read (a regex Python's `re` refuses, `prefixItems`, …)
gets an error entry, never stops the run.
"""

import json
import sys
import warnings

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis_jsonschema import from_schema

warnings.filterwarnings("ignore")


def draft7(s):
    """2020-12's tuple keywords in the Draft 7 form hypothesis-jsonschema reads (it would
    otherwise ignore `prefixItems` and generate any array)."""
    if isinstance(s, list):
        return [draft7(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {k: draft7(v) for k, v in s.items() if k != "$schema"}
    if "prefixItems" in out:
        rest = out.pop("items", True)
        out["items"] = out.pop("prefixItems")
        out["additionalItems"] = rest
    return out


def examples(schema, n):
    seen, out = set(), []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(from_schema(draft7(schema)))
    def collect(value):
        key = json.dumps(value, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(value)

    collect()
    return out


def main():
    cases = json.load(open(sys.argv[1]))
    report = {}
    for case in cases:
        try:
            report[case["id"]] = {"calls": examples(case["schema"], case.get("n", 20))}
        except Exception as e:  # noqa: BLE001 - one unreadable schema never stops the run
            report[case["id"]] = {"error": f"{type(e).__name__}: {e}"[:300]}
    json.dump(report, sys.stdout)


main()
