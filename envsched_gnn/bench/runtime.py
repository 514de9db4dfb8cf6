"""``envsched-gnn bench runtime``: batched tool calls per second across the runtime's workers.

Also what the sandbox costs once per worker: the first (warm-up) round starts a sandboxed
worker per environment; ``worker_start_s`` is the median wall time to start one alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from typing import Any

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.envs.commands import add_runtime_flags, runtime_config
from envsched_gnn.envs.pool import Pool, ToolCall
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.sandbox import WorkerProcess, start_all
from envsched_gnn.validation import check_bounds, check_paths

START_SAMPLES = 5


@dataclass
class RuntimeBenchArgs:
    """What ``bench runtime`` measures."""

    pool: str
    """Pool folder."""
    episodes: int = 512
    """Episodes per round."""
    calls: int = 4
    """Tool calls per episode."""
    repeats: int = 3
    """Measured repetitions (median)."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("episodes", "calls", "repeats"),
            at_least={"episodes": 1, "repeats": 1},
            non_negative=("calls",),
        )


def register(groups: dict) -> None:
    p = groups["bench"].add_parser(
        "runtime",
        help="environment runtime throughput (tool calls per second)",
        description=(
            "Resets EPISODES episodes of the pool's tasks, makes CALLS rounds of one tool call "
            "per episode (the task's reference solution, cycled), scores and releases them; "
            "prints the timings as JSON."
        ),
    )
    add_config_flags(p, RuntimeBenchArgs, metavars={"pool": "DIR"})
    add_runtime_flags(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool

    config_from_args(RuntimeBenchArgs, args)  # its bounds, before a worker starts
    check_paths(folders={"--pool": args.pool})
    result = bench_runtime(
        load_pool(args.pool),
        runtime_config(args),
        episodes=args.episodes,
        calls=args.calls,
        repeats=args.repeats,
    )
    print(json.dumps(result))
    return 0


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
