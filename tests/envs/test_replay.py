"""The one replay of fixed calls, on the hand-made pool in the sandboxed runtime."""

from __future__ import annotations

import pytest

from envsched_gnn.envs.replay import replay
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from tests.envs.handmade_pool import handmade_pool


def test_snapshots_change_how_calls_are_batched_not_what_they_give():
    pool = handmade_pool()
    runs = [(t.task_id, t.reference_solution) for t in pool.tasks]
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        batched = replay(runtime, runs)
        stepped = replay(runtime, runs, runtime.state)
    assert [run.score.reward for run in batched] == [1.0] * len(pool.tasks)
    assert [run.score for run in stepped] == [run.score for run in batched]
    assert [run.results for run in stepped] == [run.results for run in batched]
    assert [len(run.results) for run in batched] == [len(calls) for _, calls in runs]
    assert [len(run.states) for run in stepped] == [len(calls) + 1 for _, calls in runs]
    assert all(state["success"] for run in stepped for state in run.states)
    assert all(run.states == [] for run in batched)


def test_a_call_that_raises_leaves_no_episode_behind():
    pool = handmade_pool()
    task = pool.tasks[0]
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        with pytest.raises(AttributeError):  # not a ToolCall: the runtime raises on it
            replay(runtime, [(task.task_id, task.reference_solution), (task.task_id, [None])])
        assert runtime._episodes == {}
