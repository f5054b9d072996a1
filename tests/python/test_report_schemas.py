"""Every `--json` report validates against its JSON Schema in docs/schemas/ (hand-reviewed, committed),
and writes non-finite numbers one way: the strings "inf", "-inf", "nan" (docs/schemas/README.md)."""

import json
import math
import subprocess

import jsonschema
import pytest
from report_commands import commands
from test_cli_inspect import REPO, cli

SCHEMAS = REPO / "docs" / "schemas"


def no_json_nonfinite(token):
    raise AssertionError(f"a report wrote the non-JSON token {token}; non-finite numbers are strings")


def run_report(argv, codes):
    p = subprocess.run([cli(), *argv], capture_output=True, text=True)
    assert p.returncode in codes, (argv, p.returncode, p.stderr[-2000:])
    return json.loads(p.stdout, parse_constant=no_json_nonfinite)


def test_every_report_has_a_schema(tmp_path):
    names = {name for name, _, _ in commands(REPO, tmp_path)}
    assert names == {p.name[: -len(".schema.json")] for p in SCHEMAS.glob("*.schema.json")}


@pytest.mark.parametrize("index", range(15))
def test_report_validates(tmp_path, index):
    cases = commands(REPO, tmp_path)
    assert len(cases) == 15
    name, argv, codes = cases[index]
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    doc = run_report(argv, codes)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


def test_schema_rejects_null_for_a_number():
    """The schemas can fail: a number written as null (the old convention of some reports) is refused."""
    schema = json.loads((SCHEMAS / "inspect.schema.json").read_text())
    doc = json.loads(
        subprocess.run(
            [
                cli(),
                "inspect",
                str(REPO / "data" / "example" / "llama_tiny_dump.h5"),
                "--json",
                "--quiet",
                "--steps",
                "0",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    doc["tensors"][0]["amax"] = None
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    doc["tensors"][0]["amax"] = "inf"
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    assert math.isinf(float(doc["tensors"][0]["amax"]))
