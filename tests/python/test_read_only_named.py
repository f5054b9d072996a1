"""Read only the files the user named (issue 25, docs/hardening.md), in Python: fp8kit.read_dump
and fp8kit.inspect on HDF5 dumps whose datasets point outside themselves (external raw storage
to /etc/passwd, to another folder, to the working directory, to /dev/zero and /dev/urandom;
virtual datasets on another file, a missing file and themselves; external links). Each such
dataset is skipped with a warning naming what it points at, never read, and the good tensors
are read exactly as h5py reads them. Where strace is installed, a child Python doing the same is
traced and must open none of the files outside. Fixtures: tests/cli/make_outside_fixtures.py."""

import os
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
import fp8kit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "cli", "make_outside_fixtures.py")
DUMPS = ["ext_passwd.h5", "ext_other.h5", "ext_zero.h5", "vds.h5", "vds_self.h5", "elink.h5"]
# Per dump: the datasets that point outside (never read) and what the note must name.
OUTSIDE = {
    "ext_passwd.h5": {"x": "/etc/passwd", "codes": "/etc/passwd"},
    "ext_other.h5": {"abs": "other/secret.bin", "rel": "../other/secret.bin", "cwd": "secret.bin"},
    "ext_zero.h5": {"zero": "/dev/zero", "urandom": "/dev/urandom"},
    "vds.h5": {"v": "other/src.h5", "missing": "no_such.h5"},
    "vds_self.h5": {"self": "(this file):self"},
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("outside")
    subprocess.run([sys.executable, FIXTURES, str(root)], check=True)
    cwd = root / "cwd"  # the working directory's bait: what a relative name would resolve to
    cwd.mkdir()
    for f in ("secret.bin", "src.h5"):
        shutil.copy(root / "other" / f, cwd / f)
    return root


def read_all(paths):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = {(os.path.basename(info["file"]), info["name"]): np.array(a) for info, a in fp8kit.read_dump(paths)}
    return got, " ".join(str(w.message) for w in caught)


@pytest.mark.parametrize("dump", DUMPS)
def test_read_dump_skips_what_points_outside(tree, dump, monkeypatch):
    monkeypatch.chdir(tree / "cwd")
    path = str(tree / "dump" / dump)
    got, warned = read_all(path)
    with h5py.File(path, "r") as f:  # the good tensors, as h5py reads them
        assert np.array_equal(got[(dump, "good")].view("<u4"), f["good"][()].view("<u4"))
    for name, target in OUTSIDE.get(dump, {}).items():
        assert (dump, name) not in got, f"{name} points outside and was read"
        assert re.search(rf"{name}: [^;]*{re.escape(target)}", warned), f"no note naming {target} for {name}: {warned}"
    if dump == "elink.h5":  # external links are not followed: no tensor behind them
        assert (dump, "e") not in got and (dump, "erel") not in got
    secret = np.arange(16, dtype="<f4")
    for a in got.values():
        assert b"root" not in a.tobytes()
        assert not (a.size == 16 and np.array_equal(a.astype("<f4"), secret))


def test_inspect_skips_what_points_outside(tree, monkeypatch):
    monkeypatch.chdir(tree / "cwd")
    with pytest.warns(UserWarning, match="/etc/passwd"):
        rows = fp8kit.inspect([str(tree / "dump" / d) for d in DUMPS], errors="skip")
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
    names = {(os.path.basename(r["file"]), r["name"]) for r in rows}
    assert {(d, "good") for d in DUMPS} <= names
    for dump, outside in OUTSIDE.items():
        for name in outside:
            assert (dump, name) not in names


CHILD = """
import sys, warnings
import fp8kit
warnings.simplefilter("ignore")
paths = sys.argv[1:]
n = sum(1 for _ in fp8kit.read_dump(paths, errors="skip"))
rows = fp8kit.inspect(paths, errors="skip")
print(n, len(rows))
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (scripts/install/install-deps.sh)")
def test_python_opens_nothing_outside(tree):
    trace = tree / "python.trace"
    paths = [str(tree / "dump" / d) for d in DUMPS]
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "detect_leaks=0"  # LeakSanitizer cannot run under ptrace
    r = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace), sys.executable, "-c", CHILD, *paths],
        cwd=tree / "cwd",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    opened = set(re.findall(r'open[a-z]*\([^"]*"([^"]*)"', trace.read_text()))
    trace.unlink()
    bad = {
        p
        for p in opened
        if p in ("/etc/passwd", "/dev/zero", "/dev/urandom", "secret.bin", "src.h5", "../other/secret.bin")
        or p.startswith(str(tree / "other"))
        or p in (str(tree / "cwd" / "secret.bin"), str(tree / "cwd" / "src.h5"))
    }
    assert not bad, f"opened outside the named files: {sorted(bad)}"
    assert set(paths) <= opened  # the trace did see the reader's own opens
