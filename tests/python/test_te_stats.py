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
    r = fp8kit.te_stats(tmp_path)
    assert len(r["files"]) == 2
    assert len(r["notes"]) == 1 and "not_a_te_stat" in r["notes"][0]
    by = {(s["name"], s["rank"]): s for s in r["series"]}
    mx = by[("fc1_activation_max", None)]
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
