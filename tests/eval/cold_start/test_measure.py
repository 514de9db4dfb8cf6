"""``eval cold-start``: environments that join a pool, predicted from the others alone; worlds
whose answer is known, no leak from the joining environments, the command, the noisy expert."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.generator import generate_pool, write_pool_files
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.eval.cold_start.measure import (
    ColdStartConfig,
    cold_start,
    env_folds,
    first_visits,
)
from envsched_gnn.eval.reference_rounds import reference_rounds
from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import TaskGraph, write_graph
from envsched_gnn.models.analytic import AnalyticPredictor
from envsched_gnn.observations import Observation, ObservationLog, write_history

ENVS, PER_ENV, TYPES = 12, 8, 4
RATES = (0.02, 0.5, 0.2, 0.98)
"""Success rate of each task type: variances 0.02, 0.25, 0.16, 0.02 (times K / K)."""


def typed_world(seed: int, informative: bool):
    """Tasks of 4 hidden types; cross edges join tasks of the same type in other environments.
    Rewards follow the type (``informative``) or a rate drawn per task (the graph knows
    nothing). Two rounds of K = 8, at steps 0 and 1."""
    rng = np.random.default_rng(seed)
    ids = [f"e{e}-{k}" for e in range(ENVS) for k in range(PER_ENV)]
    kind = rng.integers(0, TYPES, len(ids))
    env = np.repeat(np.arange(ENVS), PER_ENV)
    rows = []
    for i in range(len(ids)):
        same = [j for j in range(len(ids)) if env[j] != env[i] and kind[j] == kind[i]]
        for j in rng.choice(same, min(6, len(same)), replace=False):
            rows.append((ids[j], ids[i], "cross", 0.9))
        mates = [j for j in range(len(ids)) if env[j] == env[i] and j != i]
        for j in rng.choice(mates, 3, replace=False):
            rows.append((ids[j], ids[i], "within", 0.5))
    graph = TaskGraph.from_edge_rows([(t, f"e{e}") for t, e in zip(ids, env, strict=True)], rows)
    rate = np.asarray(RATES)[kind] if informative else rng.choice(RATES, len(ids))
    observations = [
        Observation(t, step, tuple(float(x) for x in rng.random(8) < rate[i]))
        for step in (0, 1)
        for i, t in enumerate(ids)
    ]
    return graph, observations


CONFIG = ColdStartConfig(folds=4, control_draws=8, bootstrap=300, seed=0)


def test_the_graph_predicts_new_environments_where_its_cross_edges_carry_the_variance():
    graph, observations = typed_world(0, informative=True)
    result = cold_start(graph, observations, CONFIG)
    assert result.targets == ENVS * PER_ENV and result.environments == ENVS
    assert result.steps == [1] and len(result.folds) == 4
    for name in ("q", "cross"):
        row, diff = result.rows[name], result.differences[name]
        assert row["spearman"] > 0.5 and row["spearman_ci"][0] > 0.3, name
        assert diff["spearman"] > 0.4 and diff["spearman_ci"][0] > 0.0, name
        relabelled = result.rows[f"relabelled_{name}"]
        assert relabelled["spearman_ci"][0] < 0.0 < relabelled["spearman_ci"][1], name
    assert result.rows["global"] == {
        "spearman": 0.0, "auc": 0.5, "spearman_ci": [0.0, 0.0], "auc_ci": [0.5, 0.5]
    }  # fmt: skip


def test_where_the_graph_knows_nothing_its_margin_is_inside_the_noise():
    graph, observations = typed_world(1, informative=False)
    result = cold_start(graph, observations, CONFIG)
    for name in ("q", "cross"):
        lo, hi = result.differences[name]["spearman_ci"]
        assert lo < 0.0 < hi, name
        lo, hi = result.rows[name]["spearman_ci"]
        assert lo < 0.0 < hi, name


def test_no_observation_of_a_joining_environment_is_used():
    graph, observations = typed_world(0, informative=True)
    sets = first_visits(graph, observations, CONFIG)
    folds = env_folds(graph.env_index()[0], CONFIG.folds, CONFIG.seed)
    assert sorted(e for fold in folds for e in fold) == sorted(set(graph.env_ids))
    # change every reward of fold 0's environments except the targets' own first visits:
    # nothing its targets are predicted from changes
    joining = set(folds[0])
    flipped = [
        Observation(o.task_id, o.step, tuple(1.0 - r for r in o.rewards))
        if o.task_id.split("-")[0] in joining and o.step == 0
        else o
        for o in observations
    ]
    again = first_visits(graph, flipped, CONFIG)
    for a, b in zip(sets, again, strict=True):
        if a.fold == 0:
            for name in ("q", "cross"):
                np.testing.assert_array_equal(a.real[name], b.real[name])
                np.testing.assert_array_equal(a.control[name], b.control[name])
    # and the estimate is the predictor's on a log without the joining environments
    target_set = sets[0]
    log = ObservationLog(graph.task_ids)
    log.extend(o for o in observations if o.task_id.split("-")[0] not in folds[target_set.fold])
    computation = AnalyticPredictor().compute(to_hetero_data(graph), log, target_set.step)
    np.testing.assert_array_equal(target_set.real["q"], computation.q[target_set.tasks])
    within = computation.long.relation["within"][target_set.tasks, 0]
    assert np.all(within == computation.long.stats.g[0])  # within neighbours: all unobserved


def test_a_history_without_first_visits_after_the_join_step_is_an_error():
    graph, observations = typed_world(0, informative=True)
    with pytest.raises(ValueError, match="no task has an observation at a step >= 1"):
        cold_start(graph, [o for o in observations if o.step == 0], CONFIG)
    with pytest.raises(ValueError, match="at most one per fold"):
        cold_start(graph, observations, ColdStartConfig(folds=ENVS + 1))


def test_the_command_writes_the_table_with_its_command(tmp_path, capsys):
    graph, observations = typed_world(0, informative=True)
    write_graph(tmp_path / "graph.json", graph)
    write_history(tmp_path / "history.jsonl", observations)
    args = [
        "eval", "cold-start", "--history", str(tmp_path / "history.jsonl"),
        "--graph", str(tmp_path / "graph.json"), "--folds", "4", "--control-draws", "8",
        "--bootstrap", "300", "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| EnvSched q (real graph) |" in printed and "relabelled control" in printed
    written = json.loads((tmp_path / "out" / "cold_start.json").read_text())
    assert written["estimates"] == cold_start(graph, observations, CONFIG).rows
    assert written["command"].startswith("envsched-gnn ") or written["command"] == ""
    note = (tmp_path / "out" / "cold_start.md").read_text()
    assert "paired" in note and "95 % percentile bootstrap over the new environments" in note
    assert main(["eval", "cold-start", "--history", str(tmp_path / "history.jsonl")]) == 2


def test_the_noisy_expert_replays_reference_calls_in_the_runtime(tmp_path):
    pool = generate_pool(n_envs=2, tasks_per_env=4, seed=0, test_per_env=0, max_calls=3)
    tasks = [t.task_id for t in pool.tasks]
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        observations = reference_rounds(runtime, pool, tasks, k=4, rounds=2, drop=0.5, seed=3)
        assert observations == reference_rounds(
            runtime, pool, tasks, k=4, rounds=2, drop=0.5, seed=3
        )
        # sample k of task n in round r keeps call l when u(n, r, k, l) >= drop
        runs = []
        for o in observations:
            calls = list(pool.task(o.task_id).reference_solution)
            u = np.random.default_rng([3, o.step, tasks.index(o.task_id)]).random((4, len(calls)))
            runs += [(o.task_id, [c for c, x in zip(calls, row, strict=True) if x >= 0.5])
                     for row in u]  # fmt: skip
        expected = [score.reward for score in runtime.replay(runs)]
    assert [(o.task_id, o.step) for o in observations] == [(t, r) for r in (0, 1) for t in tasks]
    assert [r for o in observations for r in o.rewards] == expected
    assert any(min(o.rewards) < max(o.rewards) for o in observations)
    with pytest.raises(ValueError, match="drop must be in"):
        reference_rounds(None, pool, tasks, drop=0.0)
    write_pool_files(pool, tmp_path / "pool")
    out = tmp_path / "out"
    args = ["eval", "cold-start", "--pool", str(tmp_path / "pool"), "--k", "4", "--workers", "1"]
    assert main([*args, "--folds", "2", "--bootstrap", "50", "--out", str(out)]) == 0
    assert (out / "graph.json").is_file() and (out / "history.jsonl").is_file()
