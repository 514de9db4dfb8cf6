"""``envsched-gnn bench scheduler``: one full EnvSched scheduling step on synthetic data.

A step is prediction plus greedy selection (B = 64) on a synthetic graph (environments of 50
tasks, k_in = 6, k_cross = 12) after ``--history-steps`` steps of random rewards. Prints the
median wall time of a step and its parts and the ``tracemalloc`` peak of one step per size.
Targets on 2 cores: <= 20 ms at 2,550 tasks, <= 2 s at 1,000,000.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.graph.task_graph import RelationEdges, TaskGraph
from envsched_gnn.validation import check_bounds

DEFAULT_SIZES = (2_550, 100_000, 1_000_000)


@dataclass
class SchedulerBenchArgs:
    """The synthetic pools ``bench scheduler`` times a step on."""

    tasks: list[int] | None = None
    """Pool size N (repeatable; default 2550, 100000 and 1000000)."""
    repeats: int = 5
    """Timed steps per size (median)."""
    history_steps: int = 5
    """Steps of random rewards observed first."""
    seed: int = 0
    """Seed of the graph and the rewards."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("tasks", "repeats", "history_steps", "seed"),
            at_least={"tasks": 64, "repeats": 1},  # a pool holds at least B = 64 tasks
            non_negative=("history_steps", "seed"),
            optional=("tasks",),
        )


def synthetic_graph(
    num_tasks: int, *, tasks_per_env: int = 50, k_in: int = 6, k_cross: int = 12, seed: int = 0
) -> TaskGraph:
    """Tasks ``t<i>`` in environments ``e<i // tasks_per_env>``; random top-k style edges.

    Each task gets ``k_in`` distinct in-neighbours from its own environment and ``k_cross``
    from other environments, similarities uniform in [0.05, 1). Vectorised (1M tasks in
    seconds).
    """
    rng = np.random.default_rng(seed)
    n, t = int(num_tasks), int(tasks_per_env)
    env = np.arange(n, dtype=np.int64) // t
    env_start = env * t
    env_len = np.minimum(env_start + t, n) - env_start
    dst_in = np.repeat(np.arange(n, dtype=np.int64), k_in)
    k_own = np.minimum(k_in, env_len - 1)
    local = np.arange(n) - env_start
    start = rng.integers(0, np.maximum(env_len - 1, 1))
    offsets = 1 + (start[:, None] + np.arange(k_in)) % np.maximum(env_len - 1, 1)[:, None]
    src_in = (env_start[:, None] + (local[:, None] + offsets) % env_len[:, None]).ravel()
    keep = (np.arange(k_in)[None, :] < k_own[:, None]).ravel()
    src_in, dst_in = src_in[keep], dst_in[keep]
    edges = {"within": RelationEdges(src_in, dst_in, rng.uniform(0.05, 1.0, src_in.shape[0]))}
    if n > t and k_cross > 0:
        dst_x = np.repeat(np.arange(n, dtype=np.int64), k_cross)
        own_start = np.repeat(env_start, k_cross)
        own_len = np.repeat(env_len, k_cross)
        src_x = rng.integers(0, n - own_len)
        src_x = np.where(src_x >= own_start, src_x + own_len, src_x)
        edges["cross"] = RelationEdges(src_x, dst_x, rng.uniform(0.05, 1.0, src_x.shape[0]))
    task_ids = [f"t{i}" for i in range(n)]
    env_ids = [f"e{e}" for e in env.tolist()]
    return TaskGraph(task_ids, env_ids, edges)


def random_rewards(
    task_ids: list[str], rng: np.random.Generator, k: int = 8
) -> dict[str, list[float]]:
    """K binary rewards per task, each task with its own success rate (many all-0 / all-1)."""
    rate = rng.beta(0.5, 0.5, len(task_ids))
    draws = (rng.random((len(task_ids), k)) < rate[:, None]).astype(float)
    return {t: row.tolist() for t, row in zip(task_ids, draws, strict=True)}


def bench_one(num_tasks: int, repeats: int, history_steps: int, seed: int) -> dict[str, float]:
    """Build the scheduler on a synthetic graph, load a history, then time ``repeats`` steps."""
    start = time.perf_counter()
    graph = synthetic_graph(num_tasks, seed=seed)
    graph_seconds = time.perf_counter() - start
    return {**time_steps(graph, repeats, history_steps, seed), "graph_seconds": graph_seconds}


def time_steps(graph: TaskGraph, repeats: int, history_steps: int, seed: int) -> dict[str, float]:
    """EnvSched on ``graph`` (B = 64): load ``history_steps`` random steps, then the median
    of ``repeats`` timed steps and the traced peak memory of one more."""
    from envsched_gnn.scheduler.envsched import EnvSchedScheduler

    start = time.perf_counter()
    scheduler = EnvSchedScheduler(graph, batch_size=64, seed=seed)
    build_seconds = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    for step in range(history_steps):
        batch = scheduler.next_batch(step)
        scheduler.observe(step, random_rewards(batch, rng))
    step = history_steps
    totals, predicts = [], []
    for _ in range(repeats):
        begin = time.perf_counter()
        scheduler.next_batch(step)
        totals.append(time.perf_counter() - begin)
        predicts.append(scheduler.last_batch.extra["scheduler/predict_seconds"])
    tracemalloc.start()
    scheduler.next_batch(step)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    total = statistics.median(totals)
    predict = statistics.median(predicts)
    return {
        "tasks": float(graph.num_tasks),
        "edges": float(sum(len(e) for e in graph.edges.values())),
        "step_seconds": total,
        "predict_seconds": predict,
        "select_seconds": total - predict,
        "peak_mib": peak / 2**20,
        "build_seconds": build_seconds,
    }


def _run(namespace: argparse.Namespace) -> int:
    args = config_from_args(SchedulerBenchArgs, namespace)
    sizes = args.tasks or list(DEFAULT_SIZES)
    print(
        f"{'tasks':>10} {'edges':>11} {'step_ms':>9} {'predict_ms':>11} {'select_ms':>10} "
        f"{'peak_MiB':>9} {'setup_s':>8}"
    )
    for n in sizes:
        r = bench_one(n, args.repeats, args.history_steps, args.seed)
        print(
            f"{int(r['tasks']):>10} {int(r['edges']):>11} {1e3 * r['step_seconds']:>9.1f} "
            f"{1e3 * r['predict_seconds']:>11.1f} {1e3 * r['select_seconds']:>10.1f} "
            f"{r['peak_mib']:>9.1f} {r['build_seconds']:>8.2f}",
            flush=True,
        )
    return 0


def register(groups: dict) -> None:
    p = groups["bench"].add_parser(
        "scheduler",
        help="time one EnvSched scheduling step (prediction + selection, B=64)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_config_flags(p, SchedulerBenchArgs, repeatable=["tasks"])
    p.set_defaults(func=_run)
