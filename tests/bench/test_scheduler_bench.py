"""``envsched-gnn bench scheduler`` runs end to end on a small pool and prints its numbers."""

from __future__ import annotations

from envsched_gnn.bench.scheduler import synthetic_graph
from envsched_gnn.cli import main


def test_bench_scheduler_prints_a_row(capsys):
    argv = ["bench", "scheduler", "--tasks", "300", "--repeats", "2", "--history-steps", "2"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:3] == ["tasks", "edges", "step_ms"]
    row = lines[1].split()
    assert row[0] == "300" and float(row[2]) > 0 and float(row[5]) > 0


def test_synthetic_graph_shape():
    graph = synthetic_graph(260, tasks_per_env=50, k_in=6, k_cross=12, seed=1)
    names, env = graph.env_index()
    assert len(names) == 6  # five of 50 and one of 10
    within, cross = graph.edges["within"], graph.edges["cross"]
    assert (env[within.src] == env[within.dst]).all() and (within.src != within.dst).all()
    assert (env[cross.src] != env[cross.dst]).all()
    assert len(cross) == 260 * 12
    pairs = set(zip(within.src.tolist(), within.dst.tolist(), strict=True))
    assert len(pairs) == len(within)  # distinct within neighbours
