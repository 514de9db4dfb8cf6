"""Throughput of the environment runtime: batched tool calls per second across workers."""

from __future__ import annotations

import statistics
import time
from typing import Any

from envsched_gnn.envs.pool import Pool, ToolCall
from envsched_gnn.envs.runtime import EnvRuntime, RuntimeConfig


def bench_runtime(
    pool: Pool, config: RuntimeConfig, *, episodes: int, calls: int, repeats: int
) -> dict[str, Any]:
    """Median timings of ``repeats`` rounds of reset, ``calls`` call batches, score, release.

    Episode ``e`` runs task ``e mod n``; its ``c``-th call is the task's reference solution
    cycled (or its environment's first tool without arguments when it has none).
    """
    tasks = [pool.tasks[index % len(pool.tasks)] for index in range(episodes)]
    plans = []
    for task in tasks:
        plan = task.reference_solution or [ToolCall(pool.envs[task.env_id].tool_names[0])]
        plans.append([plan[turn % len(plan)] for turn in range(calls)])
    episode_ids = [f"bench-{index}" for index in range(episodes)]
    rounds: dict[str, list[float]] = {"reset_s": [], "calls_s": [], "score_s": [], "release_s": []}
    with EnvRuntime(pool, config) as runtime:
        for _ in range(repeats + 1):  # the first round warms the workers up
            marks = [time.perf_counter()]
            runtime.reset([(e, task.task_id) for e, task in zip(episode_ids, tasks, strict=True)])
            marks.append(time.perf_counter())
            for turn in range(calls):
                runtime.call([(e, plan[turn]) for e, plan in zip(episode_ids, plans, strict=True)])
            marks.append(time.perf_counter())
            runtime.score(episode_ids)
            marks.append(time.perf_counter())
            runtime.release(episode_ids)
            marks.append(time.perf_counter())
            for name, begin, end in zip(rounds, marks, marks[1:], strict=False):
                rounds[name].append(end - begin)
    medians = {name: statistics.median(values[1:]) for name, values in rounds.items()}
    return {
        "episodes": episodes,
        "calls_per_episode": calls,
        "workers": config.workers,
        **{name: round(value, 4) for name, value in medians.items()},
        "calls_per_s": round(episodes * calls / medians["calls_s"], 1),
        "episodes_per_s_end_to_end": round(episodes / sum(medians.values()), 1),
    }
