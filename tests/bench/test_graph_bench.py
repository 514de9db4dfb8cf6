"""``envsched-gnn bench graph`` builds, stores and reads back a small pool and prints numbers."""

from __future__ import annotations

import json

import pytest

from envsched_gnn.cli import main


@pytest.mark.slow  # a benchmark on the ANN path, then on the store it kept
@pytest.mark.managed  # stores of its own folders (--store-dir)
@pytest.mark.store
def test_bench_graph_prints_phases_and_recall_and_reuses_its_kept_store(tmp_path, capsys):
    argv = ["bench", "graph", "--tasks", "240", "--tasks-per-env", "20", "--ann-threshold", "100"]
    argv += ["--recall-sample", "60", "--add-env-tasks", "5", "--store-dir", str(tmp_path)]
    assert main([*argv, "--embed-workers", "2"]) == 0
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
    assert result["tree_peak_rss_mib"] >= result["peak_rss_mib"] and result["peak_disk_mib"] > 0
    # the kept store is measured, not built again; the first run's add-env is in it
    assert main([*argv, "--no-store-read"]) == 0
    reused = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "build_store_s" not in reused and "within_s" not in reused
    assert reused["edges"] == result["edges"] + 5 * (4 + 12)  # 5 tasks: 4 within each
    assert reused["add_env_s"] > 0 and reused["recall"] > 0
