"""Issue 47: the Python module writes its files through the same output sink as the CLI
(io::OutputFile, exposed as fp8kit._fp8kit.write_file; the monitor's out_dir files and the plots
go through it). Each case is one of docs/hardening.md's "Output" targets."""

import os
import shutil
import stat
import subprocess
import sys
import time

import pytest
from fp8kit import _fp8kit

DATA = b"fp8kit\x00\xff" * 1000


def leftovers(d, *keep):
    return sorted(set(os.listdir(d)) - set(keep))


def test_new_file_and_existing_tmp(tmp_path):
    (tmp_path / "out.tmp").write_bytes(b"mine")
    _fp8kit.write_file(str(tmp_path / "out"), DATA)
    assert (tmp_path / "out").read_bytes() == DATA
    assert (tmp_path / "out.tmp").read_bytes() == b"mine"  # never a fixed PATH.tmp
    assert leftovers(tmp_path, "out", "out.tmp") == []


def test_existing_file_keeps_its_mode(tmp_path):
    p = tmp_path / "out"
    p.write_bytes(b"old")
    os.chmod(p, 0o640)
    _fp8kit.write_file(str(p), DATA)
    assert p.read_bytes() == DATA
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640


def test_symlink_written_through_dangling_refused(tmp_path):
    (tmp_path / "real").write_bytes(b"old")
    os.symlink("real", tmp_path / "link")
    _fp8kit.write_file(str(tmp_path / "link"), DATA)
    assert os.readlink(tmp_path / "link") == "real"
    assert (tmp_path / "real").read_bytes() == DATA
    os.symlink("nowhere", tmp_path / "dangling")
    with pytest.raises(_fp8kit.OutputError, match="symbolic link that resolves to no file"):
        _fp8kit.write_file(str(tmp_path / "dangling"), DATA)
    assert not (tmp_path / "nowhere").exists()
    assert leftovers(tmp_path, "real", "link", "dangling") == []


def is_full_device(path):
    """Linux's full device: character device 1, 7 (Documentation/admin-guide/devices.txt)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (1, 7)


@pytest.fixture
def full_device(tmp_path):
    """/dev/full where it is the device; else the same device made in tmp_path (some sandboxes
    have no /dev/full, or a plain file by that name); skipped, saying why, without either."""
    if is_full_device("/dev/full"):
        return "/dev/full"
    path = str(tmp_path / "full_device")
    try:
        os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 7))
    except OSError as e:
        pytest.skip(f"no full device: /dev/full is not character device 1,7 and mknod failed: {e}")
    return path


def test_device_written_in_place_and_checked(full_device):
    with pytest.raises(OSError, match="write failed: No space left on device"):
        _fp8kit.write_file(full_device, DATA)
    assert is_full_device(full_device)


def test_fifo_without_reader_refused_at_once(tmp_path):
    f = tmp_path / "fifo"
    os.mkfifo(f)
    t0 = time.monotonic()
    with pytest.raises(_fp8kit.OutputError, match="is a FIFO that no process is reading"):
        _fp8kit.write_file(str(f), DATA)
    assert time.monotonic() - t0 < 5
    assert stat.S_ISFIFO(os.stat(f).st_mode)


def test_folder_refused(tmp_path):
    with pytest.raises(_fp8kit.OutputError, match="is a directory"):
        _fp8kit.write_file(str(tmp_path), DATA)


def run_limited(code, tmp_path, user=None):
    """`code` in a fresh interpreter (a file-size limit or another user applies to it alone)."""
    cmd = [sys.executable, "-c", code]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)


def test_failing_write_keeps_the_old_file(tmp_path):
    p = tmp_path / "out"
    p.write_bytes(b"old")
    code = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))\n"
        "from fp8kit import _fp8kit\n"
        "try:\n"
        f"    _fp8kit.write_file({str(p)!r}, b'x' * 100000)\n"
        "except OSError as e:\n"
        "    print('refused:', e)\n"
    )
    r = run_limited(code, tmp_path)
    assert "refused:" in r.stdout and "File too large" in r.stdout, r.stdout + r.stderr
    assert p.read_bytes() == b"old"
    assert leftovers(tmp_path, "out") == []


def test_read_only_folder(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    os.chmod(d, 0o555)
    try:
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("root writes into a read-only folder; setpriv is needed to run as nobody")
            os.chmod(tmp_path, 0o755)
            code = (
                "from fp8kit import _fp8kit\n"
                "try:\n"
                f"    _fp8kit.write_file({str(d / 'out')!r}, b'x')\n"
                "except OSError as e:\n"
                "    print('refused:', e)\n"
            )
            r = run_limited(code, "/", user=65534)
            if "No module named" in r.stderr:
                pytest.skip("the module is not readable by nobody here")
            assert "refused:" in r.stdout and "Permission denied" in r.stdout, r.stdout + r.stderr
        else:
            with pytest.raises(_fp8kit.OutputError, match="cannot create a temporary file"):
                _fp8kit.write_file(str(d / "out"), b"x")
        assert os.listdir(d) == []
    finally:
        os.chmod(d, 0o755)


def test_plot_saves_through_the_sink(tmp_path, monkeypatch):
    """fp8kit.plot's PNGs reach the disk through write_file (never matplotlib's own open)."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from fp8kit import plot

    seen = []
    real = _fp8kit.write_file
    monkeypatch.setattr(_fp8kit, "write_file", lambda path, data: (seen.append(path), real(path, data)))
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    plot._savefig(fig, str(tmp_path / "a.png"))
    plt.close(fig)
    assert seen == [str(tmp_path / "a.png")]
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
