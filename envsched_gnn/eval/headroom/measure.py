"""Headroom: how much GRPO could gain from a policy on a pool, measured from K samples per task.

GRPO only reinforces what the policy already samples (Yue et al. 2025). For task i with
rewards r(i,1..K):

    m_i = (1/K) sum_k r(i,k)          mean
    b_i = max_k r(i,k)                best of K
    s_i = max_k r(i,k) - min_k r(i,k) spread
    h_i = b_i - m_i                   headroom: what a perfect update could lift task i by

A group is *zero-variance* when s_i = 0 and *all ones* when min_k r(i,k) = 1.
:func:`headroom_table` gives the means of m, b and h (h with a Student-t 95 % interval) and the
zero-variance, all-ones and all-zeros shares, overall and per split, environment, checklist
length, operation count and kind. :func:`variance_table` gives the share of the variance of m_i,
of 1[s_i = 0] and of its two parts 1[all zeros] and 1[all ones] between environments, call
counts and operation patterns (:func:`~envsched_gnn.eval.stats.between_group_share`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from envsched_gnn.envs.abstract import PATTERN_SEPARATOR, operation_pattern
from envsched_gnn.eval.stats import between_group_share, mean_ci

GROUPINGS = ("split", "env", "checks", "calls", "operation")
"""What :func:`headroom_table` groups tasks by: the pool split, the environment, the number of
checks of the task's checklist, the number of calls of its reference solution, and each
operation kind (category) its abstract holds (a task with several kinds is in each group)."""

PARTITIONS = ("env", "calls", "pattern")
"""What :func:`variance_table` splits the variance by: the environment, the call count, and the
operation pattern (the abstract's category sequence)."""


def group_headroom(rewards: Sequence[float]) -> dict[str, float]:
    """``m``, ``b``, ``s`` and ``h`` of one task's K rewards (module docstring)."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.size < 2:
        raise ValueError(f"headroom needs K >= 2 rewards per task, got {r.size}")
    mean, best, worst = float(r.mean()), float(r.max()), float(r.min())
    return {"mean": mean, "best": best, "spread": best - worst, "headroom": best - mean}


def summarize_headroom(groups: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """The module docstring's summary over ``{task_id: [r_1..r_K]}``."""
    if not groups:
        raise ValueError("summarize_headroom: no task")
    stats = [group_headroom(r) for r in groups.values()]
    rows = [np.asarray(r, dtype=np.float64) for r in groups.values()]
    headroom = mean_ci([s["headroom"] for s in stats])
    return {
        "tasks": len(stats),
        "mean_reward": float(np.mean([s["mean"] for s in stats])),
        "mean_best": float(np.mean([s["best"] for s in stats])),
        "headroom": headroom["mean"],
        "headroom_ci95": headroom["ci95"],
        "mean_spread": float(np.mean([s["spread"] for s in stats])),
        "zero_variance_share": float(np.mean([s["spread"] == 0 for s in stats])),
        "all_ones_share": float(np.mean([r.min() == 1.0 for r in rows])),
        "all_zeros_share": float(np.mean([r.max() == 0.0 for r in rows])),
    }


def headroom_stat(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary's headroom as a :func:`~envsched_gnn.eval.stats.mean_ci` mapping (for
    :func:`~envsched_gnn.eval.stats.format_ci`)."""
    return {"mean": summary["headroom"], "ci95": summary["headroom_ci95"]}


def headroom_table(
    groups: Mapping[str, Sequence[float]], key_of: Mapping[str, Callable[[str], Any]]
) -> dict[str, Any]:
    """``{"overall": summary, "by_<name>": {value: summary}}`` for every grouping ``name`` in
    ``key_of`` (a function of the task id giving its group, or a tuple of groups the task is
    in each of); groups sorted by value."""
    table: dict[str, Any] = {"overall": summarize_headroom(groups)}
    for name, key in key_of.items():
        members: dict[Any, dict[str, Sequence[float]]] = {}
        for task_id, rewards in groups.items():
            values = key(task_id)
            for value in values if isinstance(values, tuple) else (values,):
                members.setdefault(value, {})[task_id] = rewards
        table[f"by_{name}"] = {
            str(value): summarize_headroom(members[value]) for value in sorted(members)
        }
    return table


def pool_groupings(pool: Any) -> dict[str, Callable[[str], Any]]:
    """The :data:`GROUPINGS` of a pool's tasks."""
    return {
        "split": lambda t: pool.task(t).split or "-",
        "env": lambda t: pool.task(t).env_id,
        "checks": lambda t: len(pool.task(t).checklist_with_func),
        "calls": lambda t: len(pool.task(t).reference_solution or ()),
        "operation": lambda t: tuple(
            sorted(set(operation_pattern(pool.task(t).abstract).split(PATTERN_SEPARATOR)))
        ),
    }


def pool_partitions(pool: Any) -> dict[str, Callable[[str], Any]]:
    """The :data:`PARTITIONS` of a pool's tasks (one group per task)."""
    return {
        "env": lambda t: pool.task(t).env_id,
        "calls": lambda t: len(pool.task(t).reference_solution or ()),
        "pattern": lambda t: operation_pattern(pool.task(t).abstract),
    }


def variance_table(
    groups: Mapping[str, Sequence[float]],
    partition_of: Mapping[str, Callable[[str], Any]],
    seed: int = 0,
) -> dict[str, dict[str, dict]]:
    """``{statistic: {partition: between_group_share}}`` over ``{task_id: [r_1..r_K]}``, for
    the statistics ``mean_reward`` (m_i), ``zero_variance`` (1[s_i = 0]), ``all_zeros``
    (1[max_k r = 0]) and ``all_ones`` (1[min_k r = 1]) and every partition in ``partition_of``
    (module docstring)."""
    tasks = list(groups)
    stats = [group_headroom(groups[t]) for t in tasks]
    statistics = {
        "mean_reward": [s["mean"] for s in stats],
        "zero_variance": [float(s["spread"] == 0) for s in stats],
        "all_zeros": [float(max(groups[t]) == 0.0) for t in tasks],
        "all_ones": [float(min(groups[t]) == 1.0) for t in tasks],
    }
    return {
        name: {
            partition: between_group_share(values, [key(t) for t in tasks], seed=seed)
            for partition, key in partition_of.items()
        }
        for name, values in statistics.items()
    }


def policy_headroom(
    engine: Any,
    pool: Any,
    tasks: Sequence[str],
    k: int,
    seed: int,
    tasks_per_batch: int = 16,
    progress: str | None = None,
) -> dict[str, Any]:
    """K samples of each task id with ``engine`` (a ``RolloutEngine``): the
    :func:`headroom_table` by the :data:`GROUPINGS`, the :func:`variance_table` by the
    :data:`PARTITIONS` (``variance``), the per-task rewards (``per_task``), the
    malformed calls per episode and the rollout seconds (a progress bar named ``progress``)."""
    from envsched_gnn.training.rollout_groups import rollout_groups

    rolled = rollout_groups(engine, tasks, k, seed, tasks_per_batch, progress)
    return {
        **headroom_table(rolled.rewards, pool_groupings(pool)),
        "variance": variance_table(rolled.rewards, pool_partitions(pool), seed),
        "per_task": dict(rolled.rewards),
        "malformed_call_rate": rolled.malformed_call_rate,
        "rollout_s": rolled.rollout_s,
    }
