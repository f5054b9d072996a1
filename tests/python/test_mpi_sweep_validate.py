"""fp8kit.sweep(comm=...) and fp8kit.validate(comm=...) (issue 19): every rank of a communicator
calls with the same arguments, the library's cluster split (cluster::load_sweep_inputs,
cluster::run_sweep, cluster::validate: the code of `mpirun fp8kit sweep|validate`) shares the
work, and rank 0 gets the result one process gets, for 1, 2 and 3 ranks; the others get None.
Run two ways: ranks as threads over an in-process communicator with mpi4py's gather and bcast
semantics (always runs), and a real `mpirun -n 3` (Open MPI's oversubscription on) with mpi4py
(skipped, with the reason, where mpi4py or mpirun is absent)."""

import math
import os
import pickle
import shutil
import subprocess
import sys
import threading

import fp8kit
import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE = os.path.join(REPO, "data", "example", "amax_trace.csv")
DUMP = os.path.join(REPO, "data", "example", "llama_tiny_dump.h5")
BLOCK = 65536  # validate's split unit (ValidateSplit: 2^16-element blocks)


class ThreadComm:
    """mpi4py's Get_rank / Get_size / gather(obj, root=0) / bcast(obj, root=0) for ranks that are
    threads. The C++ code calls gather and bcast several times in a row, so each exchange waits
    twice: once until every rank has written its slot, once until every rank has read them all
    (else a fast rank could overwrite a slot of this exchange with its next one)."""

    def __init__(self, rank, shared):
        self.rank, self.shared = rank, shared

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.shared["size"]

    def _exchange(self, obj):
        s = self.shared
        s["slots"][self.rank] = obj
        s["barrier"].wait()
        got = list(s["slots"])
        s["barrier"].wait()
        return got

    def gather(self, obj, root=0):
        got = self._exchange(obj)
        return got if self.rank == root else None

    def bcast(self, obj, root=0):
        return self._exchange(obj)[root]


def run_threads(size, fn):
    """fn(comm) on `size` ranks that are threads; rank 0's result (the others must be None)."""
    shared = {"size": size, "slots": [None] * size, "barrier": threading.Barrier(size)}
    out = [None] * size
    errors = []

    def rank(r):
        try:
            out[r] = fn(ThreadComm(r, shared))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
            shared["barrier"].abort()

    ts = [threading.Thread(target=rank, args=(r,)) for r in range(size)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    assert all(o is None for o in out[1:])
    assert out[0] is not None
    return out[0]


def records(t):
    return t.to_dict("records") if hasattr(t, "to_dict") else list(t)


def plain_sweep(r):
    """A sweep result as plain data (DataFrames as lists of row dicts), for comparison and pickle."""
    out = dict(r)
    out["table"], out["tensors"] = records(r["table"]), records(r["tensors"])
    return out


def same(a, b):
    """Equality with NaN == NaN (a sweep's empty statistics are NaN in both)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def sweep_example(comm=None):
    return fp8kit.sweep([TRACE, DUMP], comm=comm)


@pytest.fixture(scope="module")
def sweep_one():
    return plain_sweep(sweep_example())


@pytest.mark.parametrize("size", [1, 2, 3])
def test_sweep_ranks_as_threads_equal_one_process(sweep_one, size):
    many = plain_sweep(run_threads(size, lambda c: sweep_example(comm=c)))
    assert len(sweep_one["table"]) > 0 and len(sweep_one["tensors"]) > 0
    assert sweep_one["dump_files"] and sweep_one["trace_files"]  # both kinds of input were swept
    assert same(many, sweep_one)


def test_sweep_bad_input_raises_on_every_rank(tmp_path):
    bad = tmp_path / "not_a_trace.csv"
    bad.write_text("this is neither a trace nor a dump\n")
    with pytest.raises(fp8kit.TraceError) as one:
        fp8kit.sweep([str(bad)])
    shared = {"size": 2, "slots": [None] * 2, "barrier": threading.Barrier(2)}
    errors = [None, None]

    def rank(r):
        try:
            fp8kit.sweep([str(bad)], comm=ThreadComm(r, shared))
        except Exception as e:  # noqa: BLE001 - checked below
            errors[r] = e

    ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "a rank hangs on a bad input"
    assert type(errors[0]) is type(one.value) and str(errors[0]) == str(one.value)
    # Rank 0 raises the original; the other rank, which met the same error, fp8kit.SharedError.
    assert isinstance(errors[1], fp8kit.SharedError) and str(errors[1]) == str(one.value)


def make_validate_case(directory):
    """An input of four split blocks (the last partial) and its E4M3 codes under scale 2 from
    ml_dtypes (round to nearest even; every value in range), with 5 codes changed in blocks 0, 1,
    2 and 3: the lowest-index examples come from two ranks' shares at P = 2 and 3."""
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes makes the reference codes")
    rng = np.random.default_rng(19)
    x = (rng.standard_normal(3 * BLOCK + 3000) * 10).astype(np.float32)
    codes = (x * np.float32(2)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).copy()
    bad = [5, BLOCK + 4, BLOCK + 5, 2 * BLOCK + 7, x.size - 1]
    codes[bad] ^= 1
    np.save(directory / "input.npy", x)
    np.save(directory / "output.npy", codes)
    return len(bad)


def validate_files(directory, comm=None):
    x, codes = np.load(directory / "input.npy"), np.load(directory / "output.npy")
    return fp8kit.validate(x, codes, "e4m3", profile="ml_dtypes", scale=2.0, examples=3, comm=comm)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_validate_ranks_as_threads_equal_one_process(tmp_path, size):
    changed = make_validate_case(tmp_path)
    one = validate_files(tmp_path)
    assert one["total"] == 3 * BLOCK + 3000 and one["mismatches"] == changed
    many = run_threads(size, lambda c: validate_files(tmp_path, comm=c))
    assert same(many, one)


MPI_SCRIPT = """
import pathlib, pickle, sys
import numpy as np
from mpi4py import MPI
import fp8kit
trace, dump, directory, out = sys.argv[1:5]
d = pathlib.Path(directory)
s = fp8kit.sweep([trace, dump], comm=MPI.COMM_WORLD)
x, codes = np.load(d / "input.npy", mmap_mode="r"), np.load(d / "output.npy", mmap_mode="r")
v = fp8kit.validate(x, codes, "e4m3", profile="ml_dtypes", scale=2.0, examples=3, comm=MPI.COMM_WORLD)
if MPI.COMM_WORLD.Get_rank() == 0:
    for k in ("table", "tensors"):
        s[k] = s[k].to_dict("records") if hasattr(s[k], "to_dict") else s[k]
    with open(out, "wb") as f:
        pickle.dump((s, v), f)
else:
    assert s is None and v is None
"""


def test_mpi4py_three_ranks(tmp_path, sweep_one, mpi_env):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (not in requirements.txt)")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun on PATH")
    make_validate_case(tmp_path)
    script, out = tmp_path / "ranks.py", tmp_path / "rank0.pickle"
    script.write_text(MPI_SCRIPT)
    # The options as environment variables, as tests/mpi/*.sh set them: other MPIs ignore them.
    env = mpi_env
    run = subprocess.run(
        [mpirun, "-n", "3", sys.executable, str(script), TRACE, DUMP, str(tmp_path), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    with open(out, "rb") as f:
        s, v = pickle.load(f)
    assert same(s, sweep_one)
    assert same(v, validate_files(tmp_path))
