"""``envsched-gnn bench graph`` builds, stores and reads back a small pool and prints numbers."""

from __future__ import annotations

import json

import pytest

from envsched_gnn.cli import main


@pytest.mark.slow  # a benchmark on the ANN path
@pytest.mark.store
def test_bench_graph_prints_phases_and_recall_on_the_ann_path(capsys):
    argv = ["bench", "graph", "--tasks", "240", "--tasks-per-env", "20", "--ann-threshold", "100"]
    assert (
        main([*argv, "--recall-sample", "60", "--add-env-tasks", "5", "--embed-workers", "2"]) == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:3] == ["tasks", "edges", "distinct"]
    result = json.loads(lines[-1])
    assert result["tasks"] == 240 and result["cross_path"] == "ann"
    assert result["edges"] == 240 * (6 + 12)
    assert result["recall"] == 1.0
    phases = ("within_s", "embed_s", "cross_s", "store_write_s", "read_back_s", "step_s")
    for phase in (*phases, "store_read_s", "add_env_s"):
        assert result[phase] > 0, phase
    assert 0 < result["distinct_abstracts"] < 240
    assert result["peak_rss_mib"] > 0 and result["server_peak_rss_mib"] > 0  # not NaN
