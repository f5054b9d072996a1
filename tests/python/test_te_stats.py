"""TransformerEngine statistics logs from Python (fp8kit.te_stats): every logged statistic, ranks
combined where the statistic allows it, unknown names skipped with a note, and values TE's
four-decimal writer made unreadable flagged, never read as 0."""

import fp8kit
import numpy as np
import pytest


def _line(name, it, value):
    # nvdlfw_inspect's prefix, then TE's MetricLogger line (value formatted {:.4f})
    return f"2026-11-29 01:00:00,000 - INFO - {name} \t\t\t\t iteration={it:06d} \t\t\t\t value={value:.4f}\n"


def test_te_stats_every_statistic(tmp_path):
    d = tmp_path / "nvdlfw_inspect_statistics_logs"
    d.mkdir()
    (d / "nvdlfw_inspect_globalrank-0.log").write_text(
        _line("fc1_activation_max", 1, 2.5)
        + _line("fc1_activation_std", 1, 0.75)
        + _line("fc1_gradient_cur_amax", 1, 2.5e-6)
        + _line("fc1_activation_not_a_te_stat", 1, 1.0)
    )
    (d / "nvdlfw_inspect_globalrank-1.log").write_text(
        _line("fc1_activation_max", 1, 3.25)
        + _line("fc1_activation_std", 1, 0.5)
        + _line("fc1_gradient_cur_amax", 1, 0.0125)
    )
    with pytest.warns(UserWarning, match="not_a_te_stat"):
        r = fp8kit.te_stats(tmp_path)
    assert len(r["files"]) == 2
    assert [s["name"] for s in r["skipped"]] == ["fc1_activation_not_a_te_stat"]
    assert r["skipped"][0]["file"].endswith("globalrank-0.log")
    assert "line 4" in r["skipped"][0]["message"]
    by = {(s["name"], s["rank"]): s for s in r["series"]}
    mx = by[("fc1_activation_max", None)]
    assert mx["combine"] == "max" and by[("fc1_activation_std", 0)]["combine"] == "per rank"
    assert mx["ranks"] == 2 and mx["stat"] == "max" and mx["layer"] == "fc1" and mx["tensor"] == "activation"
    np.testing.assert_array_equal(mx["values"], [3.25])
    np.testing.assert_array_equal(mx["steps"], [1])
    assert ("fc1_activation_std", None) not in by  # needs counts: per rank
    np.testing.assert_array_equal(by[("fc1_activation_std", 0)]["values"], [0.75])
    np.testing.assert_array_equal(by[("fc1_activation_std", 1)]["values"], [0.5])
    g = by[("fc1_gradient_cur_amax", None)]
    np.testing.assert_array_equal(g["values"], [0.0125])
    # rank 0 wrote 0.0000: the combined value is flagged unreadable
    assert g["readable"].tolist() == [False]
    assert mx["readable"].tolist() == [True]


def test_te_stats_refuses_a_folder_without_logs(tmp_path):
    with pytest.raises(fp8kit.TraceError, match="no nvdlfw_inspect"):
        fp8kit.te_stats(tmp_path)


def test_cli_replay_stats_equals_python(tmp_path):
    """`fp8kit replay --stats --json` and --csv give the series fp8kit.te_stats gives, value for value."""
    import json
    import os
    import subprocess
    import warnings
    from pathlib import Path

    d = tmp_path / "nvdlfw_inspect_statistics_logs"
    d.mkdir()
    (d / "nvdlfw_inspect_globalrank-0.log").write_text(
        _line("fc1_activation_max", 1, 2.5)
        + _line("fc1_activation_max", 2, 2.75)
        + _line("fc1_activation_numel", 1, 100)
        + _line("fc1_activation_mean", 1, 0.25)
        + _line("fc1_weight_fp8_block_scaling_scale_inv_min", 1, 0.015625)
        + _line("fc1_activation_unknown_thing", 1, 1)
    )
    (d / "nvdlfw_inspect_globalrank-1.log").write_text(
        _line("fc1_activation_max", 1, 3.0)
        + _line("fc1_activation_numel", 1, 300)
        + _line("fc1_activation_mean", 1, 0.5)
        + _line("fc1_weight_fp8_block_scaling_scale_inv_min", 1, 0.0078125)
    )
    repo = Path(__file__).resolve().parents[2]
    exe = str(Path(os.environ.get("FP8KIT_CLI", repo / "build" / "tools" / "fp8kit")))
    out = subprocess.run([exe, "replay", str(tmp_path), "--stats", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        py = fp8kit.te_stats(tmp_path)
    assert j["skipped"] == py["skipped"] and [s["name"] for s in j["skipped"]] == ["fc1_activation_unknown_thing"]
    assert len(j["series"]) == len(py["series"])
    for a, b in zip(j["series"], py["series"]):
        assert (a["name"], a["rank"], a["combine"], a["ranks"]) == (b["name"], b["rank"], b["combine"], b["ranks"])
        assert a["steps"] == b["steps"].tolist()
        assert a["values"] == b["values"].tolist()
    by = {(s["name"], s["rank"]): s for s in j["series"]}
    assert by[("fc1_activation_mean", None)]["values"] == [(100 * 0.25 + 300 * 0.5) / 400]
    assert by[("fc1_activation_max", None)]["values"] == [3.0, 2.75]
    assert by[("fc1_weight_fp8_block_scaling_scale_inv_min", None)]["values"] == [0.0078]  # as written: {:.4f}
    assert by[("fc1_activation_numel", 0)]["per_rank"]
    csv = subprocess.run([exe, "replay", str(tmp_path), "--stats", "--csv"], capture_output=True, text=True)
    assert csv.returncode == 0 and "fc1_activation_unknown_thing" in csv.stderr
    rows = csv.stdout.splitlines()
    assert rows[0] == "step,name,layer,tensor,recipe,stat,columnwise,combine,rank,ranks,value,readable"
    assert "2,fc1_activation_max,fc1,activation,,max,0,max,,2,2.75,1" in rows  # ranks: the series' most
    assert len(rows) == 1 + sum(len(s["steps"]) for s in j["series"])
    text = subprocess.run([exe, "replay", str(tmp_path), "--stats"], capture_output=True, text=True)
    assert text.returncode == 0 and "note: skipped" in text.stdout and "fc1_activation_mean" in text.stdout


def test_sweep_reads_a_statistics_folder(tmp_path):
    """fp8kit.sweep over a TE statistics folder: its cur_amax series swept as replay reads it, an
    unknown statistic name in skipped."""
    d = tmp_path / "nvdlfw_inspect_statistics_logs"
    d.mkdir()
    (d / "nvdlfw_inspect_globalrank-0.log").write_text(
        "".join(_line("fc1_activation_cur_amax", it, 2.5 + it / 8) for it in range(1, 6))
        + _line("fc1_activation_future_stat", 1, 1.0)
    )
    with pytest.warns(UserWarning, match="fc1_activation_future_stat"):
        out = fp8kit.sweep(str(tmp_path))
    assert [s["name"] for s in out["skipped"]] == ["fc1_activation_future_stat"]
    assert "line 6" in out["skipped"][0]["message"]
    assert out["trace_files"] == [str(tmp_path)]
    assert set(out["tensors"]["tensor"]) == {"fc1_activation"}
