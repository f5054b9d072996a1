"""fp8kit.gemm against computations that share nothing with the C++ models: `exact` against
Python Fractions of the operands as ml_dtypes decodes them, rounded once to nearest-even by the
rule written out below; `fp32` against numpy float32 sums in k order; validate_gemm naming the
model an output was made with. docs/gemm.md defines the models."""

from fractions import Fraction

import fp8kit
import ml_dtypes
import numpy as np
import pytest

FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def codes(rng, shape, fmt):
    """Random finite codes of a format (NaN and Inf codes redrawn)."""
    c = rng.integers(0, 256, size=shape, dtype=np.uint8)
    bad = ~np.isfinite(c.view(FP8[fmt]).astype(np.float64))
    while bad.any():
        c[bad] = rng.integers(0, 256, size=int(bad.sum()), dtype=np.uint8)
        bad = ~np.isfinite(c.view(FP8[fmt]).astype(np.float64))
    return c


def round_ne(x, man_bits, emin):
    """x (a Fraction) rounded to nearest-even in a binary format with `man_bits` fraction bits and
    smallest normal exponent emin (subnormals below it); overflow is not reached in these tests."""
    if x == 0:
        return 0.0
    sign, x = (-1 if x < 0 else 1), abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - man_bits)  # the quantum at x
    n, r = divmod(x, q)
    if r * 2 > q or (r * 2 == q and n % 2 == 1):
        n += 1
    return sign * float(n * q)


def exact_reference(a, b, fa, fb, sa, sb, man_bits, emin):
    av = a.view(FP8[fa]).astype(np.float64)
    bv = b.view(FP8[fb]).astype(np.float64)
    out = np.empty((a.shape[0], b.shape[0]))
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            s = sum(Fraction(x) * Fraction(y) for x, y in zip(av[i], bv[j]))
            out[i, j] = round_ne(s * Fraction(float(sa)) * Fraction(float(sb)), man_bits, emin)
    return out


@pytest.mark.parametrize("fa,fb,k", [("e4m3", "e4m3", 64), ("e4m3", "e5m2", 1000), ("e5m2", "e5m2", 4096)])
def test_exact_equals_fractions_f32_and_bf16(fa, fb, k):
    rng = np.random.default_rng(k)
    a, b = codes(rng, (2, k), fa), codes(rng, (3, k), fb)
    sa, sb = np.float32(0.3), np.float32(1.7)
    d = fp8kit.gemm(a, b, fa, fb, sa, sb, accum="exact")
    assert np.array_equal(d.astype(np.float64), exact_reference(a, b, fa, fb, sa, sb, 23, -126))
    h = fp8kit.gemm(a, b, fa, fb, sa, sb, accum="exact", out_dtype="bf16")
    want = exact_reference(a, b, fa, fb, sa, sb, 7, -126).astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.array_equal(h, want)


