"""K sampled episodes per task, rolled out in batches, and the summary of their rewards.

Over N tasks with group mean m_i and population variance v_i: ``mean_reward`` (mean m_i),
``full_success_rate`` (share of episodes with reward 1), ``zero_variance_share`` (share of
tasks whose K rewards are all equal, as ``batch/zero_variance_share``) and
``mean_reward_variance`` (mean v_i). Every held-out and policy evaluation
rolls out and summarises through here.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from envsched_gnn.observations import group_stats


def summarize_groups(groups: dict[str, list[float]]) -> dict[str, float]:
    """The module docstring's summary of ``{task_id: [r_1..r_K]}`` (same K for every task)."""
    rewards = np.array(list(groups.values()), dtype=np.float64)
    m, v, _ = group_stats(rewards)
    return {
        "tasks": len(groups),
        "mean_reward": float(m.mean()),
        "full_success_rate": float(np.mean(rewards == 1.0)),
        "zero_variance_share": float(np.mean(rewards.min(axis=1) == rewards.max(axis=1))),
        "mean_reward_variance": float(v.mean()),
    }


@dataclass
class RolloutGroups:
    """The rewards of K sampled episodes per task, with what the episodes ran into."""

    rewards: dict[str, list[float]]
    """Task id -> its K rewards, in sample order."""
    check_fractions: dict[str, list[float]] = field(default_factory=dict)
    """Task id -> the share of its checks each episode passed (the ``fraction`` reward, also
    where the runtime scores ``success``), in sample order."""
    finish_reasons: Counter[str] = field(default_factory=Counter)
    malformed_calls: int = 0
    rollout_s: float = 0.0

    @property
    def episodes(self) -> int:
        return sum(len(group) for group in self.rewards.values())

    @property
    def malformed_call_rate(self) -> float:
        """Malformed tool calls per episode."""
        return self.malformed_calls / self.episodes


def rollout_groups(
    engine: Any,
    tasks: Sequence[str],
    k: int,
    seed: int,
    tasks_per_batch: int = 16,
    progress: str | None = None,
) -> RolloutGroups:
    """Roll out ``k`` samples of each task id with ``engine``, ``tasks_per_batch`` tasks a batch."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not tasks:
        raise ValueError("no task to roll out")
    if len(set(tasks)) < len(tasks):
        raise ValueError("rollout_groups: task ids must be distinct")
    groups = RolloutGroups(defaultdict(list), defaultdict(list))
    start = time.perf_counter()
    bar = tqdm(total=len(tasks), desc=progress, unit="task", disable=progress is None)
    for first in range(0, len(tasks), tasks_per_batch):
        chunk = tasks[first : first + tasks_per_batch]
        for episode in engine.rollout(chunk, k=k, seed=seed):
            groups.rewards[episode.task_id].append(episode.reward)
            checks = episode.checks
            groups.check_fractions[episode.task_id].append(
                sum(checks) / len(checks) if checks else 0.0
            )
            groups.finish_reasons[episode.finish_reason] += 1
            groups.malformed_calls += episode.malformed_calls
        bar.update(len(chunk))
    bar.close()
    groups.rollout_s = time.perf_counter() - start
    groups.rewards = dict(groups.rewards)
    groups.check_fractions = dict(groups.check_fractions)
    return groups
