"""``envsched-gnn select``: files in, batch.json out, clear errors and no partial writes."""

from __future__ import annotations

import json

import numpy as np

from envsched_gnn.bench.scheduler import random_rewards, synthetic_graph
from envsched_gnn.cli import main
from envsched_gnn.graph.task_graph import read_graph, write_graph
from envsched_gnn.observations import observations_from_rewards, read_history, write_history
from envsched_gnn.scheduler.registry import make_scheduler


def write_inputs(tmp_path):
    graph = synthetic_graph(300, seed=2)
    write_graph(tmp_path / "graph.json", graph)
    rng = np.random.default_rng(0)
    observations = []
    for step in range(3):
        ids = [str(t) for t in rng.choice(graph.task_ids, 64, replace=False)]
        observations += observations_from_rewards(step, random_rewards(ids, rng))
    write_history(tmp_path / "history.jsonl", observations)
    return tmp_path / "graph.json", tmp_path / "history.jsonl"


def test_select_writes_the_batch_the_library_selects(tmp_path):
    graph_path, history_path = write_inputs(tmp_path)
    out = tmp_path / "out" / "batch.json"
    argv = [
        "select",
        "--graph",
        str(graph_path),
        "--history",
        str(history_path),
        "--step",
        "3",
        "--batch",
        "32",
        "--seed",
        "5",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert set(data) == {"batch", "stage", "relaxed"}
    assert len(data["batch"]) == 32 and set(data["stage"]) == set(data["batch"])
    assert sorted(set(data["stage"].values())) == ["coverage", "exploitation"]
    scheduler = make_scheduler("envsched", read_graph(graph_path), batch_size=32, seed=5)
    scheduler.load_history(read_history(history_path))
    assert scheduler.next_batch(3) == data["batch"]
    # the history's selections count: c_i of the tasks observed at steps 0..2
    assert scheduler.selections.counts_before(3).sum() == 3 * 64


def test_select_with_a_baseline(tmp_path):
    graph_path, history_path = write_inputs(tmp_path)
    out = tmp_path / "batch.json"
    argv = [
        "select",
        "--graph",
        str(graph_path),
        "--history",
        str(history_path),
        "--step",
        "3",
        "--out",
        str(out),
        "--scheduler",
        "mopps",
    ]
    assert main(argv) == 0
    assert len(json.loads(out.read_text())["batch"]) == 64


def test_select_errors_name_the_problem_and_write_nothing(tmp_path, capsys):
    graph_path, history_path = write_inputs(tmp_path)
    out = tmp_path / "batch.json"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "t1", "step": 0, "rewards": [2.0]}\n')
    base = ["select", "--graph", str(graph_path), "--step", "3", "--out", str(out)]
    assert main([*base, "--history", str(bad)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"task_id": "zzz", "step": 0, "rewards": [1.0]}\n')
    assert main([*base, "--history", str(unknown)]) == 2
    err = capsys.readouterr().err
    assert "unknown.jsonl" in err and "'zzz'" in err
    assert main([*base, "--batch", "400"]) == 2
    assert "fewer than the batch size B = 400" in capsys.readouterr().err
    assert main([*base, "--scheduler", "nope"]) == 2
    assert "unknown scheduler 'nope'" in capsys.readouterr().err
    assert not out.exists()