def test_fp32_equals_numpy_float32_sums_in_k_order():
    rng = np.random.default_rng(2)
    a, b = codes(rng, (4, 333), "e4m3"), codes(rng, (5, 333), "e5m2")
    sa = rng.uniform(0.5, 2, size=4).astype(np.float32)  # rowwise
    sb = rng.uniform(0.5, 2, size=5).astype(np.float32)
    av, bv = a.view(FP8["e4m3"]).astype(np.float32), b.view(FP8["e5m2"]).astype(np.float32)
    acc = np.zeros((4, 5), np.float32)
    for k in range(333):
        acc = acc + np.outer(av[:, k], bv[:, k])  # products of two codes are exact in float32
    want = (sa[:, None] * sb[None, :]) * acc
    d = fp8kit.gemm(a, b, "e4m3", "e5m2", sa, sb, accum="fp32")
    assert np.array_equal(d.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("model", ["exact", "fp32", "sm90", "sm90-fast", "deepseek-128", "h100tc"])
def test_validate_gemm_names_the_model(model):
    rng = np.random.default_rng(9)
    a, b = codes(rng, (8, 2048), "e4m3"), codes(rng, (8, 2048), "e4m3")
    d = fp8kit.gemm(a, b, scale_a=0.5, scale_b=0.25, accum=model)
    r = fp8kit.validate_gemm(d, a, b, scale_a=0.5, scale_b=0.25)
    assert r["mismatches"][model] == 0
    assert np.array_equal(fp8kit.gemm(a, b, scale_a=0.5, scale_b=0.25, accum=r["matched"]), d)
    assert r["bound_violations"] == 0


def test_bad_arguments_raise_valueerror_naming_them():
    a = np.zeros((2, 3), np.uint8)
    with pytest.raises(ValueError, match="K = 4"):
        fp8kit.gemm(a, np.zeros((2, 4), np.uint8))
    with pytest.raises(ValueError, match="scale_a"):
        fp8kit.gemm(a, a, scale_a=np.ones(5, np.float32))
    with pytest.raises(ValueError, match="sm80"):
        fp8kit.gemm(a, a, accum="sm80")


def test_split_k_is_the_one_cta_model_per_range_added_in_float32():
    """sm90-fast-splitk:N against its definition composed from sm90-fast on each range of N
    products (docs/gemm.md, "Split-K"), and validate_gemm finding N."""
    rng = np.random.default_rng(21)
    a, b = codes(rng, (4, 4096), "e4m3"), codes(rng, (3, 4096), "e5m2")
    d = fp8kit.gemm(a, b, "e4m3", "e5m2", scale_a=0.5, scale_b=3.0, accum="sm90-fast-splitk:1408")
    acc = None
    for lo in range(0, 4096, 1408):
        part = fp8kit.gemm(a[:, lo : lo + 1408], b[:, lo : lo + 1408], "e4m3", "e5m2", accum="sm90-fast")
        acc = part if acc is None else (acc + part).astype(np.float32)
    want = (np.float32(0.5) * np.float32(3.0)) * acc
    assert np.array_equal(d.view(np.uint32), want.astype(np.float32).view(np.uint32))
    r = fp8kit.validate_gemm(d, a, b, "e4m3", "e5m2", scale_a=0.5, scale_b=3.0)
    assert r["matched"] == "sm90-fast-splitk:1408"


def test_device_cuda_equals_the_cpu_model_or_says_why_not():
    """device='cuda' (fp8kit::cuda::gemm_model) gives the CPU model's bits for every model but
    'exact' (tests/gpu compares them in depth); without a GPU or CUDA kernels it raises ValueError
    naming device='cuda', and an unknown device is refused."""
    rng = np.random.default_rng(26)
    a, b = codes(rng, (70, 300), "e4m3"), codes(rng, (33, 300), "e5m2")
    with pytest.raises(ValueError, match="device"):
        fp8kit.gemm(a, b, device="tpu")
    ok, why = fp8kit._fp8kit.cuda_available()
    if not ok:
        with pytest.raises(ValueError, match="device='cuda'"):
            fp8kit.gemm(a, b, accum="sm90", device="cuda")
        pytest.skip(f"no CUDA: {why}")
    with pytest.raises(ValueError, match="exact"):
        fp8kit.gemm(a, b, accum="exact", device="cuda")
    sa_row, sb_row = rng.uniform(0.01, 4, 70).astype(np.float32), rng.uniform(0.01, 4, 33).astype(np.float32)
    sa_blk, sb_blk = rng.uniform(0.01, 4, (70, 3)).astype(np.float32), rng.uniform(0.01, 4, (1, 3)).astype(np.float32)
    for accum in ("fp32", "sm90", "sm90-fast", "deepseek-128", "h100tc", "sm90-splitk:128"):
        for sa, sb in ((0.75, 1.5), (sa_row, sb_row), (sa_blk, sb_blk)):
            for out in ("f32", "bf16"):
                cpu = fp8kit.gemm(a, b, "e4m3", "e5m2", sa, sb, accum=accum, out_dtype=out)
                gpu = fp8kit.gemm(a, b, "e4m3", "e5m2", sa, sb, accum=accum, out_dtype=out, device="cuda")
                assert cpu.tobytes() == gpu.tobytes(), (accum, out)


def test_validate_gemm_on_cuda_gives_the_cpu_report_or_says_why_not():
    """validate_gemm(device='cuda') runs the models through lib's GEMM device (the CLI's
    validate --gemm --device cuda): the same mismatches, closest model and bound violations as on
    the CPU; without a GPU or CUDA kernels it raises ValueError naming device='cuda'."""
    rng = np.random.default_rng(27)
    a, b = codes(rng, (40, 512), "e4m3"), codes(rng, (24, 512), "e4m3")
    d = fp8kit.gemm(a, b, accum="sm90")
    d.view(np.uint32)[0, 3] ^= 1
    with pytest.raises(ValueError, match="device"):
        fp8kit.validate_gemm(d, a, b, device="tpu")
    cpu = fp8kit.validate_gemm(d, a, b)
    assert cpu["device"] == "cpu" and cpu["exact_from"] == "exact" and cpu["not_run"] == {}
    ok, why = fp8kit._fp8kit.cuda_available()
    if not ok:
        with pytest.raises(ValueError, match="device='cuda'"):
            fp8kit.validate_gemm(d, a, b, device="cuda")
        pytest.skip(f"no CUDA: {why}")
    gpu = fp8kit.validate_gemm(d, a, b, device="cuda")
    assert gpu["device"] == "cuda"
    for key in ("matched", "closest", "mismatches", "differences", "max_abs_error", "bound_violations"):
        assert gpu[key] == cpu[key], key


def test_split_prediction_refits_from_the_committed_measurements():
    """The split-count rule reruns from the repository: scripts/gpu/fit_split_count.py refits the
    divisor and the cap from the split starts measured on 46 shapes (data/gemm_probe/) and checks
    fp8kit.predicted_split_k against every measured shape and every tensorwise case of the older
    acceptance reports (docs/gemm.md, "Split-K: the prediction")."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    probe = repo / "data" / "gemm_probe"
    # The fitting data: the scans, the first acceptance on unseen shapes (its scans), and the older
    # acceptances; not the held-out run (splitk_acceptance_20261201.json), which the next test reads.
    reports = [str(probe / "splitk_boundaries.json"), str(probe / "splitk_acceptance_20261130.json")]
    reports += sorted(str(p) for p in probe.glob("acceptance_*.json"))
    p = subprocess.run(
        [sys.executable, str(repo / "scripts" / "gpu" / "fit_split_count.py"), *reports], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "46 scanned shapes" in p.stdout and "c in (20.0000, 20.1250]" in p.stdout
    assert fp8kit.predicted_split_k(16, 16, 4096) == 0  # K = 4096 is not split
    assert fp8kit.predicted_split_k(16, 16, 8192) == 2816  # 64 tiles: 3 splits of 22
    assert fp8kit.predicted_split_k(256, 16, 8192) == 2816
    assert fp8kit.predicted_split_k(112, 80, 44800) is None  # measured: 9 splits, not floor(350 / 20.1)
    assert fp8kit.predicted_split_k(16, 16, 8192, "row") == 0
    with pytest.raises(ValueError, match="scales"):
        fp8kit.predicted_split_k(16, 16, 8192, "blocks")


def test_split_acceptance_reruns_on_the_cpu():
    """The held-out split-K acceptance (docs/gemm.md, "Split-K: the prediction") reruns from the
    repository: check_splitk_acceptance.py makes each case's inputs again from its seed, computes
    D under the case's model on the CPU and compares its SHA-256 with cuBLASLt's D of the report
    (equal exactly where the report says bit-exact). The smaller cases here; the script takes all."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    report = repo / "data" / "gemm_probe" / "splitk_acceptance_20261201.json"
    summary = json.loads(report.read_text())["summary"]
    assert (summary["predicted"], summary["prediction_wrong"], summary["bit_exact"]) == (23, 2, 122)
    script = repo / "scripts" / "gpu" / "check_splitk_acceptance.py"
    p = subprocess.run([sys.executable, str(script), str(report), "--max-work", "3e7"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " 0 disagree" in p.stdout


def test_split_combination_refits_from_the_committed_hashes():
    """How cuBLASLt combines its split-K partials reruns from the repository: fit_splitk.py makes
    each case of data/gemm_probe/splitk_combination_20261126.json again from its seed (H200, 72
    cases: 6 shapes, 3 input kinds, both accumulators, float32 and bfloat16 out) and hashes five
    hypotheses against cuBLASLt's D: the model's (partials added in float32 in k order, then the
    scale) matches every case, and each other hypothesis misses some."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    report = repo / "data" / "gemm_probe" / "splitk_combination_20261126.json"
    script = repo / "scripts" / "gpu" / "fit_splitk.py"
    p = subprocess.run([sys.executable, str(script), str(report)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    last = p.stdout.strip().splitlines()[-1]
    counts = ast.literal_eval(last.split("bit-exact per hypothesis: ")[1])  # the dict the script prints
    assert last.startswith("72 cases") and counts["sequential"] == 72
    assert all(counts.get(h, 0) < 72 for h in ("reversed", "pairwise", "scaled", "one-cta")), counts
