"""Every `--json` report of the CLI, each run on bundled data: the list that docs/schemas/ covers.
tests/python/test_report_schemas.py validates each output against its schema; scripts/fixtures/make_report_schemas.py
drafts a schema from these outputs when a report is added (the committed schemas are then reviewed by hand)."""

import ml_dtypes
import numpy as np


def commands(repo, tmp):
    """(schema name, argv after the CLI, exit codes that mean a finished report) for each report."""
    ex = repo / "data" / "example"
    dump = str(ex / "llama_tiny_dump.h5")
    trace = str(ex / "amax_trace.csv")
    x = np.array([0.5, 1.0, 464.0, -3.0, 1e-9, 448.0], dtype=np.float32)
    np.save(tmp / "x.npy", x)
    np.save(tmp / "codes.npy", x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.normal(size=(3, 64)).astype(ml_dtypes.float8_e4m3fn)
    np.save(tmp / "a.npy", a.view(np.uint8))
    np.save(tmp / "b.npy", b.view(np.uint8))
    np.save(tmp / "d.npy", a.astype(np.float32) @ b.astype(np.float32).T)  # numpy's float32 GEMM
    return [
        ("formats", ["formats", "--json"], (0,)),
        ("encode", ["encode", "464", "1e-9", "--to", "e4m3", "--profile", "cuda-satfinite", "--json"], (0,)),
        ("inspect", ["inspect", dump, "--json", "--quiet", "--steps", "0"], (0,)),
        ("inspect", ["inspect", dump, "--json", "--quiet", "--steps", "0", "--recipe", "mxfp8"], (0,)),
        ("replay", ["replay", trace, "--recipe", "te-delayed", "--json"], (0,)),
        ("te_stats", ["replay", str(ex / "dlfw_inspect.log"), "--stats", "--json"], (0,)),
        ("sweep", ["sweep", trace, "--json"], (0,)),
        ("sweep", ["sweep", trace, dump, "--json", "--tensor", "*layers.1.*"], (0,)),
        (
            "simulate",
            ["simulate", "msamp", "--level", "O1", dump, "--ranks", "8", "--tensor", "*self_attn.k_proj*", "--json"],
            (0,),
        ),
        ("watch", ["watch", trace, dump, "--json"], (0, 1)),
        ("calibrate", ["calibrate", dump, "--method", "max", "--method", "mse", "--json"], (0,)),
        (
            "checkpoint",
            [
                "checkpoint",
                "check",
                str(repo / "data" / "checkpoints" / "ct_nvfp4"),
                "--reference",
                str(repo / "data" / "checkpoints" / "original"),
                "--json",
            ],
            (0, 1),
        ),
        ("kv", ["kv", str(ex / "llama_tiny_kv.h5"), "--format", "e4m3", "--format", "nvfp4", "--json"], (0, 1)),
        (
            "validate",
            [
                "validate",
                "--input",
                str(tmp / "x.npy"),
                "--output",
                str(tmp / "codes.npy"),
                "--to",
                "e4m3",
                "--profile",
                "ml_dtypes",
                "--json",
            ],
            (0, 1),
        ),
        (
            "validate_gemm",
            [
                "validate",
                "--gemm",
                "--a",
                str(tmp / "a.npy"),
                "--b",
                str(tmp / "b.npy"),
                "--output",
                str(tmp / "d.npy"),
                "--json",
            ],
            (0, 1),
        ),
    ]
