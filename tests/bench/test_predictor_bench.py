import json

import numpy as np

from envsched_gnn.bench.predictor import benchmark, register, synthetic_graph, synthetic_history


def test_synthetic_graph_has_the_requested_neighbourhoods():
    data = synthetic_graph(1000, 18, seed=0)
    env = data["task"].env.numpy()
    within = data["task", "within", "task"].edge_index.numpy()
    cross = data["task", "cross", "task"].edge_index.numpy()
    assert np.array_equal(np.bincount(within[1], minlength=1000), np.full(1000, 6))
    assert np.array_equal(np.bincount(cross[1], minlength=1000), np.full(1000, 12))
    assert (env[within[0]] == env[within[1]]).all() and (within[0] != within[1]).all()
    assert (env[cross[0]] != env[cross[1]]).all()
    history = synthetic_history(500, steps=10, per_step=64, seed=0)
    assert history["task"].shape == (640,) and history["v"].max() <= 0.25


def test_benchmark_smoke(capsys):
    row = benchmark(700, 18, repeats=2, seed=1, steps=12, per_step=20)
    assert row["tasks"] == 700 and row["edges"] == 700 * 18 and row["observations"] == 240
    assert row["median_ms"] > 0 and row["bit_reproducible"]


def test_bench_command_prints_a_table_and_a_json_line(capsys):
    import argparse

    root = argparse.ArgumentParser()
    bench = root.add_subparsers().add_parser("bench").add_subparsers()
    register({"bench": bench})
    args = root.parse_args(
        ["bench", "predictor", "--tasks", "120", "--repeats", "1", "--steps", "5"]
    )
    assert args.func(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:2] == ["tasks", "edges"] and "120" in lines[1]
    result = json.loads(lines[-1])
    assert result["benchmark"] == "predictor" and result["results"][0]["tasks"] == 120
