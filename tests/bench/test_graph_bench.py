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
    assert lines[0].split()[:4] == ["store", "tasks", "edges", "distinct"]
    result = json.loads(lines[-1])
    assert (
        result["tasks"] == 240 and result["cross_path"] == "ann" and result["store"] == "arcadedb"
    )
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


@pytest.mark.slow  # a benchmark on the session's server, found by its port
@pytest.mark.store
def test_bench_graph_into_a_server_by_uri_measures_it_and_leaves_it_empty(
    store, store_server, monkeypatch, capsys
):
    monkeypatch.setenv("NEO4J_USER", store_server.auth[0])
    monkeypatch.setenv("NEO4J_PASSWORD", store_server.auth[1])
    monkeypatch.setenv("NEO4J_DATABASE", store_server.database)
    argv = ["bench", "graph", "--tasks", "120", "--tasks-per-env", "20", "--recall-sample", "30"]
    argv += ["--add-env-tasks", "5", "--store", store_server.uri]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:2] == ["store", "tasks"]
    result = json.loads(lines[-1])
    assert result["store"] == store_server.backend and result["edges"] == 120 * (6 + 12)
    for phase in ("build_store_s", "store_write_s", "read_back_s", "add_env_s", "step_s"):
        assert result[phase] > 0, phase
    assert result["read_back_s"] == result["store_read_s"]  # a server has no snapshot
    assert result["server_peak_rss_mib"] > 0  # the process listening on the URI's port
    assert result["recall"] == 1.0
    assert store.count_tasks() == 0 and store.count_nodes("Environment") == 0

    store.write_environments([])
    store.write_rows("CREATE (:Task {id: 'kept'})", [{}])
    assert main(argv) == 1
    assert "needs an empty one" in capsys.readouterr().err
    assert store.count_tasks() == 1  # nothing of a store that held data is touched
