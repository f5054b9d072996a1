"""The input gate (fp8kit/io/gate.hpp; docs/hardening.md, "Reading inputs") in Python: a dataset
stored outside the file is skipped with a UserWarning naming it by fp8kit.sweep, fp8kit.calibrate,
fp8kit.kv and fp8kit.watch (with and without the shape signals) (read_dump and inspect: test_read_only_named.py), and listed in 'skipped'; a FIFO
given as a dump or a recipe is refused at once (never blocks), naming the file; a 10 MB 'dtype'
attribute is quoted short in the error. Fixtures: tests/cli/make_gate_fixtures.py."""

import os
import subprocess
import sys
import warnings

import pytest

h5py = pytest.importorskip("h5py")
import fp8kit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "cli", "make_gate_fixtures.py")
SKIPPED = "outside.weight: raw data stored outside the file"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    subprocess.run([sys.executable, FIXTURES, str(root)], check=True)
    os.mkfifo(root / "fifo")
    return root


def _warned(record):
    return [str(w.message) for w in record if issubclass(w.category, UserWarning) and SKIPPED in str(w.message)]


@pytest.mark.parametrize("call", ["sweep", "calibrate", "kv", "watch", "watch_no_shapes"])
def test_skipped_dataset_is_warned_and_listed(tree, call):
    path = str(tree / "skip.h5")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        if call == "sweep":
            r = fp8kit.sweep(path, blocks=False)
        elif call == "calibrate":
            r = fp8kit.calibrate(path, methods="modelopt_max")
        elif call == "kv":
            r = fp8kit.kv(path, formats="e4m3", policies="tensor", attention=False)
        else:  # the amax series alone (shapes=False) reads the dump too, and names what it skipped
            r = fp8kit.watch(path, shapes=call == "watch")
    assert len(_warned(record)) == 1, [str(w.message) for w in record]
    assert all(set(s) == {"file", "name", "message"} for s in r["skipped"]), r["skipped"]
    assert sum(SKIPPED in f"{s['name']}: {s['message']}" for s in r["skipped"]) == 1, r["skipped"]


def test_fifo_dump_is_refused_without_blocking(tree):
    # In a child process with a timeout: on the build before the gate, opening the FIFO blocks.
    code = (
        "import fp8kit, sys\n"
        "try:\n"
        "    list(fp8kit.read_dump(sys.argv[1]))\n"
        "except fp8kit.DumpError as e:\n"
        "    print(e); sys.exit(3)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(tree / "fifo")], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert p.returncode == 3, p.stderr
    assert "fifo: a FIFO, not a regular file" in p.stdout


def test_big_dtype_attribute_is_quoted_short(tree):
    with pytest.raises(fp8kit.DumpError) as e:
        list(fp8kit.read_dump(str(tree / "bigattr.h5"), include="*big_dtype"))
    text = str(e.value)
    assert len(text) < 2000 and "(10485760 bytes)" in text, text[:300]


@pytest.mark.parametrize(
    "name,argv",
    [
        ("inspect", ["inspect", "--json"]),
        ("sweep", ["sweep", "--json", "--no-blocks"]),
        ("replay", ["replay", "--json"]),
        ("calibrate", ["calibrate", "--json", "--method", "modelopt_max"]),
        ("kv", ["kv", "--json", "--no-attention", "--format", "e4m3", "--policy", "tensor"]),
        ("watch", ["watch", "--json"]),
    ],
)
def test_skipped_json_is_objects_and_validates(tree, name, argv):
    """Every report's 'skipped' items are objects {file, name, message} (docs/schemas/README.md),
    and the report with one validates against its schema."""
    import json

    jsonschema = pytest.importorskip("jsonschema")
    from test_cli_inspect import REPO, cli

    p = subprocess.run([cli(), argv[0], str(tree / "skip.h5"), *argv[1:]], capture_output=True, text=True)
    assert p.returncode in (0, 1), (name, p.returncode, p.stderr[-2000:])
    doc = json.loads(p.stdout)
    hits = [s for s in doc["skipped"] if SKIPPED in f"{s['name']}: {s['message']}"]
    assert len(hits) == 1 and hits[0]["file"] == str(tree / "skip.h5"), doc["skipped"]
    schema = json.loads((REPO / "docs" / "schemas" / f"{name}.schema.json").read_text())
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
