"""The CLI's reports and the Python module's dicts carry the same keys (docs/schemas/README.md, "Key
names"): each result type has one field table in lib from which its JSON, its CSV and the dict are
built. Each test runs the CLI and the module on the same bundled inputs and compares the key sets."""

import csv
import io
import json
import subprocess

import fp8kit
import numpy as np
from test_cli_inspect import REPO, cli

EX = REPO / "data" / "example"
TRACE, DUMP = EX / "amax_trace.csv", EX / "llama_tiny_dump.h5"

# The recipe's own columns of a sweep row (CSV and Python); the JSON lists recipes apart.
CANDIDATE_KEYS = {"class", "candidate", "kind", "history", "algo", "margin", "format", "grid", "blockwise"}


def run_cli(*argv):
    return subprocess.run([cli(), *argv], check=True, capture_output=True, text=True).stdout


def keys(rows):
    """The one key set of `rows` (they must all have the same keys)."""
    sets = {frozenset(r) for r in rows}
    assert len(sets) == 1, [sorted(s) for s in sets]
    return set(next(iter(sets)))


def rows_of(table):
    return table.to_dict("records") if hasattr(table, "to_dict") else table


def test_sweep_keys_match_cli():
    """fp8kit.sweep's rows: the outcome keys of `fp8kit sweep --json` (per class and per tensor) plus
    the recipe's columns, which are the CSV's columns after scope and name."""
    args = [str(TRACE), str(DUMP), "--tensor", "*layers.1.*"]
    doc = json.loads(run_cli("sweep", *args, "--json"))
    json_keys = keys([o for k in doc["classes"].values() for o in k["outcomes"]])
    assert keys([o for t in doc["tensors"] for o in t["outcomes"]]) == json_keys
    assert {"first_step_overflows", "sqnr_db_lo", "sqnr_db_hi", "min_safe_margin"} <= json_keys

    header = next(csv.reader(io.StringIO(run_cli("sweep", *args, "--csv"))))
    assert header[:2] == ["scope", "name"] and len(set(header)) == len(header)
    csv_keys = set(header[2:])

    out = fp8kit.sweep([TRACE, DUMP], include="*layers.1.*")
    py_keys = keys(rows_of(out["table"]))
    assert py_keys - CANDIDATE_KEYS == json_keys, sorted(py_keys ^ (json_keys | CANDIDATE_KEYS))
    assert py_keys == csv_keys, sorted(py_keys ^ csv_keys)
    assert keys(rows_of(out["tensors"])) == py_keys | {"tensor"}


def test_allreduce_keys_match_cli():
    """fp8kit.msamp.allreduce's dict: the metric names of `fp8kit simulate msamp`'s all-reduce rows,
    the result's (rows without an order) at the top and each order's under orders[name], beside
    the structure (ranks, orders, and each order's codes and values)."""
    rows = json.loads(
        run_cli(
            "simulate", "msamp", "--level", "O1", str(DUMP), "--ranks", "8", "--tensor", "*self_attn.k_proj*", "--json"
        )
    )["rows"]
    ar = [r for r in rows if r["section"] == "allreduce"]
    assert ar
    cli_result = {r["metric"] for r in ar if r["order"] == ""}
    cli_order = {r["metric"] for r in ar if r["order"] != ""}
    assert {"cast_underflow_share", "old_scale"} <= cli_result and "stalled_share" in cli_order

    g = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    res = fp8kit.msamp.allreduce(g)
    assert set(res) - {"ranks", "orders"} == cli_result, sorted((set(res) - {"ranks", "orders"}) ^ cli_result)
    assert set(res["orders"]) == {"rank", "ring", "tree"}
    for o in res["orders"].values():
        assert set(o) - {"codes", "values"} == cli_order, sorted((set(o) - {"codes", "values"}) ^ cli_order)
