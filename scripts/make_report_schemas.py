#!/usr/bin/env python3
"""Drafts docs/schemas/<report>.schema.json from the CLI's real `--json` outputs on bundled data
(tests/python/report_commands.py lists them). A draft is reviewed by hand before it is committed:
the committed schema is the contract that tests/python/test_report_schemas.py checks outputs against.

Inference: an object's keys seen in every sample are required; a key seen in some samples is optional;
a value that is a non-integer number anywhere is a `number` (a JSON number or "inf"/"-inf"/"nan":
docs/schemas/README.md); integers stay integers; null is allowed only where a sample had it.

usage: make_report_schemas.py FP8KIT_CLI [NAME ...]   (no NAME: every report)"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from report_commands import commands  # noqa: E402

NUMBER = {"$ref": "#/$defs/number"}


def kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float) or v in ("inf", "-inf", "nan"):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(v)]


def infer(values):
    kinds = {kind(v) for v in values}
    if "number" in kinds:
        kinds.discard("integer")
        kinds.discard("string")  # "inf"/"nan" among numbers
    schemas = []
    for k in sorted(kinds):
        if k == "number":
            schemas.append(NUMBER)
        elif k == "object":
            objs = [v for v in values if isinstance(v, dict)]
            keys = sorted({key for o in objs for key in o})
            schemas.append({"type": "object",
                            "properties": {key: infer([o[key] for o in objs if key in o]) for key in keys},
                            "required": [key for key in keys if all(key in o for o in objs)]})
        elif k == "array":
            items = [i for v in values if isinstance(v, list) for i in v]
            schemas.append({"type": "array", "items": infer(items)} if items else {"type": "array"})
        else:
            schemas.append({"type": k})
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas} if schemas else {}


def main():
    cli, wanted = sys.argv[1], set(sys.argv[2:])
    with tempfile.TemporaryDirectory() as tmp:
        samples = {}
        for name, argv, codes in commands(REPO, Path(tmp)):
            if wanted and name not in wanted:
                continue
            p = subprocess.run([cli, *argv], capture_output=True, text=True)
            if p.returncode not in codes:
                sys.exit(f"{name}: exit {p.returncode}: {p.stderr[-500:]}")
            samples.setdefault(name, []).append(json.loads(p.stdout))
    for name, docs in samples.items():
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                  "title": f"fp8kit {name} --json",
                  "$defs": {"number": {"anyOf": [{"type": "number"}, {"enum": ["inf", "-inf", "nan"]}]}},
                  **infer(docs)}
        out = REPO / "docs" / "schemas" / f"{name}.schema.json"
        out.write_text(json.dumps(schema, indent=1) + "\n")
        print(out.relative_to(REPO))


if __name__ == "__main__":
    main()
