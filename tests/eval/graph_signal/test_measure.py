"""eval graph-signal: nulls centred on 0 without signal, neighbour-shared variance detected."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.eval.graph_signal.measure import (
    ESTIMATES,
    GraphSignalConfig,
    _permutations,
    graph_signal,
    target_sets,
)
from envsched_gnn.graph.task_graph import TaskGraph, write_graph
from envsched_gnn.models.config import PredictorConfig
from envsched_gnn.observations import Observation, write_history
from tests.models.variance_world import N_ENVS, PER_ENV, world

CONFIG = GraphSignalConfig(permutations=400, bootstrap=100, seed=0)


def test_the_nulls_are_centred_on_zero_when_variance_is_independent_of_the_graph():
    graph, observations = world(seed=1, shared=False)
    signal = graph_signal(graph, observations, CONFIG)
    n = signal.targets
    assert n == N_ENVS * PER_ENV and signal.steps == [1]
    for name in ("within", "cross", "prior"):
        row = signal.rows[name]
        null = row["nulls"]["global"]["spearman"]
        # Spearman under a random permutation: mean 0, sd 1 / sqrt(n - 1)
        assert abs(null["mean"]) < 3 / math.sqrt(n - 1) / math.sqrt(CONFIG.permutations)
        assert null["sd"] == pytest.approx(1 / math.sqrt(n - 1), rel=0.15)
        assert abs(row["spearman"]) < 3 / math.sqrt(n - 1)
        assert abs(row["nulls"]["global"]["auc"]["mean"] - 0.5) < 0.01
    # each task's own rate carries over from round A to B: the ceiling is far above its null
    retest = signal.rows["retest"]
    assert retest["spearman"] > 0.4 and retest["nulls"]["global"]["spearman"]["p"] < 0.01


def test_variance_shared_by_cross_neighbours_is_detected_and_within_is_not():
    graph, observations = world(seed=2, shared=True)
    signal = graph_signal(graph, observations, CONFIG)
    cross = signal.rows["cross"]
    assert cross["spearman"] > 0.4 and cross["spearman_ci"][0] > 0.2
    for null in ("global", "within_env"):
        assert cross["nulls"][null]["spearman"]["p"] < 0.01
        assert cross["nulls"][null]["auc"]["p"] < 0.01
    assert "beyond environment membership" in signal.verdicts["cross"]
    # within edges join random environment-mates and environments have no effect
    assert signal.rows["within"]["nulls"]["global"]["spearman"]["p"] > 0.05
    assert "does NOT beat" in signal.verdicts["within"]


def test_estimates_never_use_the_targets_own_observations():
    graph, observations = world(seed=3, shared=True)
    (base,) = target_sets(graph, observations, PredictorConfig())
    target = graph.task_ids[base.tasks[0]]
    # swap the target's round-A rewards with those of a task that is neither its environment
    # mate nor its neighbour: every step mean, and so g, stays the same
    cross = graph.edges["cross"]
    into_target = cross.dst == base.tasks[0]
    neighbours = {graph.task_ids[j] for j in cross.src[into_target].tolist()}
    other = next(
        t
        for t, e in zip(graph.task_ids, graph.env_ids, strict=True)
        if e != graph.env_ids[base.tasks[0]] and t not in neighbours
    )
    round_a = {o.task_id: o.rewards for o in observations if o.step == 0}
    assert round_a[target] != round_a[other]
    swapped = {target: round_a[other], other: round_a[target]}
    changed = [
        Observation(o.task_id, 0, swapped.get(o.task_id, o.rewards)) if o.step == 0 else o
        for o in observations
    ]
    (after,) = target_sets(graph, changed, PredictorConfig())
    for name in ("within", "cross", "prior", "env_mean"):
        assert after.estimates[name][0] == pytest.approx(base.estimates[name][0], abs=1e-12)
    variance = float(np.var(round_a[other]))
    assert after.estimates["retest"][0] == pytest.approx(variance, abs=1e-12)


def test_within_environment_permutations_only_swap_environment_mates():
    env = np.array([2, 0, 1, 0, 2, 2, 1, 0])
    orders = _permutations(env, 50, True, np.random.default_rng(0))
    assert np.all(env[orders] == env[None, :])
    assert all(sorted(order) == list(range(8)) for order in orders.tolist())
    assert len({tuple(order) for order in orders.tolist()}) > 10


def test_a_history_of_one_step_is_refused():
    graph, observations = world(seed=0, shared=False)
    with pytest.raises(ValueError, match="one step"):
        graph_signal(graph, [o for o in observations if o.step == 0], CONFIG)
    with pytest.raises(
        ValueError, match=r"GraphSignalConfig\.permutations = 100, expected a number >= 200"
    ):
        GraphSignalConfig(permutations=100)


def test_cli_from_a_history_file_writes_table_json_and_plot(tmp_path, capsys):
    graph, observations = world(seed=2, shared=True)
    write_graph(tmp_path / "graph.json", graph)
    # a training-run history: later steps hold other tasks; every step after 0 is scored
    later = [Observation(o.task_id, 2, o.rewards) for o in observations[:40]]
    write_history(tmp_path / "history.jsonl", observations + later)
    out = tmp_path / "signal"
    code = main(
        [
            "eval",
            "graph-signal",
            "--history",
            str(tmp_path / "history.jsonl"),
            "--graph",
            str(tmp_path / "graph.json"),
            "--permutations",
            "200",
            "--bootstrap",
            "20",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "| cross | 360 | spearman |" in printed and "beyond environment membership" in printed
    result = json.loads((out / "graph_signal.json").read_text())
    assert result["steps"] == [1, 2] and set(result["estimates"]) == set(ESTIMATES)
    assert result["estimates"]["cross"]["nulls"]["within_env"]["spearman"]["p"] < 0.05
    assert (out / "graph_signal.png").stat().st_size > 0 and (out / "graph_signal.md").exists()
    assert main(["eval", "graph-signal", "--history", str(tmp_path / "history.jsonl")]) == 2


@pytest.mark.slow  # two rounds of policy rollouts
def test_cli_from_a_policy_rolls_out_two_rounds_and_keeps_them(tmp_path, capsys):
    from tests.envs.handmade_pool import handmade_pool, write_handmade_pool
    from tests.training.tiny_policy import trained_policy_dir

    pool = handmade_pool()
    pool_dir = write_handmade_pool(tmp_path / "pool")
    tasks = [(t.task_id, t.env_id) for t in pool.tasks]
    rows = [(a, b, "cross", 0.5) for a, ea in tasks for b, eb in tasks if ea != eb]
    write_graph(tmp_path / "graph.json", TaskGraph.from_edge_rows(tasks, rows))
    out = tmp_path / "signal"
    argv = ["eval", "graph-signal", "--model", str(trained_policy_dir()), "--pool", str(pool_dir)]
    argv += ["--graph", str(tmp_path / "graph.json"), "--k", "3", "--device", "cpu"]
    argv += ["--workers", "1", "--permutations", "200", "--bootstrap", "10", "--out", str(out)]
    assert main(argv) == 0
    assert "round B (seed 1)" in capsys.readouterr().out
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    train = [t.task_id for t in pool.split("train")]
    assert [(h["task_id"], h["step"]) for h in history] == [(t, r) for r in (0, 1) for t in train]
    assert all(len(h["rewards"]) == 3 for h in history)
    rounds = json.loads((out / "rounds.json").read_text())
    assert [r["seed"] for r in rounds] == [0, 1] and rounds[0]["tasks"] == len(train)
    result = json.loads((out / "graph_signal.json").read_text())
    assert result["steps"] == [1] and result["targets"] == len(train)


@pytest.mark.slow  # a graph built into the store
@pytest.mark.store
def test_cli_from_the_store_reads_graph_and_observations(store, store_server, monkeypatch, capsys):
    graph, observations = world(seed=2, shared=True)
    store.write_graph(graph)
    store.write_observations(observations)
    monkeypatch.setenv("NEO4J_USER", store_server.auth[0])
    monkeypatch.setenv("NEO4J_PASSWORD", store_server.auth[1])
    monkeypatch.setenv("NEO4J_DATABASE", store_server.database)
    argv = ["eval", "graph-signal", "--store", store_server.uri, "--permutations", "200"]
    assert main([*argv, "--bootstrap", "20"]) == 0
    printed = capsys.readouterr().out
    expected = graph_signal(graph, observations, GraphSignalConfig(permutations=200, bootstrap=20))
    assert (
        f"| cross | {N_ENVS * PER_ENV} | spearman | {expected.rows['cross']['spearman']:.3f}"
        in (printed)
    )
