"""fp8kit.inspect(comm=...) (issue 19): every rank of a communicator analyses its share of the
tensors and rank 0 gets every row in tensor order, equal to one process's, for 1, 2 and 3 ranks.
Run two ways: ranks as threads over an in-process communicator with mpi4py's gather semantics
(always runs), and a real `mpirun -n 3` with mpi4py (skipped, with the reason, where mpi4py or
mpirun is absent)."""

import math
import os
import shutil
import subprocess
import sys
import threading

import fp8kit
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMP = os.path.join(REPO, "data", "example", "llama_tiny_dump.h5")
RANKS = sorted(os.path.join(REPO, "data", "example", "msamp_ranks", f"rank{r}.h5") for r in range(4))


class ThreadComm:
    """mpi4py's Get_rank / Get_size / gather(obj, root=0) for ranks that are threads."""

    def __init__(self, rank, shared):
        self.rank, self.shared = rank, shared

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.shared["size"]

    def gather(self, obj, root=0):
        self.shared["parts"][self.rank] = obj
        self.shared["barrier"].wait()
        return list(self.shared["parts"]) if self.rank == root else None


def as_rows(r):
    return r.to_dict("records") if hasattr(r, "to_dict") else list(r)


def same(a, b):
    """Row equality with NaN == NaN (statistics of empty sets are NaN in both)."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y:
            return False
    return True


def run_threads(size, **kw):
    shared = {"size": size, "parts": [None] * size, "barrier": threading.Barrier(size)}
    out = [None] * size
    errors = []

    def rank(r):
        try:
            out[r] = fp8kit.inspect(comm=ThreadComm(r, shared), **kw)
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
    return as_rows(out[0])


@pytest.mark.parametrize("paths", [DUMP, RANKS], ids=["example", "msamp_ranks"])
@pytest.mark.parametrize("size", [1, 2, 3])
def test_ranks_as_threads_equal_one_process(paths, size):
    one = as_rows(fp8kit.inspect(paths))
    many = run_threads(size, paths=paths)
    assert len(many) == len(one) > 0
    assert all(same(a, b) for a, b in zip(one, many))


def test_share_tiles_the_tensors():
    d = fp8kit._fp8kit.Dump([DUMP], [], [], None)
    n = len(d.tensors())
    for size in (1, 2, 3, 7):
        ranges = [d.share(r, size) for r in range(size)]
        covered = [i for first, last in ranges for i in range(first, last)]
        assert covered == list(range(n))
    with pytest.raises(ValueError):
        d.share(3, 3)


MPI_SCRIPT = """
import sys
from mpi4py import MPI
import fp8kit
r = fp8kit.inspect(sys.argv[1], comm=MPI.COMM_WORLD)
if MPI.COMM_WORLD.Get_rank() == 0:
    rows = r.to_dict("records") if hasattr(r, "to_dict") else r
    print(repr([(x["name"], x["amax"], x["sum_err2"]) for x in rows]))
"""


def test_mpi4py_three_ranks(tmp_path, mpi_env):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (not in requirements.txt)")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun on PATH")
    script = tmp_path / "ranks.py"
    script.write_text(MPI_SCRIPT)
    env = mpi_env
    out = subprocess.run(
        [mpirun, "-n", "3", sys.executable, str(script), DUMP], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    one = as_rows(fp8kit.inspect(DUMP))
    assert out.stdout.strip() == repr([(x["name"], x["amax"], x["sum_err2"]) for x in one])
