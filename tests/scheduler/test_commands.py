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


def test_select_refuses_a_scheduler_behind_dynamic_sampling_before_reading_anything(
    tmp_path, capsys
):
    out = tmp_path / "batch.json"
    base = ["select", "--graph", str(tmp_path / "missing.json"), "--step", "0", "--out", str(out)]
    for name, instead in (("envsched_spread+ds", "'envsched_spread'"), ("dapo", "'random'")):
        assert main([*base, "--scheduler", name]) == 2
        err = capsys.readouterr().err
        assert f"select cannot run scheduler {name!r}, which over-samples" in err
        assert "pending" in err and instead in err and "missing.json" not in err
    assert not out.exists()


def test_select_gives_envsched_ops_the_pools_operation_patterns(tmp_path, capsys):
    from envsched_gnn.envs.abstract import operation_patterns
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.envs.pool_io import save_pool
    from envsched_gnn.graph_build.builder import GraphConfig, build_graph

    pool = generate_pool(n_envs=3, tasks_per_env=6, seed=0, test_per_env=1, max_calls=2)
    save_pool(pool, tmp_path / "pool")
    write_graph(tmp_path / "graph.json", build_graph(pool, GraphConfig(show_progress=False)))
    out = tmp_path / "batch.json"
    base = ["select", "--graph", str(tmp_path / "graph.json"), "--step", "0", "--batch", "4"]
    base += ["--out", str(out), "--scheduler", "envsched_ops"]
    assert main(base) == 2
    assert "needs them: give --pool DIR" in capsys.readouterr().err and not out.exists()
    assert main([*base, "--pool", str(tmp_path / "pool")]) == 0
    scheduler = make_scheduler(
        "envsched_ops",
        read_graph(tmp_path / "graph.json"),
        batch_size=4,
        operations=operation_patterns(pool.tasks),
    )
    assert json.loads(out.read_text())["batch"] == scheduler.next_batch(0)
    assert main([*base, "--pool", str(tmp_path / "nowhere")]) == 2
    assert "nowhere': expected an existing folder" in capsys.readouterr().err
