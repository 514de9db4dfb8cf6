"""``envsched-gnn bench predictor``: time and memory of one full analytic prediction.

Synthetic graph: N tasks in contiguous environments of 50 to 99 tasks, ``edges_per_task // 3``
within in-neighbours and the rest cross (6 + 12 for 18, the paper's k_in / k_cross),
similarities uniform in [0.05, 1). Synthetic history: ``steps`` steps (200) of B = 64 tasks
(``--observations-per-step`` for more), K = 8 Bernoulli rewards at a per-task rate. Timed:
``AnalyticPredictor.predict`` at step ``steps``, the first call apart ("cold"), then the median
of ``repeats`` warm calls. Memory: peak RSS of one warm call above the RSS before it (Linux
VmHWM, reset through /proc/self/clear_refs).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.graph.hetero import add_adjacency
from envsched_gnn.validation import check_bounds

ENV_SIZE = 50
K = 8


@dataclass
class PredictorBenchArgs:
    """The synthetic graphs and histories ``bench predictor`` times predictions on."""

    tasks: list[int] = field(default_factory=lambda: [2550])
    """N (several allowed)."""
    edges_per_task: int = 18
    """In-edges per task (1/3 within)."""
    repeats: int = 5
    """Warm predictions timed per N."""
    seed: int = 0
    """Seed of the synthetic graph and history."""
    steps: int = 200
    """History length in steps."""
    observations_per_step: int = 64
    """Observations per history step (B, 64 as in the paper)."""
    threads: int = 0
    """Torch threads (0: torch's default)."""

    def __post_init__(self) -> None:
        counts = ("tasks", "edges_per_task", "repeats", "steps")
        check_bounds(
            self,
            integers=(*counts, "seed", "observations_per_step", "threads"),
            at_least=dict.fromkeys(counts, 1),
            non_negative=("seed", "observations_per_step", "threads"),
        )


def synthetic_graph(num_tasks: int, edges_per_task: int, seed: int):
    """A ``HeteroData`` task graph as described in the module docstring (no string ids)."""
    import torch
    from torch_geometric.data import HeteroData

    rng = np.random.default_rng(seed)
    n = num_tasks
    num_envs = max(1, n // ENV_SIZE)
    node = np.arange(n, dtype=np.int64)
    env = node * num_envs // n  # contiguous blocks of 50 to 99 tasks, as pools list them
    size_of = np.bincount(env, minlength=num_envs)
    start_of = np.concatenate(([0], np.cumsum(size_of)[:-1]))
    size, local = size_of[env], node - start_of[env]
    k_in = min(edges_per_task // 3, int(size_of.min()) - 1)
    k_cross = min(edges_per_task - edges_per_task // 3, num_envs - 1)
    data = HeteroData()
    data["task"].num_nodes = n
    data["task"].env = torch.from_numpy(env)
    edges = {}
    if k_in > 0:
        # offsets 1 + k * stride + U[0, stride) are distinct and never 0 (no self-loops)
        stride = (size - 1) // k_in
        jitter = (rng.random((n, k_in)) * stride[:, None]).astype(np.int64)
        offset = 1 + np.arange(k_in) * stride[:, None] + jitter
        src = start_of[env][:, None] + (local[:, None] + offset) % size[:, None]
        edges["within"] = (src.ravel(), np.repeat(node, k_in))
    if k_cross > 0:
        stride = (num_envs - 1) // k_cross
        shift = 1 + np.arange(k_cross) * stride + rng.integers(0, stride, size=(n, k_cross))
        other = (env[:, None] + shift) % num_envs
        pick = (rng.random((n, k_cross)) * size_of[other]).astype(np.int64)
        edges["cross"] = (np.ravel(start_of[other] + pick), np.repeat(node, k_cross))
    for relation in ("within", "cross"):
        src, dst = edges.get(relation, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        store = data["task", relation, "task"]
        store.edge_index = torch.from_numpy(np.stack([src, dst]))
        store.edge_weight = torch.from_numpy(rng.uniform(0.05, 1.0, size=src.shape[0]))
    return add_adjacency(data)


def synthetic_history(
    num_tasks: int, steps: int, per_step: int, seed: int
) -> dict[str, np.ndarray]:
    """History columns (``task``, ``step``, ``m``, ``v``, ``d``) as ``ObservationLog.arrays()``."""
    from envsched_gnn.observations import group_stats

    rng = np.random.default_rng(seed + 1)
    rate = rng.beta(0.7, 0.7, size=num_tasks)
    per_step = min(per_step, num_tasks)
    tasks, step_of, ms, vs, ds = [], [], [], [], []
    for s in range(steps):
        chosen = rng.choice(num_tasks, size=per_step, replace=False)
        rewards = (rng.random((per_step, K)) < rate[chosen, None]).astype(np.float64)
        m, v, d = group_stats(rewards)
        tasks.append(chosen)
        step_of.append(np.full(per_step, s, np.int64))
        ms.append(m)
        vs.append(v)
        ds.append(d)
    return {
        "task": np.concatenate(tasks).astype(np.int64),
        "step": np.concatenate(step_of),
        "m": np.concatenate(ms),
        "v": np.concatenate(vs),
        "d": np.concatenate(ds),
    }


def _resident_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Return freed heap memory to the OS, then reset VmHWM to the current resident size.

    Without the trim, memory the allocator kept from earlier calls hides the peak.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def benchmark(
    num_tasks: int,
    edges_per_task: int = 18,
    *,
    repeats: int = 5,
    seed: int = 0,
    steps: int = 200,
    per_step: int = 64,
) -> dict:
    """Build the synthetic graph and history, then time and measure predictions; returns numbers."""
    import torch

    from envsched_gnn.models.analytic import AnalyticPredictor

    data = synthetic_graph(num_tasks, edges_per_task, seed)
    history = synthetic_history(num_tasks, steps, per_step, seed)
    num_edges = sum(int(data["task", r, "task"].edge_index.shape[1]) for r in ("within", "cross"))
    predictor = AnalyticPredictor()
    start = time.perf_counter()
    first = predictor.predict(data, history, steps)
    cold = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        again = predictor.predict(data, history, steps)
        times.append(time.perf_counter() - start)
    reproducible = all(
        np.array_equal(getattr(first, f), getattr(again, f))
        for f in ("q", "u", "E_v", "E_m", "E_d")
    )
    peak_mb = None
    if _reset_peak():
        before = _resident_kb("VmRSS")
        predictor.predict(data, history, steps)
        peak = _resident_kb("VmHWM")
        if before is not None and peak is not None:
            peak_mb = (peak - before) / 1024
    return {
        "tasks": num_tasks,
        "edges": num_edges,
        "observations": int(history["task"].shape[0]),
        "threads": torch.get_num_threads(),
        "cold_ms": cold * 1e3,
        "median_ms": statistics.median(times) * 1e3,
        "min_ms": min(times) * 1e3,
        "repeats": repeats,
        "peak_rss_delta_mb": peak_mb,
        "bytes_per_node_edge": None
        if peak_mb is None
        else peak_mb * 2**20 / (num_tasks + num_edges),
        "bit_reproducible": reproducible,
    }


def _format(row: dict) -> str:
    peak = "n/a" if row["peak_rss_delta_mb"] is None else f"{row['peak_rss_delta_mb']:.1f}"
    per = "n/a" if row["bytes_per_node_edge"] is None else f"{row['bytes_per_node_edge']:.1f}"
    return (
        f"{row['tasks']:>10,d} {row['edges']:>12,d} {row['observations']:>10,d} "
        f"{row['cold_ms']:>10.1f} {row['median_ms']:>10.1f} {row['min_ms']:>10.1f} "
        f"{peak:>10} {per:>8}"
    )


def _run(namespace: argparse.Namespace) -> int:
    import torch

    args = config_from_args(PredictorBenchArgs, namespace)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"{'tasks':>10} {'edges':>12} {'obs':>10} {'cold_ms':>10} {'median_ms':>10} {'min_ms':>10} "
        f"{'peak_MB':>10} {'B/(N+E)':>8}   (threads: {torch.get_num_threads()})"
    )
    rows = []
    for num_tasks in args.tasks:
        row = benchmark(
            num_tasks,
            args.edges_per_task,
            repeats=args.repeats,
            seed=args.seed,
            steps=args.steps,
            per_step=args.observations_per_step,
        )
        rows.append(row)
        print(_format(row), flush=True)
    print(json.dumps({"benchmark": "predictor", "seed": args.seed, "results": rows}))
    return 0


def register(groups: dict) -> None:
    p = groups["bench"].add_parser(
        "predictor",
        help="median time and peak memory of one full analytic prediction",
        description=__doc__.split("\n\n")[0],
    )
    add_config_flags(p, PredictorBenchArgs)
    p.set_defaults(func=_run)
