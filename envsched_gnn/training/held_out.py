"""Held-out evaluation inside training: K sampled episodes per task, rewards summarised
(:mod:`~envsched_gnn.training.rollout_groups`). With ``pool_samples`` > 0 the train split is
summarised too, under ``pool``, unbiased by which tasks a scheduler picked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.training.rollout_groups import rollout_groups, summarize_groups
from envsched_gnn.validation import ConfigError


def split_subset(pool: Pool, split: str, limit: int, seed: int) -> list[str]:
    """The task ids of ``split``: all (``limit`` 0 or at least their number), else a subset of
    ``limit`` drawn with ``seed``, in split order."""
    tasks = [task.task_id for task in pool.split(split)]
    if not tasks:
        raise ConfigError(f"the pool has no task in split {split!r} to evaluate on")
    if 0 < limit < len(tasks):
        chosen = np.random.default_rng([seed, 7919]).choice(len(tasks), limit, replace=False)
        tasks = [tasks[i] for i in sorted(chosen)]
    return tasks


def heldout_evaluator(
    tasks: Sequence[str],
    k: int,
    seed: int,
    pool_tasks: Sequence[str] = (),
    pool_samples: int = 0,
) -> Callable[[Any, int], dict[str, Any]]:
    """``evaluate(engine, step)``: reward summary over ``tasks`` x ``k`` (and ``pool_tasks``)."""

    def evaluate(engine: Any, step: int) -> dict[str, Any]:
        result = _evaluation(engine, tasks, k, seed)
        if pool_tasks and pool_samples:
            result["pool"] = _evaluation(engine, pool_tasks, pool_samples, seed)
        return result

    return evaluate


def _evaluation(engine: Any, tasks: Sequence[str], k: int, seed: int) -> dict[str, Any]:
    rolled = rollout_groups(engine, list(tasks), k, seed)
    summary = summarize_groups(rolled.rewards)
    return {
        "mean_reward": summary["mean_reward"],
        # beside a success rate, the partial credit the same episodes earned
        "mean_check_fraction": float(np.mean(list(rolled.check_fractions.values()))),
        "full_success_rate": summary["full_success_rate"],
        "zero_variance_share": summary["zero_variance_share"],
        "malformed_call_rate": rolled.malformed_call_rate,
        "rollout_s": rolled.rollout_s,
        "tasks": len(tasks),
        "k": k,
        "per_task": {task_id: list(rolled.rewards[task_id]) for task_id in tasks},
    }
