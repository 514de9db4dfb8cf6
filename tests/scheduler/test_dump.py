"""The DUMP baseline on hand-made rewards: spread wins, the unobserved come first, state resumes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from envsched_gnn.scheduler.baselines.dump import DumpConfig
from envsched_gnn.scheduler.registry import make_scheduler
from tests.scheduler.scheduler_checks import grid_graph

SPREAD = [0.0, 1.0] * 4  # |A| = 0.5 / (std 0.5345 + eps) = 0.935 on every rollout


def env_of(graph):
    return dict(zip(graph.task_ids, graph.env_ids, strict=True))


def handmade_rewards(batch, envs, kind):
    """kind per environment: "spread" -> half successes, "zeros" / "ones" -> all 0 / all 1."""
    constant = {"zeros": [0.0] * 8, "ones": [1.0] * 8}
    return {t: SPREAD if kind[envs[t]] == "spread" else constant[kind[envs[t]]] for t in batch}


def test_ucb_and_probabilities_by_hand():
    graph = grid_graph(3, 4)
    dump = make_scheduler("dump", graph, batch_size=2, seed=0)
    np.testing.assert_allclose(dump.env_probabilities(), [1 / 3] * 3)  # nothing seen: uniform
    dump.next_batch(0)
    dump.observe(0, {"task0": SPREAD, "task4": [0.0, 0.0]})  # env0: 8 rollouts, env1: 2
    a = 0.5 / (math.sqrt(8 * 0.25 / 7) + 1e-6)
    n_total = 10
    ucb = [
        a + math.sqrt(2 * math.log(n_total + 1) / 9),
        0.0 + math.sqrt(2 * math.log(n_total + 1) / 3),
        0.0 + math.sqrt(2 * math.log(n_total + 1) / 1),
    ]
    np.testing.assert_allclose(dump.learnability(), [a, 0.0, 0.0])
    np.testing.assert_allclose(dump.ucb_scores(), ucb)
    weights = np.exp(np.array(ucb) / 0.1)
    np.testing.assert_allclose(dump.env_probabilities(), weights / weights.sum())


def test_the_window_keeps_the_last_rollouts():
    graph = grid_graph(2, 4)
    dump = make_scheduler("dump", graph, batch_size=1, seed=0, window_size=10)
    dump.observe(0, {"task0": SPREAD})
    dump.observe(1, {"task1": [1.0] * 8})  # window: 2 spread rollouts, then 8 zeros
    a = 0.5 / (math.sqrt(8 * 0.25 / 7) + 1e-6)
    assert dump.learnability()[0] == pytest.approx(2 * a / 10)
    assert dump.rollouts[0] == 16  # the bonus counts every rollout, not only the window


def test_environments_with_spread_are_chosen_more_often():
    graph = grid_graph(4, 20)
    envs = env_of(graph)
    kind = {"env0": "spread", "env1": "zeros", "env2": "ones", "env3": "spread"}
    dump = make_scheduler("dump", graph, batch_size=4, seed=3)
    counts = dict.fromkeys(kind, 0)
    for step in range(40):
        batch = dump.next_batch(step)
        assert len(set(batch)) == 4
        dump.observe(step, handmade_rewards(batch, envs, kind))
        if step >= 10:
            for t in batch:
                counts[envs[t]] += 1
    spread = counts["env0"] + counts["env3"]
    constant = counts["env1"] + counts["env2"]
    assert spread > 3 * constant, counts
    assert constant > 0, counts  # the bonus keeps the constant environments sampled


def test_unobserved_environments_are_explored_first():
    graph = grid_graph(10, 20)
    envs = env_of(graph)
    dump = make_scheduler("dump", graph, batch_size=3, seed=0)
    observed: set[str] = set()
    for step in range(3):  # at most 9 of 10 environments observed: one is always left
        batch = dump.next_batch(step)
        assert not {envs[t] for t in batch} & observed, step
        dump.observe(step, {t: SPREAD for t in batch})
        observed |= {envs[t] for t in batch}


def test_seeded_deterministic_and_resumes_identically():
    graph = grid_graph(5, 10)
    envs = env_of(graph)
    kind = {"env0": "spread", "env1": "zeros", "env2": "ones", "env3": "spread", "env4": "zeros"}

    def run(scheduler, steps):
        out = []
        for step in steps:
            batch = scheduler.next_batch(step)
            scheduler.observe(step, handmade_rewards(batch, envs, kind))
            out.append(batch)
        return out

    first = make_scheduler("dump", graph, batch_size=6, seed=1, window_size=20)
    again = make_scheduler("dump", graph, batch_size=6, seed=1, window_size=20)
    assert run(first, range(5)) == run(again, range(5))
    assert make_scheduler("dump", graph, batch_size=6, seed=2).next_batch(0) != first.next_batch(0)
    state = json.loads(json.dumps(first.state_dict()))
    expected = run(first, range(5, 10))
    restored = make_scheduler("dump", graph, batch_size=6, seed=0, window_size=20)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.rollouts, again.rollouts)
    assert run(restored, range(5, 10)) == expected


def test_a_small_environment_runs_out_and_the_batch_stays_distinct():
    graph = grid_graph(2, 3)
    dump = make_scheduler("dump", graph, batch_size=5, seed=0)
    dump.observe(0, {"task0": SPREAD, "task1": SPREAD})  # env0 strongly preferred
    batch = dump.next_batch(1)
    assert len(set(batch)) == 5


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="temperature"):
        DumpConfig(temperature=0.0)
    with pytest.raises(ValueError, match="window_size"):
        DumpConfig(window_size=0)
    with pytest.raises(ValueError, match="unknown option"):
        make_scheduler("dump", grid_graph(2, 3), batch_size=2, window=3)
