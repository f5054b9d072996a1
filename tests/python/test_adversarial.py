"""Every Python entry point that reads a user's file, on the path classes of tests/cli/adversarial.sh
(docs/hardening.md, "The adversarial sweep"): a FIFO no process writes (refused at once, never a
hang: each call runs in a child process under a timeout), /dev/zero, a missing file, a folder
where a file is expected, an empty file, garbage, and a file holding nothing to read. Each call
raises an exception (never a crash, a hang or an empty result taken as complete) whose message
names the input and stays short and printable."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("h5py")

# name -> the call, with {p} for the path (a dump, a trace or log, a recipe file, a checkpoint folder).
CALLS = {
    "read_dump": "list(fp8kit.read_dump({p}))",
    "inspect": "fp8kit.inspect({p})",
    "sweep": "fp8kit.sweep({p}, blocks=False)",
    "calibrate": "fp8kit.calibrate({p}, methods='max')",
    "kv": "fp8kit.kv({p}, attention=False)",
    "watch": "fp8kit.watch({p})",
    "msamp.simulate": "fp8kit.msamp.simulate({p}, level='O1', ranks=[8])",
    "read_trace": "fp8kit.read_trace({p})",
    "replay": "fp8kit.replay({p})",
    "te_stats": "fp8kit.te_stats({p})",
    "recipe": "fp8kit.recipe({p})",
    "checkpoint_check": "fp8kit.checkpoint_check({p})",
    "checkpoint_kv_names": "fp8kit.checkpoint_kv_names({p})",
    "validate_te_dump": "fp8kit.validate_te_dump({p})",
}
# The child prints the exception's class and message, or OK when the call returned.
CHILD = """import sys, warnings, fp8kit
warnings.simplefilter('ignore')
p = sys.argv[1]
try:
    r = {call}
except Exception as e:
    print(type(e).__name__ + ': ' + str(e)); sys.exit(3)
print('OK'); sys.exit(0)
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    t = tmp_path_factory.mktemp("adversarial")
    os.mkfifo(t / "bad_fifo")
    (t / "bad_dir").mkdir()
    (t / "bad_empty").write_bytes(b"")
    (t / "bad_garbage").write_bytes(bytes(range(256)) * 16)
    (t / "bad_nothing.safetensors").write_bytes(b"\x02" + b"\x00" * 7 + b"{}")
    return {
        "bad_fifo": str(t / "bad_fifo"),
        "zero": "/dev/zero",
        "bad_missing": str(t / "bad_missing"),
        "bad_dir": str(t / "bad_dir"),
        "bad_empty": str(t / "bad_empty"),
        "bad_garbage": str(t / "bad_garbage"),
        "bad_nothing": str(t / "bad_nothing.safetensors"),
    }


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize(
    "case", ["bad_fifo", "zero", "bad_missing", "bad_dir", "bad_empty", "bad_garbage", "bad_nothing"]
)
def test_refused_naming_the_input(inputs, name, case):
    path = inputs[case]
    call = CALLS[name].format(p="p")
    try:
        p = subprocess.run(
            [sys.executable, "-c", CHILD.format(call=call), path], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}({case}) hung")
    # 3: raised; 0 would be a result taken as complete (read_dump, inspect and watch returned
    # nothing for a dump holding no tensor), anything else a crash.
    assert p.returncode == 3, (name, case, p.returncode, p.stdout[-300:], p.stderr[-1000:])
    msg = p.stdout.strip()
    stem = os.path.basename(path)
    assert stem in msg or (case == "zero" and "zero" in msg), (name, case, msg[:500])
    assert len(msg) < 2000, (name, case, len(msg))
    assert not any(ord(c) < 32 and c not in "\n\t" for c in msg), (name, case, json.dumps(msg[:300]))
