"""Throughput of the environment runtime: batched tool calls per second across workers.

Also what the sandbox costs once per worker: the first (warm-up) round starts a sandboxed
worker per environment; ``worker_start_s`` is the median wall time to start one alone.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from envsched_gnn.envs.pool import Pool, ToolCall
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.sandbox import WorkerProcess, start_all

START_SAMPLES = 5


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
    warmup_s = 0.0
    with EnvRuntime(pool, config) as runtime:
        for repeat in range(repeats + 1):  # the first round starts and warms the workers
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
            if repeat == 0:
                warmup_s = marks[-1] - marks[0]
        workers_used = len(runtime.pids)
    medians = {name: statistics.median(values[1:]) for name, values in rounds.items()}
    return {
        "episodes": episodes,
        "calls_per_episode": calls,
        "workers": config.workers,
        **{name: round(value, 4) for name, value in medians.items()},
        "calls_per_s": round(episodes * calls / medians["calls_s"], 1),
        "episodes_per_s_end_to_end": round(episodes / sum(medians.values()), 1),
        "workers_used": workers_used,
        "warmup_s": round(warmup_s, 4),
        "worker_start_s": round(_worker_start_s(config), 4),
        "sandboxed": _sandboxed(config),
    }


def _worker_start_s(config: RuntimeConfig) -> float:
    """Median wall time to start one worker alone (launch, id maps, ``ready``) and stop it."""
    times = []
    for _ in range(START_SAMPLES):
        begin = time.perf_counter()
        [worker] = start_all([WorkerProcess(config)])
        times.append(time.perf_counter() - begin)
        worker.stop()
    return statistics.median(times)


def _sandboxed(config: RuntimeConfig) -> bool:
    [worker] = start_all([WorkerProcess(config)])
    worker.stop()
    return worker.isolated
